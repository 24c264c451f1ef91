// Scenario cold-pool: warm agent sessions on every worker, and from minute 2
// a cold 160,000-token prompt (nothing cached anywhere) at a fixed interval.
// Cold Pool (a two-worker pool) against its own baseline (workers: 0: the
// same classification and Cold lane, no containment), both over the default
// cost policy. What it shows: whether containing cold prefills on the pool
// keeps warm decoding (ITL) and warm TTFT steady, what that costs the cold
// prompts, and from which cold rate the pool can no longer keep up.
import type { RequestRecord } from './simulate.js';
import { agentSessions } from './agent-sessions.js';
import { coldPrompts } from './cold-prompts.js';
import { round } from './metrics.js';
import type { PolicyRun } from './replay.js';
import type { TrafficReport } from './report.js';
import type { ScenarioDefinition, ScenarioFigures } from './scenarios.js';
import { mergeWorkloads } from './workload.js';

export const COLD_POOL_DEFAULTS = {
  /** Fifteen simulated minutes, the length the Cold Pool issue asks for. */
  durationS: 900,
  /** One cold prompt every 20 s, the rate. */
  coldIntervalMs: 20_000,
};

/** The cold prompt: 160,000 tokens that share nothing with anything. */
const COLD_PROMPT_TOKENS = 160_000;
/**
 * Cold from minute 2 of 15: warm sessions have settled on every worker by
 * then. Shorter runs keep the same proportion.
 */
const COLD_START_FRACTION = 2 / 15;
/**
 * By default one warm session per second on 8 workers (the agent-sessions
 * generator's default gap), scaled with the fleet so the load per worker
 * stays the same.
 */
const WARM_SESSIONS_PER_WORKER_PER_S = 1 / 8;
/**
 * Between the largest warm prompt the generator makes (2,048 system + 2,048
 * task + 9 x (4,096 tool + 512 output) = 45,568 tokens) and the cold prompt,
 * so every warm turn is Warm and every cold prompt is Cold.
 */
const REQUEST_THRESHOLD = 100_000;
/** The largest pool Cold Pool allows on 8 workers (a third, rounded down). */
const POOL_WORKERS = 2;

function checkOptions(o: { durationS: number; coldIntervalMs: number; warmGapMs: number }): void {
  if (!Number.isFinite(o.durationS) || o.durationS <= 0) throw new RangeError(`durationS must be a number of seconds > 0, got ${o.durationS}`);
  for (const key of ['coldIntervalMs', 'warmGapMs'] as const) {
    if (!Number.isFinite(o[key]) || o[key] <= 0) throw new RangeError(`${key} must be a number of ms > 0, got ${o[key]}`);
  }
}

export const COLD_POOL_SCENARIO: ScenarioDefinition = {
  summary: 'warm agent sessions plus a cold 160k-token prompt at a fixed interval (default 20 s): Cold Pool (2 workers) against its workers: 0 baseline',
  options: ['durationS', 'coldIntervalMs', 'warmGapMs'],
  build(options) {
    const o = {
      durationS: options.durationS ?? COLD_POOL_DEFAULTS.durationS,
      coldIntervalMs: options.coldIntervalMs ?? COLD_POOL_DEFAULTS.coldIntervalMs,
      warmGapMs: options.warmGapMs ?? 1000 / (WARM_SESSIONS_PER_WORKER_PER_S * options.workers),
    };
    checkOptions(o);
    const durationMs = o.durationS * 1000;
    const coldStartMs = durationMs * COLD_START_FRACTION;
    const warm = agentSessions({
      sessions: Math.max(1, Math.floor(durationMs / o.warmGapMs)),
      sessionGapMs: o.warmGapMs,
      seed: options.seed,
      idPrefix: 'warm',
      tag: 'warm',
    });
    const cold = coldPrompts({
      count: Math.max(1, Math.ceil((durationMs - coldStartMs) / o.coldIntervalMs)),
      intervalMs: o.coldIntervalMs,
      startMs: coldStartMs,
      promptTokens: COLD_PROMPT_TOKENS,
      seed: options.seed,
      idPrefix: 'cold',
      tag: 'cold',
    });
    const classifier = (workers: number) => ({ type: 'cold_pool', params: { request_threshold: REQUEST_THRESHOLD, workers } });
    return {
      name: 'cold-pool',
      workload: mergeWorkloads('cold-pool', warm, cold),
      runs: [
        { label: 'cold-pool', policy: 'kv', classifier: classifier(POOL_WORKERS) },
        { label: 'baseline', policy: 'kv', classifier: classifier(0) },
      ],
      // The engine defaults: 16,384 blocks of 64 tokens (a 160k prompt takes a sixth of a worker's cache).
      engine: {},
      settings: {
        duration: `${o.durationS} s`,
        'warm sessions': `${warm.requests.filter((r) => 'atMs' in r.arrival).length}, one every ${round(o.warmGapMs, 1)} ms on average (agent-sessions defaults otherwise)`,
        'cold prompts': `${cold.requests.length} of ${COLD_PROMPT_TOKENS} tokens, one every ${o.coldIntervalMs} ms from ${round(coldStartMs / 1000, 1)} s`,
        'cold pool': `request_threshold ${REQUEST_THRESHOLD}, workers ${POOL_WORKERS} (at most a third of the fleet; baseline: 0), other parameters default`,
      },
      figures: coldPoolFigures,
    };
  },
};

function coldPoolFigures({ report, run }: PolicyRun): ScenarioFigures {
  const warm: Partial<TrafficReport> = report.by_tag.warm ?? {};
  const cold: Partial<TrafficReport> = report.by_tag.cold ?? {};
  const colds = run.records.filter((r) => r.tag === 'cold');
  const [first, last] = coldTtftThirds(colds);
  return {
    warm_ttft_p50_ms: warm.ttft_ms?.p50 ?? null,
    warm_ttft_p99_ms: warm.ttft_ms?.p99 ?? null,
    warm_itl_p50_ms: warm.itl_ms?.p50 ?? null,
    warm_itl_p99_ms: warm.itl_ms?.p99 ?? null,
    cold_ttft_p50_ms: cold.ttft_ms?.p50 ?? null,
    cold_ttft_p99_ms: cold.ttft_ms?.p99 ?? null,
    cold_ttft_first_third_ms: first,
    cold_ttft_last_third_ms: last,
    cold_backlog_max: coldBacklogMax(colds),
  };
}

/**
 * Mean cold TTFT of the first and the last third of the cold prompts (by
 * arrival). At a rate the pool sustains they are alike; past it the last
 * third waits behind everything before it and the gap grows with the run.
 */
export function coldTtftThirds(colds: readonly RequestRecord[]): [number | null, number | null] {
  const third = Math.floor(colds.length / 3);
  if (third === 0) return [null, null];
  const mean = (part: readonly RequestRecord[]) => {
    const done = part.filter((r) => r.firstTokenMs !== null);
    return done.length === 0 ? null : round(done.reduce((sum, r) => sum + r.firstTokenMs! - r.arrivalMs, 0) / done.length, 3);
  };
  return [mean(colds.slice(0, third)), mean(colds.slice(-third))];
}

/**
 * The most cold prompts waiting at once: arrived, and without a first token
 * yet (queued in the router or in an engine). Bounded when the pool keeps up;
 * growing with the run when it cannot.
 */
export function coldBacklogMax(colds: readonly RequestRecord[]): number {
  const changes: [number, number][] = [];
  for (const r of colds) {
    changes.push([r.arrivalMs, +1]);
    changes.push([r.firstTokenMs ?? r.endMs, -1]);
  }
  // A prompt answered at the moment another arrives has left first.
  changes.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let waiting = 0;
  let most = 0;
  for (const [, delta] of changes) most = Math.max(most, (waiting += delta));
  return most;
}
