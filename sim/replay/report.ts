// One policy's replay summarised into the fields `kvrouter replay --json`
// prints. Field order is fixed and every value is derived from virtual time
// and counts only, except wall_ms, so the same inputs give the same bytes.
import { distribution, endToEndLatencies, interTokenLatencies, programLatencies, reuseRatio, round, ttfts, type Distribution } from './metrics.js';
import type { RequestRecord } from './simulate.js';
import type { SimulationResult } from './simulate.js';

export interface WorkerReport {
  requests: number;
  prefix_cache_reused_ratio: number;
}

/** The latencies of one kind of traffic (the requests sharing a workload tag). */
export interface TrafficReport {
  requests: number;
  completed: number;
  ttft_ms: Distribution;
  itl_ms: Distribution;
  e2e_ms: Distribution;
}

/** What no policy can beat on a workload, the same for every run and load. */
export interface IdealFigures {
  /** The reuse one infinite cache would reach, at the engines' block size. */
  reuse: number;
  /** Each request's TTFT with that reuse on an idle worker (ttft-floor.ts), over the whole workload. */
  ttft: Distribution;
  /** The same two with the reuse of one LRU cache as large as the fleet's caches together (fleet-lru.ts); null when not computed. */
  fleetLru: { reuse: number; ttft: Distribution } | null;
}

export interface PolicyReport {
  policy: string;
  workers: number;
  /** The load: arrival times and session pauses were divided by it. */
  arrival_speedup: number;
  requests: number;
  completed: number;
  rejected: number;
  failed: number;
  /** Virtual time from the first arrival to the last request's end. */
  duration_ms: number;
  /** Real time the run took. */
  wall_ms: number;
  input_tokens: number;
  output_tokens: number;
  reused_tokens: number;
  prefix_cache_reused_ratio: number;
  ideal_prefix_reuse_ratio: number;
  /** The floor under any policy's TTFT: each request's with the ideal reuse on an idle worker. */
  ideal_ttft_ms: Distribution;
  /** The reuse of one LRU cache of the whole fleet's blocks, and the TTFT floor at that reuse: how much of the gap is cache room (null when not computed). */
  fleet_lru_reuse_ratio: number | null;
  fleet_lru_ttft_ms: Distribution | null;
  ttft_ms: Distribution;
  itl_ms: Distribution;
  e2e_ms: Distribution;
  output_tokens_per_s: number;
  preemptions: number;
  recomputed_tokens: number;
  per_worker: Record<string, WorkerReport>;
  /** Per workload tag, in order of first appearance; empty when no request has one. */
  by_tag: Record<string, TrafficReport>;
  /** Sessions whose turns all completed, and their first arrival to last token. */
  programs: number;
  program_e2e_ms: Distribution;
}

const RATIO_DIGITS = 6;

function traffic(records: readonly RequestRecord[]): TrafficReport {
  return {
    requests: records.length,
    completed: records.filter((r) => r.outcome === 'completed').length,
    ttft_ms: distribution(ttfts(records)),
    itl_ms: distribution(interTokenLatencies(records)),
    e2e_ms: distribution(endToEndLatencies(records)),
  };
}

function byTag(records: readonly RequestRecord[]): Record<string, TrafficReport> {
  const groups = new Map<string, RequestRecord[]>();
  for (const r of records) {
    if (r.tag === null) continue;
    const group = groups.get(r.tag);
    if (group) group.push(r);
    else groups.set(r.tag, [r]);
  }
  return Object.fromEntries([...groups].map(([tag, group]) => [tag, traffic(group)]));
}

export function summarize(run: SimulationResult, ideal: IdealFigures): PolicyReport {
  const records = run.records;
  const completed = records.filter((r) => r.outcome === 'completed');
  let start = Infinity;
  let end = -Infinity;
  for (const r of records) {
    start = Math.min(start, r.arrivalMs);
    end = Math.max(end, r.endMs);
  }
  const duration = records.length > 0 ? end - start : 0;
  const outputTokens = completed.reduce((sum, r) => sum + r.outputTokens, 0);
  const programs = programLatencies(records);
  const perWorker: Record<string, WorkerReport> = {};
  run.workerIds.forEach((id, w) => {
    const mine = records.filter((r) => r.worker === w);
    perWorker[id] = { requests: mine.length, prefix_cache_reused_ratio: round(reuseRatio(mine), RATIO_DIGITS) };
  });
  return {
    policy: run.label,
    workers: run.workerIds.length,
    arrival_speedup: run.arrivalSpeedup,
    requests: records.length,
    completed: completed.length,
    rejected: records.filter((r) => r.outcome === 'rejected').length,
    failed: records.filter((r) => r.outcome === 'failed').length,
    duration_ms: round(duration, 3),
    wall_ms: round(run.wallMs, 1),
    input_tokens: completed.reduce((sum, r) => sum + r.promptTokens, 0),
    output_tokens: outputTokens,
    reused_tokens: completed.reduce((sum, r) => sum + r.cachedTokens, 0),
    prefix_cache_reused_ratio: round(reuseRatio(records), RATIO_DIGITS),
    ideal_prefix_reuse_ratio: round(ideal.reuse, RATIO_DIGITS),
    ideal_ttft_ms: ideal.ttft,
    fleet_lru_reuse_ratio: ideal.fleetLru && round(ideal.fleetLru.reuse, RATIO_DIGITS),
    fleet_lru_ttft_ms: ideal.fleetLru?.ttft ?? null,
    ttft_ms: distribution(ttfts(records)),
    itl_ms: distribution(interTokenLatencies(records)),
    e2e_ms: distribution(endToEndLatencies(records)),
    output_tokens_per_s: duration > 0 ? round(outputTokens / (duration / 1000), 3) : 0,
    preemptions: run.engines.reduce((sum, e) => sum + e.preemptions, 0),
    recomputed_tokens: run.engines.reduce((sum, e) => sum + e.recomputedTokens, 0),
    per_worker: perWorker,
    by_tag: byTag(records),
    programs: programs.length,
    program_e2e_ms: distribution(programs),
  };
}
