// GET /dashboard/data: what the dashboard draws, read from the router's own
// state at the moment it is asked (the same sources /metrics reads): per
// model its workers' load, cache blocks and hit rates, queue depth and lanes
// per policy class, recent TTFT / inter-token latency percentiles and
// decisions per second; and every worker rank's diagnosis, worst first.
import type { Diagnostics } from '../diagnostics/diagnostics.js';
import { ratesOf } from '../diagnostics/hit-rates.js';
import type { RouterRuntime } from '../runtime.js';

export function dashboardData(rt: RouterRuntime, diagnostics: Diagnostics) {
  const report = diagnostics.report();
  const byWorker = new Map(report.workers.map((w) => [`${w.model}\u0000${w.worker}`, w]));
  return {
    time: Date.now(),
    summary: report.summary,
    models: [...rt.models.values()].map((m) => {
      const stats = m.route.scheduler.stats();
      const latency = diagnostics.latency(m.name);
      const hits = diagnostics.hits.ofModel(m.name);
      return {
        model: m.name,
        block_size: m.config.blockSize,
        decisions_per_second: latency.decisionsPerSecond,
        ttft_s: latency.ttft,
        itl_s: latency.itl,
        in_flight: stats.inFlight,
        queue: Object.entries(stats.queued).map(([policyClass, q]) => ({ policy_class: policyClass, requests: q.requests, lanes: q.lanes })),
        hit_rate: { predicted: ratesOf(hits.predicted), reported: ratesOf(hits.reported) },
        workers: m.route.fleet.load().map((l) => {
          const d = byWorker.get(`${m.name}\u0000${l.worker}`);
          const h = diagnostics.hits.of(m.name, l.worker);
          return {
            worker: l.worker,
            prefill_tokens: l.prefillTokens,
            decode_blocks: l.decodeBlocks,
            active_requests: l.activeRequests,
            blocks_held: d?.blocks_held ?? 0,
            requests_routed: h.predicted.requests,
            verdict: d?.verdict ?? 'ok',
            hit_rate: { predicted: ratesOf(h.predicted), reported: ratesOf(h.reported) },
          };
        }),
      };
    }),
    diagnostics: report.workers,
  };
}
