// The wasm prefix index below its binding: the children table's collision
// handling (built from the core's node numbering and key mix) and matching
// over hashes already in core memory.
import { describe, expect, it } from 'vitest';
import { Core } from '../../bindings/core.js';
import { PrefixIndex } from '../../bindings/prefix-index.js';
import { workerLabel } from '../../bindings/workers.js';

const M64 = (1n << 64n) - 1n;
const A = { id: 'a', rank: 0 };
const B = { id: 'b', rank: 0 };

/** The parent part of the children table's key (assembly/prefix-nodes.ts childKey). */
const parentMix = (node: number) => (BigInt(node + 1) * 0xc2b2ae3d27d4eb4fn) & M64;

function setup() {
  const core = new Core();
  const index = new PrefixIndex({ core });
  const verify = () => core.kernel<{ indexVerify(): number }>().indexVerify();
  const matches = (local: bigint[]) => {
    const r = index.findMatches(local);
    return Array.from(r.slots, (slot, i) => `${workerLabel(index.workers.keyOf(slot))}:${r.depths[i]}`).sort();
  };
  return { core, index, verify, matches };
}

describe('children table (wasm)', () => {
  it('never returns a wrong node on a 64-bit key collision between two parents', () => {
    const { index, verify, matches } = setup();
    // Nodes are numbered in creation order from 1: a's root block is node 1,
    // its five children nodes 2-6 (more than four children: looked up through
    // the table); b's root block is node 7, its children nodes 8-12.
    const top = [0x1111n, 0x7777n];
    const aKids = [0xa0n, 0xa1n, 0xa2n, 0xa3n, 0xa4n];
    index.applyStored(A, null, [1n], [top[0]!]);
    for (const [i, h] of aKids.entries()) index.applyStored(A, 1n, [10n + BigInt(i)], [h]);
    // b's fifth child gets the local hash whose key under node 7 equals the key of a0 under node 1.
    const colliding = aKids[0]! ^ parentMix(1) ^ parentMix(7);
    const bKids = [0xb0n, 0xb1n, 0xb2n, 0xb3n, colliding];
    index.applyStored(B, null, [2n], [top[1]!]);
    for (const [i, h] of bKids.entries()) index.applyStored(B, 2n, [20n + BigInt(i)], [h]);
    expect(index.stats().nodes).toBe(12);
    expect(verify()).toBe(0);

    expect(matches([top[0]!, aKids[0]!])).toEqual(['a:2']);
    expect(matches([top[1]!, colliding])).toEqual(['b:2']);
    expect(matches([top[0]!, colliding])).toEqual(['a:1']);
    expect(matches([top[1]!, aKids[0]!])).toEqual(['b:1']);

    // Deleting one of two entries with the same key removes the right one.
    index.applyRemoved(B, [24n]);
    expect(verify()).toBe(0);
    expect(matches([top[0]!, aKids[0]!])).toEqual(['a:2']);
    expect(matches([top[1]!, colliding])).toEqual(['b:1']);
    index.applyStored(B, 2n, [24n], [colliding]);
    index.applyRemoved(A, [10n]);
    expect(verify()).toBe(0);
    expect(matches([top[1]!, colliding])).toEqual(['b:2']);
    expect(matches([top[0]!, aKids[0]!])).toEqual(['a:1']);
  });
  it('finds every child whose key several parents share, as entries with that key come and go in any order', () => {
    const { index, verify, matches } = setup();
    // Six root blocks (nodes 1-6: the root goes wide at its fifth child),
    // each with five children (wide too), one of them under the same table
    // key in all six: one run of equal keys among the other entries.
    const roots = [0x100n, 0x200n, 0x300n, 0x400n, 0x500n, 0x600n];
    for (const [i, r] of roots.entries()) index.applyStored(A, null, [1000n + BigInt(i)], [r]);
    const key = 0x5eed_5eed_5eed_5eedn;
    const shared = roots.map((_, i) => key ^ parentMix(i + 1));
    for (const [i] of roots.entries()) {
      const kids = [shared[i]!, ...[1n, 2n, 3n, 4n].map((k) => (BigInt(i + 1) << 32n) | k)];
      for (const [j, h] of kids.entries()) index.applyStored(A, 1000n + BigInt(i), [BigInt(100 * (i + 1) + j)], [h]);
    }
    expect(index.stats().nodes).toBe(36);
    expect(verify()).toBe(0);
    const held = new Set(roots.keys());
    const check = () => {
      for (const [i, r] of roots.entries()) expect(matches([r, shared[i]!])).toEqual([held.has(i) ? 'a:2' : 'a:1']);
    };
    check();
    for (const i of [3, 0, 5, 1, 4, 2]) {
      index.applyRemoved(A, [BigInt(100 * (i + 1))]);
      held.delete(i);
      expect(verify()).toBe(0);
      check();
    }
    for (const i of [4, 1]) {
      index.applyStored(A, 1000n + BigInt(i), [BigInt(100 * (i + 1))], [shared[i]!]);
      held.add(i);
      expect(verify()).toBe(0);
      check();
    }
  });
});

describe('worker id tables (wasm)', () => {
  // An id's place in its worker's table follows its 32-bit mix, the top half
  // of id * G (assembly/prefix-ids.ts): ids made from chosen mixes lay a
  // table out by hand. Its home at capacity c is floor(mix * c).
  const G = 0x9e3779b97f4a7c15n;
  let inverse = G;
  for (let i = 0; i < 6; i++) inverse = (inverse * (2n - ((G * inverse) & M64))) & M64;
  const idOf = (fraction: number) => ((((BigInt(Math.floor(fraction * 2 ** 32)) << 32n) | 0x1234n) * inverse) & M64);

  it('keeps every id when a shrink places the entries after the order wraps onto the first one placed', () => {
    const { core, index, verify } = setup();
    // At 13 entries: d (home 0), b1 (1), b2 (2), a (4), slot 3 free; three
    // more ids (homes 7, 9, 11) go in one event, leaving 4 ids: the table
    // shrinks to 8, where a's home is 2 and b1, b2 and d come after it in
    // order, b1 and b2 both at home 1: b2 reaches a's place.
    const kept = { d: idOf(0.03), b1: idOf(0.14), b2: idOf(0.2), a: idOf(0.33) };
    const extra = [idOf(0.56), idOf(0.72), idOf(0.87)];
    const ids = [...Object.values(kept), ...extra];
    for (const [i, id] of ids.entries()) index.applyStored(A, null, [id], [0x1000n + BigInt(i)]);
    expect(verify()).toBe(0);
    index.applyRemoved(A, extra);
    expect(verify()).toBe(0);
    const dumpSlot = core.kernel<{ indexDumpSlot(slot: number): number }>().indexDumpSlot;
    expect(dumpSlot(0)).toBe(4);
    index.applyRemoved(A, Object.values(kept));
    expect(index.stats().unknownRemovals).toBe(0);
    expect(index.stats().blocks).toBe(0);
    expect(verify()).toBe(0);
  });
});

describe('findMatchesAt (wasm)', () => {
  it('matches hashes already in core memory, such as the block hasher output', () => {
    const { core, index } = setup();
    index.applyStored(A, null, [1n, 2n, 3n], [11n, 12n, 13n]);
    index.applyStored(B, null, [4n], [11n]);
    // A scratch area the index owns: its I/O buffer, reserved for 64 hashes.
    const ptr = core.kernel<{ indexInput(capacity: number): number }>().indexInput(64) >>> 0;
    core.u64(ptr, 3).set([11n, 12n, 13n]);
    const r = index.findMatchesAt(ptr, 3);
    expect(r.count).toBe(2);
    expect(Array.from(r.slots, (s, i) => `${workerLabel(index.workers.keyOf(s))}:${r.depths[i]}`).sort()).toEqual(['a:3', 'b:1']);
    core.u64(ptr, 3).set([11n, 12n, 13n]);
    expect(index.findMatchesAt(ptr, 3, true).count).toBe(2);
    expect(index.findMatchesAt(ptr, 0).count).toBe(0);
  });

  it('rejects addresses outside core memory or misaligned, and bad counts', () => {
    const { core, index } = setup();
    expect(() => index.findMatchesAt(12, 1)).toThrow(/ptr/);
    expect(() => index.findMatchesAt(core.memoryBytes - 8, 2)).toThrow(/ptr/);
    expect(() => index.findMatchesAt(64, -1)).toThrow(/count/);
    expect(() => index.findMatchesAt(64, 1.5)).toThrow(/count/);
  });
});
