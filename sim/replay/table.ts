// The comparison table `kvrouter replay` prints for people: one row per
// policy, the figures that tell routing policies apart.
import type { PolicyReport } from './report.js';

function ms(value: number | null): string {
  return value === null ? '-' : value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function spread(report: PolicyReport): string {
  const counts = Object.values(report.per_worker).map((w) => w.requests);
  return `${Math.min(...counts)}-${Math.max(...counts)}`;
}

export function formatComparison(reports: readonly PolicyReport[]): string {
  const head = ['policy', 'done', 'reuse', 'ideal', 'ttft mean', 'ttft p50', 'ttft p99', 'itl mean', 'e2e mean', 'e2e p99', 'out tok/s', 'preempt', 'per worker', 'sim s', 'wall s'];
  const rows = reports.map((r) => [
    r.policy,
    r.rejected + r.failed > 0 ? `${r.completed}/${r.requests}` : String(r.completed),
    r.prefix_cache_reused_ratio.toFixed(3),
    r.ideal_prefix_reuse_ratio.toFixed(3),
    ms(r.ttft_ms.mean),
    ms(r.ttft_ms.p50),
    ms(r.ttft_ms.p99),
    ms(r.itl_ms.mean),
    ms(r.e2e_ms.mean),
    ms(r.e2e_ms.p99),
    r.output_tokens_per_s.toFixed(1),
    String(r.preemptions),
    spread(r),
    (r.duration_ms / 1000).toFixed(1),
    (r.wall_ms / 1000).toFixed(1),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  // The policy column reads left-aligned, the figures right-aligned.
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const notes = ['latencies in ms (virtual time); reuse = reused prompt tokens / prompt tokens; per worker = fewest-most requests'];
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line), '', ...notes].join('\n');
}
