// The tables `kvrouter replay` prints for people: the comparison (one row
// per policy, the figures that tell routing policies apart; the HTML
// report's table uses the same columns), and for a load sweep one row per
// policy and load, then each policy's capacity at the SLO.
import type { PolicyReport } from './report.js';
import type { Capacity, SweepResult } from './sweep.js';

export interface Column {
  head: string;
  cell(report: PolicyReport): string;
  /** The cell of a reference row (the ideal, the fleet's LRU); '-' without it. */
  reference?(ref: Reference, report: PolicyReport): string;
}

/** What a reference row shows: a reuse and the TTFT floor at it, from the ideal_* or fleet_lru_* fields. */
export interface Reference {
  name: string;
  /** What the row is, for the table's notes. */
  note: string;
  reuse: number;
  ttft: PolicyReport['ttft_ms'];
}

/** The reference rows of a workload, from any of its reports (their reference figures are the same in all). */
export function references(report: PolicyReport): Reference[] {
  const ideal = { name: '(ideal)', note: IDEAL_NOTE, reuse: report.ideal_prefix_reuse_ratio, ttft: report.ideal_ttft_ms };
  const lru = report.fleet_lru_reuse_ratio;
  if (lru === null || report.fleet_lru_ttft_ms === null) return [ideal];
  return [ideal, { name: '(fleet LRU)', note: FLEET_LRU_NOTE, reuse: lru, ttft: report.fleet_lru_ttft_ms }];
}

function ms(value: number | null): string {
  return value === null ? '-' : value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function spread(report: PolicyReport): string {
  const counts = Object.values(report.per_worker).map((w) => w.requests);
  return `${Math.min(...counts)}-${Math.max(...counts)}`;
}

/** The columns the tables share, by what they show. */
const COLUMN = {
  policy: { head: 'policy', cell: (r) => r.policy, reference: (ref) => ref.name },
  done: { head: 'done', cell: (r) => (r.rejected + r.failed > 0 ? `${r.completed}/${r.requests}` : String(r.completed)) },
  reuse: { head: 'reuse', cell: (r) => r.prefix_cache_reused_ratio.toFixed(3), reference: (ref) => ref.reuse.toFixed(3) },
  ttftMean: { head: 'ttft mean', cell: (r) => ms(r.ttft_ms.mean), reference: (ref) => ms(ref.ttft.mean) },
  ttftP50: { head: 'ttft p50', cell: (r) => ms(r.ttft_ms.p50), reference: (ref) => ms(ref.ttft.p50) },
  ttftP90: { head: 'ttft p90', cell: (r) => ms(r.ttft_ms.p90), reference: (ref) => ms(ref.ttft.p90) },
  ttftP99: { head: 'ttft p99', cell: (r) => ms(r.ttft_ms.p99), reference: (ref) => ms(ref.ttft.p99) },
  itlMean: { head: 'itl mean', cell: (r) => ms(r.itl_ms.mean) },
  e2eMean: { head: 'e2e mean', cell: (r) => ms(r.e2e_ms.mean) },
} satisfies Record<string, Column>;

export const COMPARISON_COLUMNS: readonly Column[] = [
  COLUMN.policy,
  COLUMN.done,
  COLUMN.reuse,
  { head: 'ideal', cell: (r) => r.ideal_prefix_reuse_ratio.toFixed(3), reference: (_ref, r) => r.ideal_prefix_reuse_ratio.toFixed(3) },
  COLUMN.ttftMean,
  COLUMN.ttftP50,
  COLUMN.ttftP90,
  COLUMN.ttftP99,
  COLUMN.itlMean,
  COLUMN.e2eMean,
  { head: 'e2e p99', cell: (r) => ms(r.e2e_ms.p99) },
  { head: 'out tok/s', cell: (r) => r.output_tokens_per_s.toFixed(1) },
  { head: 'preempt', cell: (r) => String(r.preemptions) },
  { head: 'per worker', cell: spread },
  { head: 'sim s', cell: (r) => (r.duration_ms / 1000).toFixed(1) },
];

/** The reference rows under these columns, from any report of the workload. */
export function referenceRows(columns: readonly Column[], report: PolicyReport): string[][] {
  return references(report).map((ref) => columns.map((c) => c.reference?.(ref, report) ?? '-'));
}

const IDEAL_NOTE = "(ideal): the floor no policy beats, each request's TTFT with the reuse of one infinite cache on an idle worker";
const FLEET_LRU_NOTE = "(fleet LRU): the same with the reuse of one LRU cache as large as all workers' caches together (what the cache room allows)";

export function formatComparison(reports: readonly PolicyReport[]): string {
  const columns = [...COMPARISON_COLUMNS, { head: 'wall s', cell: (r: PolicyReport) => (r.wall_ms / 1000).toFixed(1) }];
  const rows = reports.map((r) => columns.map((c) => c.cell(r)));
  if (reports[0]) rows.push(...referenceRows(columns, reports[0]));
  const refs = reports[0] ? references(reports[0]) : [];
  const notes = ['latencies in ms (virtual time); reuse = reused prompt tokens / prompt tokens; per worker = fewest-most requests', ...refs.map((r) => r.note)];
  return formatRows(columns.map((c) => c.head), rows, notes);
}

/** A plain-text table: the first column left-aligned, the rest right-aligned, then the notes. */
export function formatRows(head: readonly string[], rows: readonly (readonly string[])[], notes: readonly string[] = []): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line), ...(notes.length > 0 ? ['', ...notes] : [])].join('\n');
}

/** A speed-up as people read it: 4 significant digits and an x. */
export function speedup(value: number): string {
  return `${Number(value.toPrecision(4))}x`;
}

const SWEEP_COLUMNS: readonly Column[] = [
  COLUMN.policy,
  { head: 'load', cell: (r) => speedup(r.arrival_speedup), reference: () => 'any' },
  COLUMN.done,
  COLUMN.reuse,
  COLUMN.ttftMean,
  COLUMN.ttftP50,
  COLUMN.ttftP90,
  COLUMN.ttftP99,
  { head: 'x ideal', cell: (r) => `${overIdeal(r.ttft_ms.mean, r.ideal_ttft_ms.mean)} / ${overIdeal(r.ttft_ms.p99, r.ideal_ttft_ms.p99)}` },
  COLUMN.itlMean,
  { head: 'itl p99', cell: (r) => ms(r.itl_ms.p99) },
  COLUMN.e2eMean,
  { head: 'wall s', cell: (r) => (r.wall_ms / 1000).toFixed(1) },
];

/** A figure over the ideal's, as a ratio. */
function overIdeal(value: number | null, ideal: number | null): string {
  return value === null || ideal === null || !(ideal > 0) ? '-' : (value / ideal).toFixed(2);
}

/** The capacity cell: the speed-up, or what the search could say about it. */
export function capacityText(c: Capacity): string {
  if (c.status === 'below') return `< ${speedup(c.bracket[1]!)}`;
  if (c.status === 'above') return `>= ${speedup(c.capacity!)}`;
  return speedup(c.capacity!);
}

export function bracketText(c: Capacity): string {
  return c.bracket.map((b) => (b === null ? '-' : speedup(b))).join(' .. ');
}

/** What the capacity column means, for the capacities of one search. */
export function capacityCaption(c: Capacity): string {
  return `capacity: the highest arrival speed-up with TTFT p90 <= ${c.slo_ttft_p90_ms} ms, bisected until the bracket is within ${Number((c.precision * 100).toPrecision(3))}%`;
}

export function formatSweep(result: SweepResult): string {
  const rows = result.runs.flatMap((p) => p.loads.map((run) => SWEEP_COLUMNS.map((c) => c.cell(run.report))));
  // The references do not depend on the load: one row each stands for every load.
  const first = result.runs[0]?.loads[0]?.report;
  if (first) rows.push(...referenceRows(SWEEP_COLUMNS, first));
  const notes = [
    "latencies in ms (virtual time); load = arrival speed-up; reuse = reused prompt tokens / prompt tokens; x ideal = TTFT mean / the ideal's, and p99 / the ideal's",
    ...(first ? references(first) : []).map((r) => `${r.note}, at any load`),
  ];
  const parts = [formatRows(SWEEP_COLUMNS.map((c) => c.head), rows, notes)];
  const capacity = result.capacities[0];
  if (capacity) {
    const head = ['policy', 'capacity', 'bracket', 'runs'];
    const capacityRows = result.capacities.map((c) => [c.policy, capacityText(c), bracketText(c), String(c.probes.length)]);
    parts.push(formatRows(head, capacityRows, [capacityCaption(capacity)]));
  }
  return parts.join('\n\n');
}
