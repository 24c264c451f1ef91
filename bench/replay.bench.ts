// Trace replay speed: the Mooncake synthetic trace (3,993 requests) through
// the router with the kv policy and 8 mock engines in virtual time, wall
// clock from parsing the trace to the finished summary. --quick replays the
// first 800 requests and reports them under their own key.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseMooncakeTrace } from '../sim/replay/mooncake.js';
import { replay, type PolicyRun } from '../sim/replay/replay.js';
import { limitWorkload } from '../sim/replay/workload.js';
import type { BenchSuite } from './figures.js';
import { median, round } from './stats.js';

const WORKERS = 8;
const QUICK_REQUESTS = 800;
const RUNS = 3;

/** The trace from bench/ (tsx) or dist/bench/ (the compiled runner). */
function tracePath(): string {
  for (const up of ['../', '../../']) {
    const path = fileURLToPath(new URL(`${up}sim/traces/synthetic_trace.jsonl`, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new Error('sim/traces/synthetic_trace.jsonl not found');
}

function timedReplay(text: string, limit: number | undefined): { seconds: number; run: PolicyRun } {
  const started = performance.now();
  let workload = parseMooncakeTrace(text, { source: 'synthetic_trace.jsonl' });
  if (limit !== undefined) workload = limitWorkload(workload, limit);
  const [run] = replay(workload, { policies: ['kv'], workers: WORKERS });
  return { seconds: (performance.now() - started) / 1000, run: run! };
}

export const replaySuite: BenchSuite = {
  name: 'replay',
  async run({ quick }) {
    const text = readFileSync(tracePath(), 'utf8');
    const limit = quick ? QUICK_REQUESTS : undefined;
    const samples = Array.from({ length: RUNS }, () => timedReplay(text, limit));
    const { report } = samples[0]!.run;
    const how = `${report.requests} requests, kv, ${WORKERS} workers, median of ${RUNS} runs`;
    const wall = round(median(samples.map((s) => s.seconds)), 2);
    const figures = quick
      ? [{ key: 'replay_quick_wall_s', value: wall, unit: 's', note: how }]
      : [{ key: 'replay_synthetic_wall_s', value: wall, unit: 's', goal: '<= 10', note: how }];
    const prefix = quick ? 'replay_quick' : 'replay_synthetic';
    return [
      ...figures,
      { key: `${prefix}_kv_reuse`, value: round(report.prefix_cache_reused_ratio, 3), unit: 'ratio', note: `ideal ${round(report.ideal_prefix_reuse_ratio, 3)}` },
      { key: `${prefix}_kv_ttft_mean_ms`, value: round(report.ttft_ms.mean ?? NaN, 1), unit: 'ms', note: 'virtual time' },
    ];
  },
};
