// Trace replay speed: workloads through the router with the kv policy and 8
// mock engines in virtual time, wall clock from building the workload to the
// finished summary.
// - replay_synthetic_wall_s: the Mooncake synthetic trace (3,993 requests).
// - replay_wall_s_per_12k_requests: that trace tiled to 12,000 requests (three
//   copies back to back, each on ids of its own, then 21 requests of a
//   fourth), the size the goal is stated for.
// - replay_wall_s_per_12k_conversations: 12,000 requests of the generated
//   conversations workload, a second shape of the same size.
// --quick replays the first 800 requests of the synthetic trace only and
// reports them under their own key.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseMooncakeTrace, tileTrace } from '../sim/replay/mooncake.js';
import { replay, type PolicyRun } from '../sim/replay/replay.js';
import { conversations } from '../sim/replay/session-traffic.js';
import { limitWorkload, type Workload } from '../sim/replay/workload.js';
import type { BenchSuite, Figure } from './figures.js';
import { median, round } from './stats.js';

const WORKERS = 8;
const QUICK_REQUESTS = 800;
const LONG_REQUESTS = 12_000;
const RUNS = 3;

/** The trace from bench/ (tsx) or dist/bench/ (the compiled runner). */
function tracePath(): string {
  for (const up of ['../', '../../']) {
    const path = fileURLToPath(new URL(`${up}sim/traces/synthetic_trace.jsonl`, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new Error('sim/traces/synthetic_trace.jsonl not found');
}

function timedReplay(build: () => Workload): { seconds: number; run: PolicyRun } {
  const started = performance.now();
  const [run] = replay(build(), { policies: ['kv'], workers: WORKERS });
  return { seconds: (performance.now() - started) / 1000, run: run! };
}

/** The median wall time of RUNS replays, with the report of the first. */
function measure(build: () => Workload): { wall: number; run: PolicyRun } {
  const samples = Array.from({ length: RUNS }, () => timedReplay(build));
  return { wall: round(median(samples.map((s) => s.seconds)), 2), run: samples[0]!.run };
}

export const replaySuite: BenchSuite = {
  name: 'replay',
  async run({ quick }) {
    const text = readFileSync(tracePath(), 'utf8');
    const synthetic = () => parseMooncakeTrace(text, { source: 'synthetic_trace.jsonl' });
    const how = (run: PolicyRun) => `${run.report.requests} requests, kv, ${WORKERS} workers, median of ${RUNS} runs`;
    const prefix = quick ? 'replay_quick' : 'replay_synthetic';
    const { wall, run } = measure(quick ? () => limitWorkload(synthetic(), QUICK_REQUESTS) : synthetic);
    const { report } = run;
    const figures: Figure[] = [
      quick ? { key: 'replay_quick_wall_s', value: wall, unit: 's', note: how(run) } : { key: 'replay_synthetic_wall_s', value: wall, unit: 's', goal: '<= 10', note: how(run) },
      { key: `${prefix}_kv_reuse`, value: round(report.prefix_cache_reused_ratio, 3), unit: 'ratio', note: `ideal ${round(report.ideal_prefix_reuse_ratio, 3)}` },
      { key: `${prefix}_kv_ttft_mean_ms`, value: round(report.ttft_ms.mean ?? NaN, 1), unit: 'ms', note: 'virtual time' },
    ];
    if (quick) return figures;
    const tiled = measure(() => tileTrace(synthetic(), LONG_REQUESTS));
    const chat = measure(() => limitWorkload(conversations({ sessions: 2000 }), LONG_REQUESTS));
    return [
      ...figures,
      { key: 'replay_wall_s_per_12k_requests', value: tiled.wall, unit: 's', goal: '<= 5', note: `synthetic trace tiled: ${how(tiled.run)}` },
      { key: 'replay_wall_s_per_12k_conversations', value: chat.wall, unit: 's', note: `generated conversations: ${how(chat.run)}` },
    ];
  },
};
