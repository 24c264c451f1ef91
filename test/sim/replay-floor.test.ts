// The TTFT floor: each request's uncached tokens (after the ideal reuse)
// prefilled alone in the fewest-ms split into budget-sized steps, checked
// against hand-computed figures of the timing model, and against replays
// (no request there beats its floor); and the reuse of one LRU cache of the
// fleet's room, on hand-built traces.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { chainedBlockHashes } from '../../sim/mocker/block-hash.js';
import { idealPrefixHits } from '../../sim/replay/metrics.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { idealFigures, replay } from '../../sim/replay/replay.js';
import { fleetLruHits } from '../../sim/replay/fleet-lru.js';
import { prefillFloorMs, ttftFloors } from '../../sim/replay/ttft-floor.js';
import { limitWorkload } from '../../sim/replay/workload.js';
import { jsonl } from './replay-fixtures.js';

// prefillMs(n) = 4.209989e-7 n^2 + 1.518344e-2 n + 16.50142 (sim/mocker/timing.ts), figures worked out by hand
// (exact rational arithmetic, then rounded):
//   prefillMs(1)    = 16.5166038609989
//   prefillMs(8192) = 169.1369184042496
//   2 x prefillMs(4096) = 171.5119594421248
//   prefillMs(4097) + prefillMs(4096) = 171.5305921261125   (8193 tokens in 2 steps)
//   3 steps of 8193 tokens: 3 x prefillMs(2731) = 183.3220692504087
//   100,000 tokens: 13 steps 2056.7077688581508, 15 steps 2046.531234736663,
//   16 steps 2045.4910325 (the least), 17 steps 2046.5145533991722
describe('the prefill floor of one request', () => {
  it('is one step for a prompt within the budget: a second step costs its fixed part', () => {
    expect(prefillFloorMs(1, 8192)).toBeCloseTo(16.5166038609989, 9);
    expect(prefillFloorMs(8192, 8192)).toBeCloseTo(169.1369184042496, 9);
  });

  it('splits a prompt over the budget evenly, below the engine full-budget chunks', () => {
    // Full-budget chunks would be prefillMs(8192) + prefillMs(1) = 185.65.
    expect(prefillFloorMs(8193, 8192)).toBeCloseTo(171.5305921261125, 9);
  });

  it('takes the number of steps that makes it least, past the fewest', () => {
    expect(prefillFloorMs(100_000, 8192)).toBeCloseTo(2045.4910325, 9);
  });

  it('follows the budget and the engine speed-up', () => {
    // A budget of 4096 forces two steps on 8192 tokens.
    expect(prefillFloorMs(8192, 4096)).toBeCloseTo(171.5119594421248, 9);
    expect(prefillFloorMs(8192, 8192, 4)).toBeCloseTo(169.1369184042496 / 4, 9);
  });

  it('refuses a token count or a budget below 1', () => {
    expect(() => prefillFloorMs(0, 8192)).toThrow(/tokens must be an integer >= 1/);
    expect(() => prefillFloorMs(10, 0)).toThrow(/budget must be an integer >= 1/);
  });

  it('computes at least one token of a prompt the ideal reuse covers', () => {
    expect(Array.from(ttftFloors([8192, 8193, 64], [0, 8192, 64], 8192))).toEqual([prefillFloorMs(8192, 8192), prefillFloorMs(1, 8192), prefillFloorMs(1, 8192)]);
  });
});

describe('the ideal figures of a workload', () => {
  it('take the ideal reuse off each prompt', () => {
    // Trace blocks of 64 tokens, engine blocks of 64: the second request reuses 128 of its 192 tokens.
    const w = parseMooncakeTrace(
      jsonl([
        { timestamp: 0, input_length: 192, output_length: 1, hash_ids: [1, 2, 3] },
        { timestamp: 1, input_length: 192, output_length: 1, hash_ids: [1, 2, 4] },
      ]),
      { traceBlockSize: 64 },
    );
    expect(Array.from(idealPrefixHits(w, 64, chainedBlockHashes))).toEqual([0, 128]);
    const ideal = idealFigures(w, { blockSize: 64 }, 2);
    expect(ideal.reuse).toBeCloseTo(128 / 384, 12);
    // prefillMs(192) = 19.43216..., prefillMs(64) = 17.47490...
    const [first, second] = [4.209989e-7 * 192 * 192 + 1.518344e-2 * 192 + 16.50142, 4.209989e-7 * 64 * 64 + 1.518344e-2 * 64 + 16.50142];
    expect(ideal.ttft.mean).toBeCloseTo((first + second) / 2, 3);
    expect(ideal.ttft.p99).toBeCloseTo(second + 0.99 * (first - second), 3);
  });

  it('no request of a replay beats its floor, at any load or policy', () => {
    const trace = parseMooncakeTrace(readFileSync(fileURLToPath(new URL('../../sim/traces/synthetic_trace.jsonl', import.meta.url)), 'utf8'), {
      source: 'synthetic_trace.jsonl',
    });
    const w = limitWorkload(trace, 300);
    const floors = ttftFloors(
      w.requests.map((r) => r.inputLength),
      idealPrefixHits(w, 64, chainedBlockHashes),
      8192,
    );
    for (const arrivalSpeedup of [1, 8]) {
      for (const { run, report } of replay(w, { policies: ['ttft', 'round-robin'], workers: 4, arrivalSpeedup })) {
        let atFloor = 0;
        run.records.forEach((r, i) => {
          expect(r.outcome).toBe('completed');
          const ttft = r.firstTokenMs! - r.arrivalMs;
          expect(ttft).toBeGreaterThanOrEqual(floors[i]! - 1e-9);
          if (ttft < floors[i]! * 1.2) atFloor++;
        });
        // The floor is a tight bound, not only a true one: at light load many requests come close to it.
        if (arrivalSpeedup === 1 && report.policy === 'ttft') expect(atFloor).toBeGreaterThan(30);
        expect(report.ttft_ms.mean!).toBeGreaterThanOrEqual(report.ideal_ttft_ms.mean!);
        expect(report.ttft_ms.p99!).toBeGreaterThanOrEqual(report.ideal_ttft_ms.p99!);
      }
    }
  });
});

describe('the reuse of one LRU cache of the fleet room', () => {
  // Trace and engine blocks of 4 tokens. With room for 2 blocks, request 1's block evicts
  // request 0's first one, so request 2 finds nothing and recomputes both (refreshing them,
  // and evicting request 1's); request 3 then finds both. With room for 3, nothing is evicted.
  const w = parseMooncakeTrace(
    jsonl([
      { timestamp: 0, input_length: 8, output_length: 1, hash_ids: [1, 2] },
      { timestamp: 1, input_length: 5, output_length: 1, hash_ids: [3, 4] },
      { timestamp: 2, input_length: 9, output_length: 1, hash_ids: [1, 2, 5] },
      { timestamp: 3, input_length: 9, output_length: 1, hash_ids: [1, 2, 6] },
    ]),
    { traceBlockSize: 4 },
  );

  it('misses what it evicted, least recently used first', () => {
    expect(Array.from(fleetLruHits(w, 4, 2, chainedBlockHashes))).toEqual([0, 0, 0, 8]);
  });

  it('reuses what the ideal does when the room holds everything', () => {
    expect(Array.from(fleetLruHits(w, 4, 3, chainedBlockHashes))).toEqual([0, 0, 8, 8]);
    expect(Array.from(idealPrefixHits(w, 4, chainedBlockHashes))).toEqual([0, 0, 8, 8]);
  });

  it('refuses a room below one block', () => {
    expect(() => fleetLruHits(w, 4, 0, chainedBlockHashes)).toThrow(/capacityBlocks must be an integer >= 1/);
  });

  it('is the fleet figure of a replay: workers x blocks of room', () => {
    // 4 workers of 1 block hold all 3 distinct full blocks: 16 of 31 prompt tokens reused, as the ideal;
    // 1 worker of 1 block holds only the last block computed: nothing is reused.
    expect(idealFigures(w, { blockSize: 4, numBlocks: 1 }, 4).fleetLru!.reuse).toBeCloseTo(16 / 31, 12);
    expect(idealFigures(w, { blockSize: 4, numBlocks: 1 }, 1).fleetLru!.reuse).toBe(0);
    expect(idealFigures(w, { blockSize: 4, numBlocks: 1 }, 1).reuse).toBeCloseTo(16 / 31, 12);
    // Without a fleet size the pass is skipped, and the reports say so.
    expect(idealFigures(w, { blockSize: 4 }).fleetLru).toBeNull();
    const [{ report }] = replay(w, { policies: ['round-robin'], workers: 2, engine: { blockSize: 4 } });
    expect([report!.fleet_lru_reuse_ratio, report!.fleet_lru_ttft_ms]).toEqual([null, null]);
  });
});
