// Oracle tests: the core's raw XXH3-64 (assembly/xxh3.ts through hashXxh3) and
// the BigInt twin against hash-wasm's xxhash3, in every input-length class of
// the algorithm and under seeds across the whole u64 range.
import fc from 'fast-check';
import { xxhash3 } from 'hash-wasm';
import { describe, expect, it } from 'vitest';
import { BlockHasher } from '../../bindings/block-hasher.js';
import { xxh3 as twinXxh3 } from '../../bindings/reference/xxh3.js';

const U64_MAX = (1n << 64n) - 1n;
const core = new BlockHasher();

async function oracle(bytes: Uint8Array, seed: bigint): Promise<bigint> {
  return BigInt('0x' + (await xxhash3(bytes, Number(seed & 0xffffffffn), Number(seed >> 32n))));
}

/** Seeds from the whole u64 range, with the edges (0, 2^63, 2^64-1) and the block default drawn often. */
const seeds = fc.oneof(
  fc.bigInt(0n, U64_MAX),
  fc.bigInt(1n << 63n, U64_MAX),
  fc.constantFrom(0n, 1n, 1337n, 1n << 63n, U64_MAX),
);

function bytesOf(length: number, salt: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = (0x2545f491 ^ salt) >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

async function expectMatchesOracle(bytes: Uint8Array, seed: bigint, withTwin = true): Promise<void> {
  const want = await oracle(bytes, seed);
  expect(core.xxh3(bytes, seed), `core, ${bytes.length} bytes, seed ${seed}`).toBe(want);
  if (withTwin) expect(twinXxh3(bytes, seed), `twin, ${bytes.length} bytes, seed ${seed}`).toBe(want);
}

// [label, min length, max length, runs]
const lengthClasses: [string, number, number, number][] = [
  ['0 bytes', 0, 0, 30],
  ['1-3 bytes', 1, 3, 300],
  ['4-8 bytes', 4, 8, 300],
  ['9-16 bytes', 9, 16, 300],
  ['17-128 bytes', 17, 128, 300],
  ['129-240 bytes', 129, 240, 300],
  ['over 240 bytes (long path, partial last block)', 241, 3000, 200],
  ['many kilobytes (several scrambled blocks)', 8 * 1024, 70 * 1024, 30],
];

describe('XXH3-64 against hash-wasm (oracle)', () => {
  for (const [label, minLength, maxLength, numRuns] of lengthClasses) {
    it(`matches hash-wasm xxhash3 for random inputs of ${label} and random seeds, including seeds >= 2^63`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ minLength, maxLength, size: 'max' }), seeds, async (bytes, seed) => {
          // The BigInt twin is slow on big inputs; it is checked on those by the boundary test.
          await expectMatchesOracle(bytes, seed, maxLength <= 3000);
        }),
        { numRuns },
      );
    });
  }

  it('matches hash-wasm xxhash3 at every length-class boundary', async () => {
    const lengths = [
      0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 32, 33, 64, 65, 96, 97, 127, 128, 129, 239, 240, 241, 255, 256, 1023,
      1024, 1025, 1087, 1088, 1089, 2048, 4096, 64 * 1024 + 7,
    ];
    for (const length of lengths) {
      const bytes = bytesOf(length, length);
      for (const seed of [0n, 1n, 1337n, 0x0123456789abcdefn, 1n << 63n, U64_MAX]) {
        await expectMatchesOracle(bytes, seed, length <= 4096 || seed === 1337n);
      }
    }
  });

  it('derives the long-input secret per seed: interleaving seeds never reuses another seed\'s secret', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 241, max: 2100 }), fc.constantFrom(0n, 1337n, 7n, U64_MAX)), {
          minLength: 2,
          maxLength: 8,
        }),
        async (calls) => {
          for (const [length, seed] of calls) await expectMatchesOracle(bytesOf(length, Number(seed & 0xffn)), seed, false);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('hashes a large input (200,000 bytes) exactly like hash-wasm', async () => {
    const bytes = bytesOf(200_000, 99);
    expect(core.xxh3(bytes, 1337n)).toBe(await oracle(bytes, 1337n));
    expect(core.xxh3(bytes)).toBe(await oracle(bytes, 0n));
  });
});
