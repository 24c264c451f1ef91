// A model's index split over several cores by worker decides exactly as one
// core and as the twin: random event streams applied to all three, compared
// after every event (matches with and without earlyExit, pair and event
// counters; node counts differ by design: a block held in several shards is
// a node in each).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { ShardedPrefixIndex, SHARD_BOUND_BYTES, shardsFor } from '../../bindings/prefix-index-sharded.js';
import { SHARDS, applyOp, brokenRule, chainId, locals, makeIndex, matchesOf, opArbitrary, queriesFor, type StreamShape } from './prefix-index.fixtures.js';

const OPTIONS = { ttlMs: 100, maxRoutedBlocks: 10, pruneTargetRatio: 0.6 };
const EVENTS: StreamShape = { trunks: 3, workerIds: 6, ranks: 2, values: 8, maxPath: 6, routed: false, crowd: 14 };
const MIXED: StreamShape = { ...EVENTS, routed: true };

function counters(index: PrefixIndexApi) {
  const { liveBytes: _, indexBytes: __, nodes: ___, ...rest } = index.stats();
  return rest;
}

function agree(shape: StreamShape, numRuns: number): void {
  fc.assert(
    fc.property(fc.array(opArbitrary(shape), { minLength: 10, maxLength: 40 }), (ops) => {
      const sharded = makeIndex('sharded', OPTIONS);
      const single = makeIndex('wasm', OPTIONS);
      const twin = makeIndex('twin', OPTIONS);
      const clocks = [{ now: 0 }, { now: 0 }, { now: 0 }];
      const touched: number[][] = [];
      for (const op of ops) {
        touched.push(...applyOp(sharded, op, clocks[0]!));
        applyOp(single, op, clocks[1]!);
        applyOp(twin, op, clocks[2]!);
        expect(brokenRule(sharded)).toBe(0);
        expect(counters(sharded)).toEqual(counters(single));
        expect(counters(sharded)).toEqual(counters(twin));
        for (const q of queriesFor(touched.slice(-4), shape.values)) {
          const plain = matchesOf(sharded, q);
          expect(plain, `query ${q}`).toEqual(matchesOf(single, q));
          expect(plain, `query ${q}`).toEqual(matchesOf(twin, q));
          const early = matchesOf(sharded, q, true);
          expect(early, `query ${q}, earlyExit`).toEqual(matchesOf(single, q, true));
          expect(early, `query ${q}, earlyExit`).toEqual(matchesOf(twin, q, true));
        }
      }
    }),
    { numRuns },
  );
}

describe('ShardedPrefixIndex', () => {
  // Property runs take seconds; the timeout leaves room for a busy machine.
  it('agrees with one core and with the twin after every event of random streams', () => {
    agree(EVENTS, 50);
  }, 180_000);

  it('agrees with routed inserts, expiry and the model-wide prune mixed in', () => {
    agree(MIXED, 50);
  }, 180_000);

  it('puts worker slot s in shard s mod the shard count: one event touches one core', () => {
    const index = makeIndex('sharded') as ShardedPrefixIndex;
    const workers = Array.from({ length: 2 * SHARDS }, (_, i) => ({ id: `w${i}`, rank: 0 }));
    for (const w of workers) index.applyStored(w, null, [chainId([1])], locals([1]));
    for (const [s, shard] of index.shards.entries()) {
      expect(shard.stats().blocks).toBe(2);
      for (const w of workers) expect(shard.holds(index.workers.slotOf(w.id)!)).toBe(index.workers.slotOf(w.id)! % SHARDS === s);
    }
    expect(matchesOf(index, [1])).toEqual(workers.map((w) => `${w.id}:1`).sort());
  });

  it('takes as many shards as its memory bound needs at 3 GiB each', () => {
    expect(shardsFor(0)).toBe(1);
    expect(shardsFor(SHARD_BOUND_BYTES)).toBe(1);
    expect(shardsFor(SHARD_BOUND_BYTES + 1)).toBe(2);
    expect(new ShardedPrefixIndex({ memoryBoundBytes: 10 * 2 ** 30 }).shards).toHaveLength(4);
    expect(() => new ShardedPrefixIndex({ shards: 0 })).toThrow(/shards/);
  });

  it('rejects a bad event of a new worker before giving it a slot', () => {
    const index = makeIndex('sharded');
    expect(() => index.applyStored({ id: 'a', rank: 0 }, null, [1n, 2n], [1n])).toThrow(/external and local/);
    expect(() => index.applyStored({ id: 'a', rank: 0 }, null, [1n], [-1n])).toThrow(/local\[0\]/);
    expect(() => index.insertRouted({ id: 'a', rank: 0 }, [1n], Number.NaN)).toThrow(/nowMs/);
    expect(index.workers.size).toBe(0);
  });
});
