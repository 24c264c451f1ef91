// The numbers a replay reports: latency distributions, prefix-cache reuse,
// and the reuse a single infinite cache would reach on the same workload
// (the ceiling any routing policy is read against).
import type { HashBlocks } from '../mocker/block-hash.js';
import type { RequestRecord } from './simulate.js';
import { halvesView, U64Map } from '../mocker/u64-map.js';
import { PromptHashes } from './prompt-hashes.js';
import { TracePrefixes } from './trace-prefixes.js';
import type { Workload } from './workload.js';

export interface Distribution {
  mean: number | null;
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

/**
 * The p-th percentile (0..100) of ascending values, interpolating linearly
 * between the two nearest ranks (numpy's default); NaN when empty.
 */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const rank = (Math.min(100, Math.max(0, p)) / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(n - 1, lo + 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

/** Mean and percentiles of the values, each rounded to `digits` decimals; nulls when there are none. */
export function distribution(values: readonly number[], digits = 3): Distribution {
  if (values.length === 0) return { mean: null, p50: null, p90: null, p99: null };
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    mean: round(sum / sorted.length, digits),
    p50: round(percentile(sorted, 50), digits),
    p90: round(percentile(sorted, 90), digits),
    p99: round(percentile(sorted, 99), digits),
  };
}

export function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** Time to first token from arrival at the router (queueing included), per completed request. */
export function ttfts(records: readonly RequestRecord[]): number[] {
  return records.filter((r) => r.outcome === 'completed' && r.firstTokenMs !== null).map((r) => r.firstTokenMs! - r.arrivalMs);
}

/** Mean gap between a request's output tokens, per completed request with two or more. */
export function interTokenLatencies(records: readonly RequestRecord[]): number[] {
  return records.filter((r) => r.outcome === 'completed' && r.outputTokens > 1).map((r) => (r.endMs - r.firstTokenMs!) / (r.outputTokens - 1));
}

/** Arrival to last token, per completed request. */
export function endToEndLatencies(records: readonly RequestRecord[]): number[] {
  return records.filter((r) => r.outcome === 'completed').map((r) => r.endMs - r.arrivalMs);
}

/**
 * Per program (session) whose turns all completed: the first turn's arrival
 * to the last turn's last token, what an agent's user waits for the whole
 * task. Sessions are taken in order of first appearance.
 */
export function programLatencies(records: readonly RequestRecord[]): number[] {
  const spans = new Map<string, { start: number; end: number; complete: boolean }>();
  for (const r of records) {
    if (r.sessionId === null) continue;
    const span = spans.get(r.sessionId);
    const complete = r.outcome === 'completed';
    if (!span) spans.set(r.sessionId, { start: r.arrivalMs, end: r.endMs, complete });
    else {
      span.start = Math.min(span.start, r.arrivalMs);
      span.end = Math.max(span.end, r.endMs);
      span.complete &&= complete;
    }
  }
  return [...spans.values()].filter((s) => s.complete).map((s) => s.end - s.start);
}

/** Reused prompt tokens / prompt tokens over completed requests (reused = cached at first admission); 0 when none. */
export function reuseRatio(records: readonly RequestRecord[]): number {
  let prompt = 0;
  let cached = 0;
  for (const r of records) {
    if (r.outcome !== 'completed') continue;
    prompt += r.promptTokens;
    cached += r.cachedTokens;
  }
  return prompt === 0 ? 0 : cached / prompt;
}

/**
 * The prefix reuse of one engine with an infinite cache serving the whole
 * workload at `blockSize`, per request in workload order: each request reuses
 * its longest prefix of full blocks any earlier request computed, capped (as
 * the engine caps it) so at least one prompt token is computed. With chained
 * block hashes the total does not depend on the order requests arrive in,
 * apart from that cap. A prompt made of trace blocks is read from its ids
 * (trace-prefixes.ts); any other is written out and hashed with `hashBlocks`.
 * Returns the reused tokens of each request.
 */
export function idealPrefixHits(workload: Workload, blockSize: number, hashBlocks: HashBlocks): Float64Array {
  const seen = new U64Map(1 << 16);
  const traced = new TracePrefixes(blockSize);
  const prompts = new PromptHashes(blockSize, hashBlocks);
  const reused = new Float64Array(workload.requests.length);
  workload.requests.forEach((request, r) => {
    const length = request.inputLength;
    const limit = Math.floor((length - 1) / blockSize);
    let hits = 0;
    if (request.trace) hits = traced.take(request.trace, length, limit);
    else {
      const hashes = prompts.of(request);
      const halves = halvesView(hashes);
      while (hits < Math.min(limit, hashes.length) && seen.has(halves[2 * hits]!, halves[2 * hits + 1]!)) hits++;
      for (let i = hits; i < hashes.length; i++) seen.set(halves[2 * i]!, halves[2 * i + 1]!, 1);
    }
    reused[r] = hits * blockSize;
  });
  return reused;
}

/** Reused tokens `hits` (one per request) as a share of the workload's prompt tokens; 0 for an empty workload. */
export function reuseShare(workload: Workload, hits: ArrayLike<number>): number {
  let prompt = 0;
  let reused = 0;
  workload.requests.forEach((request, r) => {
    prompt += request.inputLength;
    reused += hits[r]!;
  });
  return prompt === 0 ? 0 : reused / prompt;
}
