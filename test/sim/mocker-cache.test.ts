import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { BlockCache } from '../../sim/mocker/block-cache.js';
import { chainedBlockHashes } from '../../sim/mocker/block-hash.js';
import { MockEngine } from '../../sim/mocker/engine.js';
import type { RequestResult } from '../../sim/mocker/sequence.js';

const one = new Uint32Array([7]);

function cacheWith(numBlocks: number): BlockCache {
  return new BlockCache(numBlocks, 1, true);
}

describe('block cache', () => {
  it('leaf first: an older parent is never evicted before its cached child', () => {
    const cache = cacheWith(4);
    const p = cache.store(1n, null, one, 0);
    const c = cache.store(2n, p, one, 0);
    cache.release(p);
    cache.release(c);
    cache.store(3n, null, one, 0);
    cache.store(4n, null, one, 0);
    cache.takeEvents();
    expect(cache.makeRoom(1)).toBe(true);
    expect([...cache.hashes()].sort()).toEqual([1n, 3n, 4n]);
    expect(cache.makeRoom(2)).toBe(true);
    expect(cache.takeEvents()).toEqual([{ type: 'removed', blockHashes: [2n, 1n], medium: 'GPU' }]);
  });

  it('LRU among leaves: the leaf released first is evicted first', () => {
    const cache = cacheWith(3);
    const blocks = [10n, 11n, 12n].map((h) => cache.store(h, null, one, 0));
    cache.release(blocks[1]!);
    cache.release(blocks[2]!);
    cache.release(blocks[0]!);
    cache.takeEvents();
    cache.makeRoom(2);
    expect(cache.takeEvents()).toEqual([{ type: 'removed', blockHashes: [11n, 12n], medium: 'GPU' }]);
  });

  it('a cache hit revives an inactive block and protects it from eviction', () => {
    const cache = cacheWith(2);
    const a = cache.store(1n, null, one, 0);
    const b = cache.store(2n, null, one, 0);
    cache.release(a);
    cache.release(b);
    expect(cache.inactiveBlocks).toBe(2);
    cache.acquire(a);
    expect(cache.activeBlocks).toBe(1);
    expect(cache.canAllocate(2)).toBe(false);
    expect(cache.canAllocate(1)).toBe(true);
    expect(cache.canAllocate(1, [b])).toBe(false);
    expect(cache.makeRoom(2)).toBe(false);
    expect([...cache.hashes()]).toEqual([1n]);
  });

  it('stored events: consecutive blocks of one chain share one event with the parent of the first', () => {
    const cache = new BlockCache(8, 2, true);
    const toks = new Uint32Array([1, 2, 3, 4, 5, 6]);
    const a = cache.store(100n, null, toks, 0);
    const b = cache.store(101n, a, toks, 2);
    cache.store(102n, b, toks, 4);
    cache.store(200n, a, toks, 2);
    expect(cache.takeEvents()).toEqual([
      { type: 'stored', blockHashes: [100n, 101n, 102n], parentBlockHash: null, tokenIds: new Uint32Array([1, 2, 3, 4, 5, 6]), blockSize: 2, loraName: null, medium: 'GPU' },
      { type: 'stored', blockHashes: [200n], parentBlockHash: 100n, tokenIds: new Uint32Array([3, 4]), blockSize: 2, loraName: null, medium: 'GPU' },
    ]);
  });

  it('stored events: a chain continued from another prompt carries each block\'s own tokens', () => {
    const cache = new BlockCache(8, 2, true);
    const first = new Uint32Array([1, 2, 3, 4]);
    const other = new Uint32Array([9, 9, 7, 8, 5, 6]);
    const a = cache.store(100n, null, first, 0);
    const b = cache.store(101n, a, other, 2);
    cache.store(102n, b, other, 4);
    expect(cache.takeEvents()).toEqual([
      { type: 'stored', blockHashes: [100n, 101n, 102n], parentBlockHash: null, tokenIds: new Uint32Array([1, 2, 7, 8, 5, 6]), blockSize: 2, loraName: null, medium: 'GPU' },
    ]);
  });

  it('private blocks count toward usage and cannot exceed free space', () => {
    const cache = cacheWith(3);
    cache.store(1n, null, one, 0);
    cache.allocatePrivate(2);
    expect([cache.usedBlocks, cache.activeBlocks, cache.freeBlocks]).toEqual([3, 3, 0]);
    expect(() => cache.allocatePrivate(1)).toThrow(/1 private blocks, 0 free/);
    cache.freePrivate(2);
    expect(cache.freeBlocks).toBe(2);
  });
});

describe('block hash', () => {
  it('chains: equal hashes exactly when the whole prefix is equal', () => {
    const a = chainedBlockHashes(new Uint32Array([1, 2, 3, 4, 5, 6, 7]), 2);
    const b = chainedBlockHashes(new Uint32Array([1, 2, 3, 9, 5, 6]), 2);
    expect(a.length).toBe(3);
    expect(a[0]).toBe(b[0]);
    expect(a[1]).not.toBe(b[1]);
    // Same block tokens under a different parent hash differently.
    expect(a[2]).not.toBe(b[2]);
    expect(chainedBlockHashes(new Uint32Array([1, 2, 3, 4, 5, 6, 7]), 2)).toEqual(a);
  });

  it('has no collisions over many distinct small prompts', () => {
    const seen = new Set<bigint>();
    for (let i = 0; i < 20_000; i++) {
      for (const h of chainedBlockHashes(new Uint32Array([i & 255, i >> 8, 0, 1]), 2)) seen.add(h);
    }
    // 20,000 distinct first blocks, each with its own second block.
    expect(seen.size).toBe(40_000);
  });
});

interface Arrival {
  group: number;
  prefixBlocks: number;
  suffix: number;
  maxTokens: number;
  delayMs: number;
  abortAfterMs: number | null;
}

const arrival = fc.record({
  group: fc.integer({ min: 0, max: 3 }),
  prefixBlocks: fc.integer({ min: 0, max: 6 }),
  suffix: fc.integer({ min: 1, max: 12 }),
  maxTokens: fc.integer({ min: 1, max: 12 }),
  delayMs: fc.integer({ min: 0, max: 60 }),
  abortAfterMs: fc.option(fc.integer({ min: 0, max: 120 }), { nil: null }),
});

function promptOf(a: Arrival, index: number): Uint32Array {
  const t: number[] = [];
  for (let i = 0; i < a.prefixBlocks * 4; i++) t.push(1000 * (a.group + 1) + i);
  for (let i = 0; i < a.suffix; i++) t.push(100_000 + 100 * index + i);
  return Uint32Array.from(t);
}

/** Runs a workload on a small cache (4-token blocks) and returns everything observable. */
function play(arrivals: Arrival[], numBlocks: number, onBatch?: (b: KvEventBatch, engine: MockEngine) => void) {
  const clock = new VirtualClock();
  const batches: KvEventBatch[] = [];
  const results: RequestResult[] = [];
  const usage: number[] = [];
  const engine: MockEngine = new MockEngine({
    clock,
    numBlocks,
    blockSize: 4,
    maxBatchedTokens: 16,
    maxNumSeqs: 4,
    onEvents: (b) => {
      batches.push(b);
      onBatch?.(b, engine);
    },
    onStep: (s) => usage.push(s.kvUsage),
  });
  let at = 0;
  arrivals.forEach((a, i) => {
    at += a.delayMs;
    clock.at(at, () =>
      engine.submit({ id: `r${i}`, tokens: promptOf(a, i), maxTokens: a.maxTokens, onComplete: (r) => results.push(r) }),
    );
    if (a.abortAfterMs !== null) {
      clock.at(at + a.abortAfterMs, () => {
        const r = engine.abort(`r${i}`);
        if (r) results.push(r);
      });
    }
  });
  clock.runAll();
  return { engine, batches, results, usage };
}

describe('mock engine: events and cache agree', () => {
  it('events consistent with the cache: stored-not-removed hashes always equal the cached full blocks', () => {
    fc.assert(
      fc.property(fc.array(arrival, { minLength: 1, maxLength: 25 }), fc.integer({ min: 12, max: 28 }), (arrivals, numBlocks) => {
        const model = new Set<bigint>();
        const { engine, results, usage } = play(arrivals, numBlocks, (batch, eng) => {
          for (const e of batch.events) {
            if (e.type === 'stored') {
              if (e.parentBlockHash !== null) expect(model.has(e.parentBlockHash)).toBe(true);
              expect(e.tokenIds.length).toBe(e.blockHashes.length * e.blockSize);
              for (const h of e.blockHashes) {
                expect(model.has(h)).toBe(false);
                model.add(h);
              }
            } else if (e.type === 'removed') {
              for (const h of e.blockHashes) expect(model.delete(h)).toBe(true);
            } else {
              model.clear();
            }
          }
          expect(new Set(eng.cachedBlockHashes())).toEqual(model);
        });
        expect(new Set(engine.cachedBlockHashes())).toEqual(model);
        // Every request ended exactly once, and the engine holds nothing afterwards.
        expect(results.length).toBe(arrivals.length);
        expect(new Set(results.map((r) => r.id)).size).toBe(arrivals.length);
        for (const r of results) if (r.finishReason === 'length') expect(r.outputTokens).toBe(arrivals[Number(r.id.slice(1))]!.maxTokens);
        const stats = engine.stats();
        expect([stats.activeBlocks, stats.running, stats.waiting]).toEqual([0, 0, 0]);
        expect(Math.max(...usage)).toBeLessThanOrEqual(1);
      }),
      { numRuns: 150 },
    );
  });

  it('determinism: the same workload gives the same events, steps and results', () => {
    const arrivals = fc.sample(fc.array(arrival, { minLength: 30, maxLength: 30 }), { numRuns: 1, seed: 42 })[0]!;
    const show = (x: unknown) => JSON.stringify(x, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    const first = play(arrivals, 20);
    const second = play(arrivals, 20);
    expect(first.batches.length).toBeGreaterThan(0);
    expect(show(second.batches)).toBe(show(first.batches));
    expect(show(second.results)).toBe(show(first.results));
    expect(second.engine.stats()).toEqual(first.engine.stats());
  });
});
