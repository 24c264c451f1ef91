// The comparison table `kvrouter replay` prints for people: one row per
// policy, the figures that tell routing policies apart. The HTML report's
// table uses the same columns.
import type { PolicyReport } from './report.js';

export interface Column {
  head: string;
  cell(report: PolicyReport): string;
}

function ms(value: number | null): string {
  return value === null ? '-' : value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function spread(report: PolicyReport): string {
  const counts = Object.values(report.per_worker).map((w) => w.requests);
  return `${Math.min(...counts)}-${Math.max(...counts)}`;
}

export const COMPARISON_COLUMNS: readonly Column[] = [
  { head: 'policy', cell: (r) => r.policy },
  { head: 'done', cell: (r) => (r.rejected + r.failed > 0 ? `${r.completed}/${r.requests}` : String(r.completed)) },
  { head: 'reuse', cell: (r) => r.prefix_cache_reused_ratio.toFixed(3) },
  { head: 'ideal', cell: (r) => r.ideal_prefix_reuse_ratio.toFixed(3) },
  { head: 'ttft mean', cell: (r) => ms(r.ttft_ms.mean) },
  { head: 'ttft p50', cell: (r) => ms(r.ttft_ms.p50) },
  { head: 'ttft p90', cell: (r) => ms(r.ttft_ms.p90) },
  { head: 'ttft p99', cell: (r) => ms(r.ttft_ms.p99) },
  { head: 'itl mean', cell: (r) => ms(r.itl_ms.mean) },
  { head: 'e2e mean', cell: (r) => ms(r.e2e_ms.mean) },
  { head: 'e2e p99', cell: (r) => ms(r.e2e_ms.p99) },
  { head: 'out tok/s', cell: (r) => r.output_tokens_per_s.toFixed(1) },
  { head: 'preempt', cell: (r) => String(r.preemptions) },
  { head: 'per worker', cell: spread },
  { head: 'sim s', cell: (r) => (r.duration_ms / 1000).toFixed(1) },
];

export function formatComparison(reports: readonly PolicyReport[]): string {
  const columns = [...COMPARISON_COLUMNS, { head: 'wall s', cell: (r: PolicyReport) => (r.wall_ms / 1000).toFixed(1) }];
  const rows = reports.map((r) => columns.map((c) => c.cell(r)));
  const notes = ['latencies in ms (virtual time); reuse = reused prompt tokens / prompt tokens; per worker = fewest-most requests'];
  return formatRows(columns.map((c) => c.head), rows, notes);
}

/** A plain-text table: the first column left-aligned, the rest right-aligned, then the notes. */
export function formatRows(head: readonly string[], rows: readonly (readonly string[])[], notes: readonly string[] = []): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line), ...(notes.length > 0 ? ['', ...notes] : [])].join('\n');
}
