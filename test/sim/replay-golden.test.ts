// The replay's figures are pinned: these runs give exactly the reports that
// `kvrouter replay --json` printed before the replay was made faster
// (fixtures/replay-golden.json, from commit 36996d6). Evictions, preemptions,
// a request too large for the cache, random tie-breaks and generated
// workloads are all in them, so a speed-up that changed what the engines
// or the router do shows up here as a changed figure.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generateWorkload } from '../../sim/replay/generators.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { replay, type ReplayOptions } from '../../sim/replay/replay.js';
import { limitWorkload, type Workload } from '../../sim/replay/workload.js';

const golden = JSON.parse(readFileSync(new URL('./fixtures/replay-golden.json', import.meta.url), 'utf8')) as {
  cases: Record<string, { args: string; reports: Record<string, unknown>[] }>;
};
const synthetic = parseMooncakeTrace(readFileSync(fileURLToPath(new URL('../../sim/traces/synthetic_trace.jsonl', import.meta.url)), 'utf8'), {
  source: 'sim/traces/synthetic_trace.jsonl',
});

const cases: [string, Workload, ReplayOptions][] = [
  [
    'synthetic-small-cache',
    limitWorkload(synthetic, 400),
    { policies: ['kv', 'round-robin'], workers: 4, engine: { numBlocks: 1500, maxNumSeqs: 32 }, arrivalSpeedup: 4 },
  ],
  [
    'generated-agents-cold',
    limitWorkload(generateWorkload('agent-sessions+cold-prompts', { seed: 3, traceBlockSize: 512 }), 150),
    { policies: ['kv', 'two-tier'], workers: 3, engine: { numBlocks: 3000 }, seed: 3 },
  ],
  ['synthetic-shared', limitWorkload(synthetic, 700), { policies: ['kv', 'power-of-two'], workers: 8, arrivalSpeedup: 2, seed: 7 }],
];

describe('figures pinned from before the replay speed-up', () => {
  it.each(cases)('%s gives the reports it gave then', (name, workload, options) => {
    const expected = golden.cases[name]!.reports;
    const reports = replay(workload, options).map(({ report }) => {
      // wall_ms varies run to run; arrival_speedup and the TTFT floors are fields added since.
      const { wall_ms: _wall, arrival_speedup: _load, ideal_ttft_ms: _floor, fleet_lru_reuse_ratio: _lru, fleet_lru_ttft_ms: _lruFloor, ...pinned } = report;
      return pinned;
    });
    expect(JSON.parse(JSON.stringify(reports))).toEqual(expected);
    // Key order too: --json prints fields in a fixed order.
    expect(reports.map((r) => Object.keys(r))).toEqual(expected.map((r) => Object.keys(r)));
  });
});
