// The prefix index rules, one test each, run against the wasm index and its twin.
import { describe, expect, it } from 'vitest';
import { applyIndexEvents } from '../../bindings/prefix-index-dump.js';
import { brokenRule, chainId, locals, makeIndex, matchesOf, routedIds, type IndexKind } from './prefix-index.fixtures.js';

const A = { id: 'a', rank: 0 };
const A1 = { id: 'a', rank: 1 };
const B = { id: 'b', rank: 0 };
const C = { id: 'c', rank: 0 };

/** Stores a path from the root with engine-style chained ids. */
function storePath(index: ReturnType<typeof makeIndex>, worker: typeof A, path: number[]): boolean {
  return index.applyStored(worker, null, path.map((_, i) => chainId(path.slice(0, i + 1))), locals(path));
}

describe.each<IndexKind>(['wasm', 'twin'])('PrefixIndex (%s)', (kind) => {
  it('a worker is a (worker id, data-parallel rank) pair: ranks hold blocks separately', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2, 3]);
    storePath(index, A1, [1, 2]);
    expect(matchesOf(index, [1, 2, 3])).toEqual(['a#1:2', 'a:3']);
    index.applyCleared(A1);
    expect(matchesOf(index, [1, 2, 3])).toEqual(['a:3']);
  });

  it('walks the tree by local hashes and resolves external ids per worker', () => {
    const index = makeIndex(kind);
    index.applyStored(A, null, [101n, 102n], locals([1, 2]));
    index.applyStored(B, null, [201n, 202n], locals([1, 2]));
    expect(index.stats().nodes).toBe(2); // same blocks, same nodes, whatever the engine ids
    expect(matchesOf(index, [1, 2])).toEqual(['a:2', 'b:2']);
    // b cannot continue a's chain by a's id: ids are per worker.
    expect(index.applyStored(B, 102n, [203n], locals([3]))).toBe(false);
    expect(index.applyStored(B, 202n, [203n], locals([3]))).toBe(true);
    expect(matchesOf(index, [1, 2, 3])).toEqual(['a:2', 'b:3']);
  });

  it('skips a stored event with an unknown parent whole, and counts it', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1]);
    expect(index.applyStored(A, 999n, [11n, 12n], locals([2, 3]))).toBe(false);
    expect(index.stats()).toMatchObject({ nodes: 1, blocks: 1, unknownParents: 1 });
    expect(matchesOf(index, [1])).toEqual(['a:1']);
    expect(matchesOf(index, [2, 3])).toEqual([]);
  });

  it('counts and skips removals of ids the worker does not hold', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2]);
    index.applyRemoved(A, [999n, chainId([1, 2]), 998n]);
    index.applyRemoved({ id: 'never-seen', rank: 0 }, [chainId([1])]);
    expect(index.stats()).toMatchObject({ unknownRemovals: 3, blocks: 1 });
    expect(matchesOf(index, [1, 2])).toEqual(['a:1']);
  });

  it('refcounts duplicate stores of one block by one worker: one removal does not drop a block still stored', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2]);
    storePath(index, A, [1, 2]);
    index.applyRemoved(A, [chainId([1, 2])]);
    expect(matchesOf(index, [1, 2])).toEqual(['a:2']);
    index.applyRemoved(A, [chainId([1, 2])]);
    expect(matchesOf(index, [1, 2])).toEqual(['a:1']);
    expect(index.stats()).toMatchObject({ nodes: 1, blocks: 1 });
  });

  it('keeps a block while any of the worker\'s ids for it remains', () => {
    const index = makeIndex(kind);
    index.applyStored(A, null, [1n], locals([1]));
    index.applyStored(A, null, [2n], locals([1]));
    index.applyRemoved(A, [1n]);
    expect(matchesOf(index, [1])).toEqual(['a:1']);
    index.applyRemoved(A, [2n]);
    expect(matchesOf(index, [1])).toEqual([]);
  });

  it('moves an id stored again under another block: the newest event wins', () => {
    const index = makeIndex(kind);
    index.applyStored(A, null, [7n], locals([1]));
    index.applyStored(A, null, [7n], locals([2]));
    expect(matchesOf(index, [1])).toEqual([]);
    expect(matchesOf(index, [2])).toEqual(['a:1']);
    index.applyRemoved(A, [7n]);
    expect(index.stats()).toMatchObject({ nodes: 0, blocks: 0 });
  });

  it('scores d for a worker holding blocks 0..d-1 of the prompt and not block d, also after a middle removal', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2, 3, 4]);
    storePath(index, B, [1, 2, 5]);
    storePath(index, C, [2, 3]);
    expect(matchesOf(index, [1, 2, 3, 4, 6])).toEqual(['a:4', 'b:2']);
    expect(matchesOf(index, [1, 2, 5])).toEqual(['a:2', 'b:3']);
    index.applyRemoved(A, [chainId([1, 2])]); // a still holds blocks 3 and 4, now orphaned
    expect(matchesOf(index, [1, 2, 3, 4])).toEqual(['a:1', 'b:2']);
    expect(matchesOf(index, [9])).toEqual([]);
    expect(matchesOf(index, [])).toEqual([]);
    // Storing the missing block again restores the whole chain.
    index.applyStored(A, chainId([1]), [chainId([1, 2])], locals([2]));
    expect(matchesOf(index, [1, 2, 3, 4])).toEqual(['a:4', 'b:2']);
    expect(brokenRule(index)).toBe(0);
  });

  it('earlyExit stops once a single candidate remains and reports the depth reached then as its lower bound', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2, 3, 4, 5, 6]);
    storePath(index, B, [1, 2]);
    storePath(index, C, [1, 2, 3]);
    expect(matchesOf(index, [1, 2, 3, 4, 5, 6])).toEqual(['a:6', 'b:2', 'c:3']);
    // Depth 3: a and c match; depth 4: only a, so the walk stops there.
    expect(matchesOf(index, [1, 2, 3, 4, 5, 6], true)).toEqual(['a:4', 'b:2', 'c:3']);
    // A single holder of the first block is reported at depth 1.
    const solo = makeIndex(kind);
    storePath(solo, A, [1, 2, 3]);
    expect(matchesOf(solo, [1, 2, 3], true)).toEqual(['a:1']);
    // Two workers dropping out together never leave a single candidate: exact scores.
    storePath(solo, B, [1, 2, 3]);
    expect(matchesOf(solo, [1, 2, 3], true)).toEqual(['a:3', 'b:3']);
  });

  it('reports each worker once with its own depth when a few of many go one block deeper', () => {
    // Survivors first, last and in between among the 40 holders of the shared blocks.
    for (const deeper of [[0], [39], [5, 39], [0, 38, 39], [1, 2]]) {
      const index = makeIndex(kind);
      const crowd = Array.from({ length: 40 }, (_, i) => ({ id: `w${i}`, rank: 0 }));
      for (const w of crowd) storePath(index, w, [1, 2]);
      for (const i of deeper) index.applyStored(crowd[i]!, chainId([1, 2]), [chainId([1, 2, 3])], locals([3]));
      const expected = crowd.map((w, i) => `${w.id}:${deeper.includes(i) ? 3 : 2}`).sort();
      expect(matchesOf(index, [1, 2, 3, 4])).toEqual(expected);
    }
  });

  it('cleared removes every block of that worker rank and nothing else', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2, 3]);
    storePath(index, A1, [1, 2, 3]);
    storePath(index, B, [1, 4]);
    index.applyCleared(A);
    expect(matchesOf(index, [1, 2, 3])).toEqual(['a#1:3', 'b:1']);
    index.applyCleared({ id: 'nobody', rank: 0 });
    expect(index.stats()).toMatchObject({ nodes: 4, blocks: 5 });
  });

  it('removeWorker removes every rank of the worker id', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2]);
    storePath(index, A1, [1, 3]);
    storePath(index, B, [1]);
    index.removeWorker('a');
    expect(matchesOf(index, [1, 2])).toEqual(['b:1']);
    expect(index.stats()).toMatchObject({ nodes: 1, blocks: 1 });
    expect(index.workers.slotOf('a', 0)).toBeUndefined(); // the index made its own WorkerSlots
  });

  it('approximate mode: routed blocks expire after the TTL, refreshed on reinsert', () => {
    const index = makeIndex(kind, { ttlMs: 1000 });
    index.insertRouted(A, locals([1, 2, 3]), 0);
    index.insertRouted(A, locals([1, 2]), 600); // refreshes blocks 0 and 1 only
    expect(index.expire(999)).toBe(0);
    expect(index.expire(1000)).toBe(1); // block 2 expires at 0 + 1000
    expect(matchesOf(index, [1, 2, 3])).toEqual(['a:2']);
    expect(index.expire(1600)).toBe(2);
    expect(index.stats()).toMatchObject({ nodes: 0, blocks: 0, routedBlocks: 0 });
  });

  it('approximate mode: past maxRoutedBlocks, prunes the earliest-expiring down to the ratio, deepest first on ties', () => {
    const index = makeIndex(kind, { maxRoutedBlocks: 10, pruneTargetRatio: 0.8 });
    index.insertRouted(A, locals([1, 2, 3, 4]), 0);
    index.insertRouted(B, locals([5, 6, 7, 8]), 10);
    index.insertRouted(C, locals([9, 10]), 20);
    expect(index.stats().routedBlocks).toBe(10);
    index.insertRouted(C, locals([9, 10, 11]), 30); // 11 routed blocks: prune to 8
    expect(index.stats().routedBlocks).toBe(8);
    // a's blocks expire first; of those, the deepest three go.
    expect(matchesOf(index, [1, 2, 3, 4])).toEqual(['a:1']);
    expect(matchesOf(index, [5, 6, 7, 8])).toEqual(['b:4']);
    expect(matchesOf(index, [9, 10, 11])).toEqual(['c:3']);
  });

  it('routed blocks use the chained sequence hash as their external id, so removals and clears reach them', () => {
    const index = makeIndex(kind);
    index.insertRouted(A, locals([1, 2, 3]), 0);
    index.applyRemoved(A, [routedIds([1, 2, 3])[2]!]);
    expect(matchesOf(index, [1, 2, 3])).toEqual(['a:2']);
    // A stored event can continue a routed chain through its sequence id.
    expect(index.applyStored(A, routedIds([1, 2])[1]!, [77n], locals([4]))).toBe(true);
    expect(matchesOf(index, [1, 2, 4])).toEqual(['a:3']);
    index.applyCleared(A);
    expect(index.stats()).toMatchObject({ nodes: 0, routedBlocks: 0 });
  });

  it('a stored event for a routed block makes it a stored block: events are authoritative', () => {
    const index = makeIndex(kind, { ttlMs: 100 });
    index.insertRouted(A, locals([1, 2]), 0);
    const [first, second] = routedIds([1, 2]);
    index.applyStored(A, null, [first!], locals([1]));
    expect(index.stats().routedBlocks).toBe(1);
    index.insertRouted(A, locals([1]), 50); // leaves the stored block alone
    expect(index.expire(1000)).toBe(1);
    expect(matchesOf(index, [1, 2])).toEqual(['a:1']);
    index.applyRemoved(A, [first!, second!]);
    expect(index.stats()).toMatchObject({ nodes: 0, unknownRemovals: 1 });
  });

  it('dump rebuilds a worker holding a block without its parent through synthetic ids, then removes them', () => {
    const index = makeIndex(kind);
    storePath(index, A, [1, 2, 3, 4]);
    storePath(index, A, [1, 2, 3, 4]);
    index.applyRemoved(A, [chainId([1, 2]), chainId([1, 2])]);
    const events = index.dump();
    expect(events.some((e) => e.type === 'removed')).toBe(true);
    const rebuilt = makeIndex(kind);
    applyIndexEvents(rebuilt, events);
    expect(matchesOf(rebuilt, [1, 2, 3, 4])).toEqual(['a:1']);
    expect(rebuilt.stats()).toMatchObject({ nodes: 4, blocks: 3 });
    // The real ids came back with their references: two removals drop block 4.
    rebuilt.applyRemoved(A, [chainId([1, 2, 3, 4])]);
    expect(rebuilt.stats().blocks).toBe(3);
    rebuilt.applyRemoved(A, [chainId([1, 2, 3, 4])]);
    expect(rebuilt.stats()).toMatchObject({ blocks: 2, unknownRemovals: 0 });
    expect(brokenRule(rebuilt)).toBe(0);
  });

  it('rejects bad input with an error naming the field, and changes nothing', () => {
    const index = makeIndex(kind);
    expect(() => index.applyStored(A, null, [1n, 2n], [1n])).toThrow(/external and local/);
    expect(() => index.applyStored(A, null, [1n], [-1n])).toThrow(/local\[0\].*unsigned 64-bit/);
    expect(() => index.applyStored(A, null, [1n << 64n], [1n])).toThrow(RangeError);
    expect(() => index.applyStored(A, null, [1 as unknown as bigint], [1n])).toThrow(/external\[0\] must be a bigint/);
    expect(() => index.applyStored(A, -5n, [1n], [1n])).toThrow(/parent/);
    expect(() => index.applyStored({ id: '', rank: 0 }, null, [1n], [1n])).toThrow(/worker\.id/);
    expect(() => index.applyRemoved({ id: 'a', rank: 1.5 }, [1n])).toThrow(/worker\.rank/);
    expect(() => index.findMatches([1n, 'x' as unknown as bigint])).toThrow(/local\[1\]/);
    expect(() => index.insertRouted(A, [1n], Number.NaN)).toThrow(/nowMs/);
    expect(() => index.expire(Infinity)).toThrow(/nowMs/);
    expect(() => index.removeWorker('')).toThrow(/worker id/);
    expect(() => makeIndex(kind, { ttlMs: 0 })).toThrow(/ttlMs/);
    expect(() => makeIndex(kind, { maxRoutedBlocks: 1.5 })).toThrow(/maxRoutedBlocks/);
    expect(() => makeIndex(kind, { pruneTargetRatio: 1.5 })).toThrow(/pruneTargetRatio/);
    expect(index.stats()).toMatchObject({ nodes: 0, blocks: 0, unknownParents: 0 });
    expect(index.workers.size).toBe(0);
  });

  it('accepts BigUint64Array hashes as well as bigint arrays', () => {
    const index = makeIndex(kind);
    index.applyStored(A, null, BigUint64Array.of(11n, 12n), BigUint64Array.from(locals([1, 2])));
    expect(index.findMatches(BigUint64Array.from(locals([1, 2]))).depths[0]).toBe(2);
  });
});
