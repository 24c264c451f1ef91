// The block-hash kernel's raw exports: counts beyond its buffers are clamped,
// never read or written out of bounds, and its buffers are reused.
import { describe, expect, it } from 'vitest';
import type { HashExports } from '../../bindings/block-hasher.js';
import { Core } from '../../bindings/core.js';
import { BlockHasher as TwinBlockHasher } from '../../bindings/reference/block-hasher.js';

const twin = new TwinBlockHasher();

function freshKernel(): { core: Core; k: HashExports } {
  const core = new Core();
  return { core, k: core.kernel<HashExports>() };
}

describe('block-hash kernel exports', () => {
  it('does nothing before any buffer exists, whatever the counts', () => {
    const { core, k } = freshKernel();
    const live = core.liveBytes;
    expect(k.hashBlocks(1_000_000, 16, 1337n)).toBe(0);
    k.hashChain(1_000_000, 1337n);
    expect(BigInt.asUintN(64, k.hashXxh3(1_000_000, 0n))).toBe(twin.xxh3(new Uint8Array(0)));
    expect(core.liveBytes).toBe(live);
  });

  it('clamps a token count beyond the input buffer to the buffer', () => {
    const { core, k } = freshKernel();
    // A power-of-two request is what the buffer then holds: 1024 tokens.
    const ptr = k.hashReserveInput(4096);
    const tokens = new Uint32Array(1024).map((_, i) => i * 3);
    core.u32(ptr, 1024).set(tokens);
    const count = k.hashBlocks(0xffffffff, 256, 1337n);
    expect(count).toBe(4);
    expect([...core.u64(k.hashLocalPtr(), count)]).toEqual([...twin.localHashes(tokens, 256)]);
  });

  it('returns no blocks for block size 0 or a block larger than the tokens', () => {
    const { k } = freshKernel();
    k.hashReserveInput(64);
    expect(k.hashBlocks(16, 0, 1337n)).toBe(0);
    expect(k.hashBlocks(16, 17, 1337n)).toBe(0);
    expect(k.hashBlocks(16, 0xffffffff, 1337n)).toBe(0);
  });

  it('chains at most as many hashes as the block buffers hold', () => {
    const { core, k } = freshKernel();
    const ptr = k.hashReserveBlocks(3);
    const local = BigUint64Array.from({ length: 64 }, (_, i) => BigInt(i) * 0x9e3779b97f4a7c15n & ((1n << 64n) - 1n));
    core.u64(ptr, 64).set(local);
    k.hashChain(0xffffffff, 5n);
    expect([...core.u64(k.hashSequencePtr(), 64)]).toEqual([...twin.sequenceHashes(local, 5n)]);
  });

  it('reuses its buffers: reserving less than it holds neither moves nor grows them', () => {
    const { core, k } = freshKernel();
    const input = k.hashReserveInput(100_000);
    const local = k.hashReserveBlocks(5000);
    const held = core.liveBytes;
    expect(k.hashReserveInput(10)).toBe(input);
    expect(k.hashReserveBlocks(10)).toBe(local);
    expect(core.liveBytes).toBe(held);
  });
});
