// The replay's metrics math: percentiles, reuse ratios, the ideal reuse of
// an infinite cache, and the per-policy summary.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chainedBlockHashes } from '../../sim/mocker/block-hash.js';
import { halvesOf, U64Map } from '../../sim/mocker/u64-map.js';
import { distribution, endToEndLatencies, idealPrefixHits, interTokenLatencies, percentile, reuseRatio, reuseShare, ttfts } from '../../sim/replay/metrics.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { summarize } from '../../sim/replay/report.js';
import type { RequestRecord, SimulationResult } from '../../sim/replay/simulate.js';
import { jsonl } from './replay-fixtures.js';

function record(over: Partial<RequestRecord>): RequestRecord {
  return {
    id: 'r',
    sessionId: null,
    tag: null,
    worker: 0,
    arrivalMs: 0,
    dispatchMs: 0,
    firstTokenMs: 10,
    endMs: 10,
    promptTokens: 100,
    cachedTokens: 0,
    outputTokens: 1,
    preemptions: 0,
    recomputedTokens: 0,
    outcome: 'completed',
    error: null,
    ...over,
  };
}

describe('percentiles', () => {
  it('interpolate linearly between the nearest ranks', () => {
    const v = [10, 20, 30, 40];
    expect(percentile(v, 0)).toBe(10);
    expect(percentile(v, 50)).toBe(25);
    expect(percentile(v, 90)).toBeCloseTo(37, 10);
    expect(percentile(v, 100)).toBe(40);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });

  it('distribution sorts, averages and rounds; empty gives nulls', () => {
    const values = Array.from({ length: 101 }, (_, i) => 100 - i);
    expect(distribution(values)).toEqual({ mean: 50, p50: 50, p90: 90, p99: 99 });
    expect(distribution([1, 2], 0)).toEqual({ mean: 2, p50: 2, p90: 2, p99: 2 });
    expect(distribution([])).toEqual({ mean: null, p50: null, p90: null, p99: null });
  });
});

describe('request latencies', () => {
  const records = [
    record({ arrivalMs: 100, firstTokenMs: 150, endMs: 250, outputTokens: 5 }),
    record({ arrivalMs: 0, firstTokenMs: 30, endMs: 30, outputTokens: 1 }),
    record({ outcome: 'rejected', firstTokenMs: null, endMs: 5 }),
  ];

  it('TTFT counts from arrival at the router, completed requests only', () => {
    expect(ttfts(records)).toEqual([50, 30]);
  });

  it('ITL is the mean gap between a request\'s tokens (requests with two or more)', () => {
    expect(interTokenLatencies(records)).toEqual([25]);
  });

  it('E2E runs from arrival to the last token', () => {
    expect(endToEndLatencies(records)).toEqual([150, 30]);
  });
});

describe('reuse ratios', () => {
  it('reused prompt tokens / prompt tokens over completed requests', () => {
    const records = [
      record({ promptTokens: 100, cachedTokens: 50 }),
      record({ promptTokens: 300, cachedTokens: 250 }),
      record({ promptTokens: 1000, cachedTokens: 0, outcome: 'failed' }),
    ];
    expect(reuseRatio(records)).toBe(0.75);
    expect(reuseRatio([])).toBe(0);
  });

  it('ideal reuse on a hand-built trace: shared prefixes once computed, capped so one token is computed', () => {
    // Trace blocks of 8 tokens, engine blocks of 4.
    const w = parseMooncakeTrace(
      jsonl([
        { timestamp: 0, input_length: 16, output_length: 1, hash_ids: [1, 2] }, // nothing cached: 0
        { timestamp: 1, input_length: 16, output_length: 1, hash_ids: [1, 3] }, // block 1 = 2 engine blocks: 8
        { timestamp: 2, input_length: 16, output_length: 1, hash_ids: [1, 2] }, // all 4 cached, capped to 3: 12
        { timestamp: 3, input_length: 10, output_length: 1, hash_ids: [4, 1] }, // another first block: 0
        { timestamp: 4, input_length: 13, output_length: 1, hash_ids: [1, 2] }, // 3 full engine blocks cached: 12
      ]),
      { traceBlockSize: 8 },
    );
    expect(reuseShare(w, idealPrefixHits(w, 4, chainedBlockHashes))).toBeCloseTo((0 + 8 + 12 + 0 + 12) / (16 + 16 + 16 + 10 + 13), 12);
  });

  it('ideal reuse is 0 when nothing is shared', () => {
    const w = parseMooncakeTrace(jsonl([0, 1, 2].map((i) => ({ timestamp: i, input_length: 64, output_length: 1, hash_ids: [i] }))), { traceBlockSize: 64 });
    expect(reuseShare(w, idealPrefixHits(w, 16, chainedBlockHashes))).toBe(0);
  });
});

describe('the per-policy summary', () => {
  const run: SimulationResult = {
    label: 'kv',
    arrivalSpeedup: 2,
    workerIds: ['w0', 'w1'],
    records: [
      record({ id: 'a', worker: 0, arrivalMs: 1000, firstTokenMs: 1100, endMs: 1300, promptTokens: 200, cachedTokens: 100, outputTokens: 3 }),
      record({ id: 'b', worker: 1, arrivalMs: 1500, firstTokenMs: 1520, endMs: 3000, promptTokens: 200, cachedTokens: 0, outputTokens: 7 }),
      record({ id: 'c', worker: -1, arrivalMs: 2000, dispatchMs: null, firstTokenMs: null, endMs: 2000, outcome: 'rejected' }),
    ],
    engines: [
      { preemptions: 2, recomputedTokens: 64 },
      { preemptions: 1, recomputedTokens: 0 },
    ] as SimulationResult['engines'],
    routerEvents: { batches: 0, stored: 0, removed: 0, skippedStores: 0, blockSizeMismatches: 0 },
    speeds: [],
    wallMs: 12.34,
  };
  const report = summarize(run, { reuse: 0.5, ttft: { mean: 12, p50: 11, p90: 20, p99: 30 }, fleetLru: { reuse: 0.25, ttft: { mean: 40, p50: 41, p90: 42, p99: 43 } } });

  it('counts requests by outcome and spans virtual time from first arrival to last end', () => {
    expect([report.requests, report.completed, report.rejected, report.failed]).toEqual([3, 2, 1, 0]);
    expect(report.duration_ms).toBe(2000);
    expect(report.output_tokens_per_s).toBe(5);
  });

  it('reports reuse, the ideal, engine counters and per-worker figures', () => {
    expect(report.prefix_cache_reused_ratio).toBe(0.25);
    expect(report.ideal_prefix_reuse_ratio).toBe(0.5);
    expect(report.ideal_ttft_ms).toEqual({ mean: 12, p50: 11, p90: 20, p99: 30 });
    expect(report.fleet_lru_reuse_ratio).toBe(0.25);
    expect(report.fleet_lru_ttft_ms).toEqual({ mean: 40, p50: 41, p90: 42, p99: 43 });
    expect([report.preemptions, report.recomputed_tokens]).toEqual([3, 64]);
    expect(report.per_worker).toEqual({ w0: { requests: 1, prefix_cache_reused_ratio: 0.5 }, w1: { requests: 1, prefix_cache_reused_ratio: 0 } });
    expect(report.ttft_ms.mean).toBe(60);
    expect(report.wall_ms).toBe(12.3);
  });

  it('has every field the --json contract names', () => {
    expect(report.arrival_speedup).toBe(2);
    for (const key of ['policy', 'arrival_speedup', 'requests', 'completed', 'duration_ms', 'wall_ms', 'prefix_cache_reused_ratio', 'ideal_prefix_reuse_ratio', 'ideal_ttft_ms', 'fleet_lru_reuse_ratio', 'fleet_lru_ttft_ms', 'ttft_ms', 'itl_ms', 'e2e_ms', 'output_tokens_per_s', 'preemptions', 'recomputed_tokens', 'per_worker']) {
      expect(report).toHaveProperty(key);
    }
    for (const key of ['ttft_ms', 'itl_ms', 'e2e_ms'] as const) expect(Object.keys(report[key])).toEqual(['mean', 'p50', 'p90', 'p99']);
  });
});

describe('the u64 map behind the block cache and the ideal reuse', () => {
  it('answers like a Map<bigint, number> through growth, deletes, zeros and colliding halves', () => {
    const half = fc.oneof(fc.constantFrom(0, 1, 0xffffffff), fc.nat({ max: 0xffffffff }));
    // A small pool of keys, so deletes and overwrites hit keys that are there; up to 8 keep the table at
    // 16 slots and half full, where probe runs often wrap past the last slot (which deletes must handle),
    // more make it grow.
    const keys = fc.oneof(fc.array(fc.tuple(half, half), { minLength: 1, maxLength: 8 }), fc.array(fc.tuple(half, half), { minLength: 9, maxLength: 40 }));
    const ops = fc.array(fc.tuple(fc.constantFrom('set', 'set', 'delete', 'get'), fc.nat(), fc.nat()), { maxLength: 300 });
    fc.assert(
      fc.property(keys, ops, (pool, steps) => {
        const map = new U64Map(2);
        const oracle = new Map<bigint, number>();
        for (const [kind, pick, value] of steps) {
          const [lo, hi] = pool[pick % pool.length]!;
          const key = (BigInt(hi) << 32n) | BigInt(lo);
          if (kind === 'set') expect(map.set(lo, hi, value)).toBe(!oracle.has(key));
          if (kind === 'set') oracle.set(key, value);
          if (kind === 'delete') expect(map.delete(lo, hi)).toBe(oracle.delete(key));
          expect(map.get(lo, hi)).toBe(oracle.get(key) ?? -1);
          expect(map.size).toBe(oracle.size);
        }
        for (const [lo, hi] of pool) expect(map.get(lo, hi)).toBe(oracle.get((BigInt(hi) << 32n) | BigInt(lo)) ?? -1);
        for (const [key, value] of oracle) expect(map.get(...halvesOf(key))).toBe(value);
        expect([...map.valuesInSlots()].sort()).toEqual([...oracle.values()].sort());
      }),
      { numRuns: 1500 },
    );
  });
});
