// The token-block hashing rules, checked on the wasm BlockHasher and its twin
// alike. Expected values come from hash-wasm's xxhash3 over hand-built bytes,
// never from the code under test.
import { xxhash3 } from 'hash-wasm';
import { describe, expect, it } from 'vitest';
import { BlockHasher, DEFAULT_SEED, seedFor } from '../../bindings/block-hasher.js';
import { Core } from '../../bindings/core.js';
import { BlockHasher as TwinBlockHasher } from '../../bindings/reference/block-hasher.js';

const U64_MAX = (1n << 64n) - 1n;
const utf8 = new TextEncoder();

async function oracle(bytes: Uint8Array, seed: bigint): Promise<bigint> {
  return BigInt('0x' + (await xxhash3(bytes, Number(seed & 0xffffffffn), Number(seed >> 32n))));
}

function le32(tokens: number[]): Uint8Array {
  const bytes = new Uint8Array(tokens.length * 4);
  const view = new DataView(bytes.buffer);
  tokens.forEach((t, i) => view.setUint32(i * 4, t, true));
  return bytes;
}

function le64Pair(a: bigint, b: bigint): Uint8Array {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, a, true);
  view.setBigUint64(8, b, true);
  return bytes;
}

const wasm = new BlockHasher();
const twin = new TwinBlockHasher();
const hashers = [
  ['wasm', wasm],
  ['twin', twin],
] as const;

describe.each(hashers)('BlockHasher (%s)', (_name, hasher) => {
  it('known answer: tokens [1,2,3,4], block size 4, no salt -> 14643705804678351452', () => {
    expect([...hasher.localHashes([1, 2, 3, 4], 4)]).toEqual([14643705804678351452n]);
  });

  it('XXH3-64 over each complete block of block_size tokens, each token as 4 little-endian bytes', async () => {
    const tokens = [0, 1, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 0x80000000, 151_643, 7, 42, 3];
    const seed = 987654321n;
    for (const blockSize of [1, 3, 4, 6, 12]) {
      const want: bigint[] = [];
      for (let at = 0; at + blockSize <= tokens.length; at += blockSize) {
        want.push(await oracle(le32(tokens.slice(at, at + blockSize)), seed));
      }
      expect([...hasher.localHashes(tokens, blockSize, seed)]).toEqual(want);
    }
  });

  it('uses the long XXH3 path for blocks over 240 bytes (block size 64 and 300)', async () => {
    const tokens = Array.from({ length: 700 }, (_, i) => (i * 2654435761) >>> 0);
    for (const blockSize of [64, 300]) {
      const local = hasher.localHashes(tokens, blockSize);
      expect(local[1]).toBe(await oracle(le32(tokens.slice(blockSize, 2 * blockSize)), DEFAULT_SEED));
    }
  });

  it('a trailing partial block is not hashed', () => {
    const tokens = Array.from({ length: 11 }, (_, i) => i + 1);
    const whole = hasher.localHashes(tokens.slice(0, 8), 4);
    expect([...hasher.localHashes(tokens, 4)]).toEqual([...whole]);
    expect(hasher.localHashes(tokens.slice(0, 3), 4)).toHaveLength(0);
    expect(hasher.localHashes([], 4)).toHaveLength(0);
  });

  it('block_size 0 is a clear error naming blockSize', () => {
    expect(() => hasher.localHashes([1, 2, 3, 4], 0)).toThrow(RangeError);
    expect(() => hasher.localHashes([1, 2, 3, 4], 0)).toThrow(/blockSize/);
    expect(() => hasher.localHashes([1, 2, 3, 4], 2.5)).toThrow(/blockSize/);
    expect(() => hasher.localHashes([1, 2, 3, 4], '4' as unknown as number)).toThrow(TypeError);
  });

  it('a non-integer token is a clear error naming the token', () => {
    expect(() => hasher.localHashes([1, 2.5, 3, 4], 4)).toThrow(new RangeError('tokens[1] must be an integer in [0, 2^32), got 2.5'));
    expect(() => hasher.localHashes([1, 2, NaN, 4], 4)).toThrow(/tokens\[2\]/);
    expect(() => hasher.localHashes([1, '2', 3, 4] as unknown as number[], 4)).toThrow(new TypeError('tokens[1] must be a number, got string'));
    expect(() => hasher.localHashes([1, 2, 3, null] as unknown as number[], 4)).toThrow(TypeError);
  });

  it('a token outside [0, 2^32) is a clear error, even in a trailing partial block', () => {
    expect(() => hasher.localHashes([1, -1, 3, 4], 4)).toThrow(/tokens\[1\].*got -1/);
    expect(() => hasher.localHashes([1, 2, 3, 2 ** 32], 4)).toThrow(/tokens\[3\].*got 4294967296/);
    expect(() => hasher.localHashes([1, 2, 3, 4, 2 ** 40], 4)).toThrow(/tokens\[4\]/);
    expect(() => hasher.localHashes(42 as unknown as number[], 4)).toThrow(TypeError);
  });

  it('a seed outside [0, 2^64) or not a bigint is a clear error naming the seed', () => {
    expect(() => hasher.localHashes([1, 2, 3, 4], 4, -1n)).toThrow(/seed must be in \[0, 2\^64\)/);
    expect(() => hasher.localHashes([1, 2, 3, 4], 4, 1n << 64n)).toThrow(RangeError);
    expect(() => hasher.sequenceHashes(new BigUint64Array(2), 7 as unknown as bigint)).toThrow(TypeError);
  });

  it('seed 1337 by default', async () => {
    expect(DEFAULT_SEED).toBe(1337n);
    expect(seedFor()).toBe(1337n);
    const tokens = [5, 6, 7, 8];
    expect(hasher.localHashes(tokens, 4)[0]).toBe(await oracle(le32(tokens), 1337n));
    const local = hasher.localHashes([...tokens, ...tokens], 4);
    expect(hasher.sequenceHashes(local)[1]).toBe(await oracle(le64Pair(local[0]!, local[1]!), 1337n));
  });

  it('chained sequence hashes: seq[0] = local[0]; seq[i] = XXH3(LE64(seq[i-1]) ++ LE64(local[i]), seed)', async () => {
    const seed = (1n << 63n) + 12345n;
    const local = BigUint64Array.from([0n, 1n, U64_MAX, 0x0123456789abcdefn, 14643705804678351452n]);
    const seq = hasher.sequenceHashes(local, seed);
    expect(seq[0]).toBe(local[0]);
    for (let i = 1; i < local.length; i++) expect(seq[i]).toBe(await oracle(le64Pair(seq[i - 1]!, local[i]!), seed));
    expect(hasher.sequenceHashes(new BigUint64Array(0), seed)).toHaveLength(0);
  });

  it('sequenceHashes rejects anything but a BigUint64Array of local hashes', () => {
    expect(() => hasher.sequenceHashes([1n, 2n] as unknown as BigUint64Array)).toThrow(new TypeError('local must be a BigUint64Array'));
  });

  it('xxh3 is raw XXH3-64 with seed 0 unless given', async () => {
    const bytes = utf8.encode('kv-router');
    expect(hasher.xxh3(bytes)).toBe(await oracle(bytes, 0n));
    expect(hasher.xxh3(bytes, U64_MAX)).toBe(await oracle(bytes, U64_MAX));
    expect(() => hasher.xxh3('kv' as unknown as Uint8Array)).toThrow(new TypeError('bytes must be a Uint8Array'));
  });
});

describe('seedFor', () => {
  it('a LoRA adapter name adds XXH3(UTF-8 name bytes, seed 0) to the seed', async () => {
    const name = 'sql-adapter-ü';
    expect(seedFor({ lora: name })).toBe((1337n + (await oracle(utf8.encode(name), 0n))) & U64_MAX);
    expect(seedFor({ seed: 5n, lora: name })).toBe((5n + (await oracle(utf8.encode(name), 0n))) & U64_MAX);
  });

  it('a cache salt adds XXH3(UTF-8 salt bytes, seed 1) to the seed', async () => {
    const salt = 'tenant-42';
    expect(seedFor({ salt })).toBe((1337n + (await oracle(utf8.encode(salt), 1n))) & U64_MAX);
    const both = 1337n + (await oracle(utf8.encode('a'), 0n)) + (await oracle(utf8.encode('b'), 1n));
    expect(seedFor({ lora: 'a', salt: 'b' })).toBe(both & U64_MAX);
    // The different inner seeds keep a salt from colliding with an adapter of the same name.
    expect(seedFor({ salt: 'x' })).not.toBe(seedFor({ lora: 'x' }));
  });

  it('additions wrap at 2^64', async () => {
    const added = await oracle(utf8.encode('wrap'), 0n);
    expect(seedFor({ seed: U64_MAX, lora: 'wrap' })).toBe(added - 1n);
    const salted = await oracle(utf8.encode('wrap'), 1n);
    expect(seedFor({ seed: U64_MAX, lora: 'wrap', salt: 'wrap' })).toBe((added + salted - 1n) & U64_MAX);
  });

  it('empty strings count as absent', () => {
    expect(seedFor({ lora: '', salt: '' })).toBe(1337n);
    expect(seedFor({ seed: 9n, lora: null, salt: undefined })).toBe(9n);
    expect(seedFor({ lora: 'a', salt: '' })).toBe(seedFor({ lora: 'a' }));
  });

  it('rejects a lora or salt that is not a string, and a seed out of range, naming the field', () => {
    expect(() => seedFor({ lora: 3 as unknown as string })).toThrow(new TypeError('lora must be a string, got number'));
    expect(() => seedFor({ salt: {} as unknown as string })).toThrow(/^salt must be a string/);
    expect(() => seedFor({ seed: 1n << 64n })).toThrow(RangeError);
  });

  it('seeds block hashes so that the same tokens under different adapters never share blocks', () => {
    const tokens = [1, 2, 3, 4];
    const base = wasm.localHashes(tokens, 4, seedFor())[0];
    expect(wasm.localHashes(tokens, 4, seedFor({ lora: 'x' }))[0]).not.toBe(base);
    expect(wasm.localHashes(tokens, 4, seedFor({ salt: 'x' }))[0]).not.toBe(base);
  });
});

describe('BlockHasher zero-copy path (wasm)', () => {
  it('hashInto hashes the tokens written through tokenView and exposes them as views and pointers', () => {
    const core = new Core();
    const hasher = new BlockHasher({ core });
    const tokens = Array.from({ length: 1000 }, (_, i) => (i * 7919) % 151_000);
    const seed = seedFor({ lora: 'a' });
    hasher.tokenView(tokens.length).set(tokens);
    const count = hasher.hashInto(tokens.length, 16, seed, true);
    expect(count).toBe(62);
    const local = twin.localHashes(tokens, 16, seed);
    expect([...hasher.localView(count)]).toEqual([...local]);
    expect([...hasher.sequenceView(count)]).toEqual([...twin.sequenceHashes(local, seed)]);
    // Other kernels of the same Core read the hashes at the exported addresses.
    expect([...core.u64(hasher.localPtr, count)]).toEqual([...local]);
    expect([...core.u64(hasher.sequencePtr, count)]).toEqual([...hasher.sequenceView(count)]);
  });

  it('hashInto without chained leaves no sequence hashes to read', () => {
    const hasher = new BlockHasher();
    hasher.tokenView(8).set([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(hasher.hashInto(8, 4, DEFAULT_SEED, false)).toBe(2);
    expect(hasher.localView(2)).toHaveLength(2);
    expect(() => hasher.sequenceView(1)).toThrow(/count must be an integer in \[0, 0\]/);
    expect(() => hasher.localView(3)).toThrow(RangeError);
  });

  it('hashInto refuses more tokens than tokenView reserved, or tokens another call has overwritten', () => {
    const hasher = new BlockHasher();
    hasher.tokenView(8).set([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(() => hasher.hashInto(9, 4, DEFAULT_SEED, false)).toThrow(/n must be an integer in \[0, 8\]/);
    hasher.xxh3(new Uint8Array(3));
    expect(() => hasher.hashInto(8, 4, DEFAULT_SEED, false)).toThrow(RangeError);
    expect(() => hasher.hashInto(0, 0, DEFAULT_SEED, false)).toThrow(/blockSize/);
  });

  it('views made after memory grew are fresh; the core hashes a prompt that forces growth', () => {
    const core = new Core();
    const hasher = new BlockHasher({ core });
    hasher.tokenView(64).fill(1);
    hasher.hashInto(64, 16, DEFAULT_SEED, true);
    const before = hasher.localView(4);
    const generation = core.generation;
    const n = 4_000_000;
    const big = hasher.tokenView(n);
    for (let i = 0; i < n; i++) big[i] = i;
    const count = hasher.hashInto(n, 1024, DEFAULT_SEED, true);
    expect(core.generation).toBeGreaterThan(generation);
    expect(before.byteLength).toBe(0);
    expect(count).toBe(Math.floor(n / 1024));
    const last = count - 1;
    const lastBlock = Array.from({ length: 1024 }, (_, i) => last * 1024 + i);
    expect(hasher.localView(count)[last]).toBe(twin.localHashes(lastBlock, 1024)[0]);
  });

  it('localHashes returns a copy the caller owns', () => {
    const hasher = new BlockHasher();
    const first = hasher.localHashes([1, 2, 3, 4], 4);
    hasher.localHashes([9, 9, 9, 9], 4);
    expect([...first]).toEqual([14643705804678351452n]);
  });

  it('hashing the same prompt size again holds no more core memory', () => {
    const core = new Core();
    const hasher = new BlockHasher({ core });
    const tokens = new Uint32Array(10_000).map((_, i) => i);
    hasher.localHashes(tokens, 64);
    const held = core.liveBytes;
    for (let i = 0; i < 20; i++) hasher.sequenceHashes(hasher.localHashes(tokens, 64));
    expect(core.liveBytes).toBe(held);
  });

  it('claims the hash kernel of its Core', () => {
    const core = new Core();
    new BlockHasher({ core });
    expect(() => new BlockHasher({ core })).toThrow(/already holds a hash/);
  });
});
