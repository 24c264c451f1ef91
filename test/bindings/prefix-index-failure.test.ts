// An update the core cannot complete never leaves a worker's index different
// from what the router believes: the index is consistent again, the workers
// named by the IndexFailure hold nothing (they were cleared, or the whole
// core after a trap), and everything else is as the twin has it, told to
// clear the same workers.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IndexFailure, PrefixIndex } from '../../bindings/prefix-index.js';
import { ShardedPrefixIndex } from '../../bindings/prefix-index-sharded.js';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { ReferencePrefixIndex } from '../../bindings/reference/prefix-index.js';
import type { Core } from '../../bindings/core.js';
import type { WorkerKey } from '../../bindings/workers.js';
import { chainId, locals, matchesOf, random } from './prefix-index.fixtures.js';

interface TestCore {
  coreFailAllocation(after: number, trap: boolean): void;
  indexVerify(): number;
}

const k = (core: Core) => core.kernel<TestCore>();

type Op =
  | { type: 'stored'; w: number; path: number[]; from: number }
  | { type: 'removed'; w: number; path: number[] }
  | { type: 'routed'; w: number; path: number[] }
  | { type: 'cleared'; w: number };

const WORKERS: WorkerKey[] = Array.from({ length: 8 }, (_, i) => ({ id: `w${i}`, rank: 0 }));

const path = fc
  .record({ trunk: fc.integer({ min: 0, max: 3 }), keep: fc.integer({ min: 0, max: 12 }), tail: fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 10 }) })
  .map(({ trunk, keep, tail }) => [...Array.from({ length: keep }, (_, i) => trunk * 100 + i), ...tail.map((v) => 1000 + v)])
  .filter((p) => p.length > 0);
const worker = fc.integer({ min: 0, max: WORKERS.length - 1 });
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ type: fc.constant('stored' as const), w: worker, path, from: fc.nat() }).map((o) => ({ ...o, from: o.from % o.path.length })) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('removed' as const), w: worker, path }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('routed' as const), w: worker, path }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('cleared' as const), w: worker }) },
);

function apply(index: PrefixIndexApi, o: Op, now: number): void {
  const w = WORKERS[o.w]!;
  if (o.type === 'stored') {
    const ids = o.path.map((_, i) => chainId(o.path.slice(0, i + 1)));
    index.applyStored(w, o.from > 0 ? ids[o.from - 1]! : null, ids.slice(o.from), locals(o.path.slice(o.from)));
  } else if (o.type === 'removed') {
    index.applyRemoved(w, [chainId(o.path)]);
  } else if (o.type === 'routed') {
    index.insertRouted(w, locals(o.path), now);
  } else {
    index.applyCleared(w);
  }
}

function counters(index: PrefixIndexApi) {
  const { liveBytes: _, indexBytes: __, allocationFailures: ___, nodes: ____, ...rest } = index.stats();
  return rest;
}

/**
 * Runs a stream with allocation failures armed at random points on the wasm
 * index's cores; each failure clears the workers it names on the twin too.
 */
function failingStream(make: () => { index: PrefixIndexApi; cores: Core[] }, trap: boolean): void {
  let seen = 0;
  fc.assert(
    fc.property(fc.array(fc.tuple(op, fc.option(fc.integer({ min: 0, max: 12 }), { freq: 3 }), fc.nat()), { minLength: 10, maxLength: 50 }), (steps) => {
      const { index, cores } = make();
      const twin = new ReferencePrefixIndex({ ttlMs: 1e9 });
      let failures = 0;
      for (const [i, [o, arm, core]] of steps.entries()) {
        if (arm !== null) k(cores[core % cores.length]!).coreFailAllocation(arm, trap);
        try {
          apply(index, o, i);
        } catch (error) {
          if (!(error instanceof IndexFailure)) throw error;
          expect(error.kind).toBe(trap ? 'trap' : 'no-memory');
          failures++;
          // The twin applies what the wasm index kept: the event up to the
          // failure, then the clear. Applying it whole and clearing the
          // workers named gives the same state for every other worker.
          apply(twin, o, i);
          for (const w of error.workers) twin.applyCleared(w);
          for (const w of error.workers) expect(index.evictedBlocks(w)).toBe(0);
          continue;
        } finally {
          for (const c of cores) k(c).coreFailAllocation(-1, false);
        }
        apply(twin, o, i);
      }
      for (const c of cores) expect(k(c).indexVerify()).toBe(0);
      expect(counters(index)).toEqual(counters(twin));
      expect(index.stats().allocationFailures).toBe(failures);
      for (const [o] of steps) if (o.type !== 'cleared') expect(matchesOf(index, o.path)).toEqual(matchesOf(twin, o.path));
      seen += failures;
    }),
    { numRuns: 150 },
  );
  // The armed failures did land in updates, many times over.
  expect(seen).toBeGreaterThan(40);
}

describe('PrefixIndex when the core cannot complete an update', () => {
  it('an allocation that fails in the middle of a store clears that worker and leaves no divergence', () => {
    failingStream(() => {
      const index = new PrefixIndex({ ttlMs: 1e9 });
      return { index, cores: [index.core] };
    }, false);
  }, 120_000);

  it('a trap in the middle of an update abandons the core index and clears all its workers, leaving no divergence', () => {
    failingStream(() => {
      const index = new PrefixIndex({ ttlMs: 1e9 });
      return { index, cores: [index.core] };
    }, true);
  }, 120_000);

  it('in a sharded index a failure reaches only the workers of the core it happened in', () => {
    failingStream(() => {
      const index = new ShardedPrefixIndex({ ttlMs: 1e9, shards: 3 });
      return { index, cores: index.shards.map((s) => s.core) };
    }, true);
  }, 120_000);

  it('names the worker and says what happened', () => {
    const index = new PrefixIndex();
    const a = { id: 'a', rank: 0 };
    const b = { id: 'b', rank: 0 };
    index.applyStored(a, null, [1n], locals([1]));
    index.applyStored(b, null, [7n], locals([7]));
    // b storing a's block: the node's first shared member set needs memory.
    k(index.core).coreFailAllocation(0, false);
    let failure: unknown;
    try {
      index.applyStored(b, null, [8n], locals([1]));
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(IndexFailure);
    expect((failure as IndexFailure).workers).toEqual([b]);
    expect((failure as IndexFailure).message).toMatch(/out of memory storing worker b; its cache entries were cleared/);
    expect(matchesOf(index, [1])).toEqual(['a:1']);
    expect(matchesOf(index, [7])).toEqual([]);
    expect(index.stats()).toMatchObject({ nodes: 1, blocks: 1, allocationFailures: 1 });
  });
});

describe('the fallible allocator', () => {
  // The eviction log is allocated and freed by the core's heap: a probe of any size.
  interface HeapProbe {
    coreHeapHasRoom(bytes: number): boolean;
    indexEvictionLog(capacity: number): void;
  }

  it('knows when the heap would serve a block without growing memory, so a full 4 GiB core can still allocate', () => {
    const index = new PrefixIndex();
    const probe = index.core.kernel<HeapProbe>();
    const rnd = random(3);
    let grew = 0;
    let served = 0;
    for (let i = 0; i < 400; i++) {
      // Index updates between probes leave free blocks of all sizes behind (tables that grew, shrank or went).
      const w = { id: `w${rnd(20)}`, rank: 0 };
      const n = 1 + rnd(400);
      if (rnd(3) === 0) index.applyCleared(w);
      else index.applyStored(w, null, Array.from({ length: n }, (_, j) => BigInt(i * 1000 + j + 1)), locals(Array.from({ length: n }, (_, j) => i * 1000 + j)));
      probe.indexEvictionLog(0);
      const bytes = 16 << rnd(19);
      const room = probe.coreHeapHasRoom(bytes);
      const before = index.core.memoryBytes;
      probe.indexEvictionLog(bytes / 16);
      expect(index.core.memoryBytes > before, `${bytes} bytes, room ${room}`).toBe(!room);
      if (room) served++;
      else grew++;
    }
    expect(served).toBeGreaterThan(50);
    // The heap doubles memory when it grows, so a few growths cover the run.
    expect(grew).toBeGreaterThanOrEqual(2);
  });
});
