// `kvrouter replay --report out.html`: one self-contained HTML page comparing
// the policies of a replay. Charts are inline SVG built here; the page has no
// scripts, styles or fonts from anywhere else, so it opens offline. A load
// sweep opens with latency against load, one line per policy, and each
// policy's capacity at the SLO; then, per load, the comparison table and the
// TTFT distributions.
import { ttfts } from './metrics.js';
import type { PolicyRun } from './replay.js';
import type { SweepResult } from './sweep.js';
import { barChart, escapeHtml, lineChart, type LineSeries } from './svg-chart.js';
import { bracketText, capacityCaption, capacityText, COMPARISON_COLUMNS, referenceRows, references, speedup } from './table.js';

export interface HtmlReportInput {
  title: string;
  /** Settings shown under the title (workload, fleet, delays...). */
  settings: Record<string, string | number>;
  /** The runs of a single load (ignored when `sweep` is given). */
  runs: readonly PolicyRun[];
  /** A load sweep: every policy at every load, and the capacities. */
  sweep?: SweepResult;
  /** A table of figures to show above the comparison (a scenario's figures, one column per run). */
  figures?: { head: readonly string[]; rows: readonly (readonly string[])[] };
}

const POLICY_COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const CDF_POINTS = 256;
const LOAD_BUCKETS = 48;

function policyColor(i: number): string {
  return POLICY_COLORS[i % POLICY_COLORS.length]!;
}

function workerColor(w: number, workers: number): string {
  return `hsl(${Math.round((w * 360) / Math.max(1, workers))} 65% 42%)`;
}

/** The empirical CDF, thinned to at most CDF_POINTS points. */
function cdfPoints(values: number[]): [number, number][] {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  if (n === 0) return [];
  const steps = Math.min(n, CDF_POINTS);
  const points: [number, number][] = [];
  for (let k = 0; k < steps; k++) {
    const i = steps === 1 ? n - 1 : Math.round((k * (n - 1)) / (steps - 1));
    points.push([sorted[i]!, (i + 1) / n]);
  }
  return points;
}

function ttftChart(runs: readonly PolicyRun[], title = 'Time to first token (CDF)'): string {
  const series: LineSeries[] = runs.map((r, i) => ({
    label: r.report.policy,
    color: policyColor(i),
    points: cdfPoints(ttfts(r.run.records)),
    attrs: { 'data-chart': 'ttft-cdf', 'data-policy': r.report.policy, 'data-load': String(r.report.arrival_speedup) },
  }));
  return lineChart({ title, xLabel: 'TTFT, ms (log scale)', yLabel: 'fraction of requests', series, xLog: true, yMin: 0, yMax: 1, legend: true });
}

/** One line per policy through its runs at each load; the figure each point shows, null where there is none. */
function loadSeries(sweep: SweepResult, chart: string, stat: string, value: (run: PolicyRun) => number | null, dashed = false): LineSeries[] {
  return sweep.runs.map((p, i) => ({
    label: p.label,
    color: policyColor(i),
    points: p.loads.flatMap((r) => {
      const v = value(r);
      return v === null ? [] : [[r.report.arrival_speedup, v] as const];
    }),
    attrs: { 'data-chart': chart, 'data-policy': p.label, 'data-stat': stat },
    markers: true,
    dashed,
    unlisted: dashed,
  }));
}

function latencyCharts(sweep: SweepResult): string {
  const slo = sweep.capacities[0]?.slo_ttft_p90_ms;
  const loads = sweep.runs[0]?.loads.map((r) => r.report.arrival_speedup) ?? [];
  // No policy beats the floor at any load: the room a policy has is its gap to it.
  const first = sweep.runs[0]?.loads[0]?.report;
  const load = { xLabel: 'arrival speed-up (log scale)', xLog: true, yLog: true, legend: true, xTicks: loads } as const;
  const mean = lineChart({
    ...load,
    title: 'Mean time to first token against load',
    yLabel: 'TTFT mean, ms (log scale)',
    series: loadSeries(sweep, 'latency-load', 'mean', (r) => r.report.ttft_ms.mean),
    references: first ? references(first).flatMap((ref) => (ref.ttft.mean === null ? [] : [{ y: ref.ttft.mean, label: ref.name }])) : [],
  });
  const tail = lineChart({
    ...load,
    title: 'TTFT p90 and p99 against load',
    yLabel: 'TTFT, ms (log scale)',
    series: [
      ...loadSeries(sweep, 'latency-load', 'p90', (r) => r.report.ttft_ms.p90),
      ...loadSeries(sweep, 'latency-load', 'p99', (r) => r.report.ttft_ms.p99, true),
    ],
    note: 'solid: p90; dashed: p99, same colour per policy',
    references: slo === undefined ? [] : [{ y: slo, label: `SLO ${slo} ms` }],
  });
  const reuse = lineChart({
    ...load,
    yLog: false,
    title: 'Prefix cache reuse against load',
    yLabel: 'reused prompt tokens / prompt tokens',
    yMin: 0,
    yMax: 1,
    series: loadSeries(sweep, 'reuse-load', 'reuse', (r) => r.report.prefix_cache_reused_ratio),
    references: [{ y: sweep.runs[0]?.loads[0]?.report.ideal_prefix_reuse_ratio ?? 0, label: 'ideal' }],
  });
  return [mean, tail, reuse].map((chart) => `<figure>${chart}</figure>`).join('');
}

function capacityTable(sweep: SweepResult): string {
  const first = sweep.capacities[0];
  if (!first) return '';
  const rows = sweep.capacities.map((c, i) => {
    const swatch = `<span class="swatch" style="background:${policyColor(i)}"></span>`;
    return `<tr><td>${swatch}${escapeHtml(c.policy)}</td><td data-capacity="${escapeHtml(c.policy)}">${escapeHtml(capacityText(c))}</td><td>${escapeHtml(bracketText(c))}</td><td>${c.probes.length}</td></tr>`;
  });
  const caption = capacityCaption(first);
  return `<h2>${escapeHtml(caption[0]!.toUpperCase() + caption.slice(1))}</h2>${scrolling(`<table><thead><tr><th>policy</th><th>capacity</th><th>bracket</th><th>runs</th></tr></thead><tbody>${rows.join('')}</tbody></table>`)}`;
}

function sweepSections(sweep: SweepResult): string[] {
  const loads = sweep.runs[0]?.loads.map((r) => r.report.arrival_speedup) ?? [];
  return [
    '<h2>Latency against load</h2>',
    latencyCharts(sweep),
    capacityTable(sweep),
    ...loads.flatMap((load, k) => {
      const runs = sweep.runs.map((p) => p.loads[k]!);
      return [`<h2>At ${escapeHtml(speedup(load))} arrival speed-up</h2>`, summaryTable(runs), `<figure>${ttftChart(runs, `Time to first token (CDF) at ${speedup(load)}`)}</figure>`];
    }),
  ];
}

function reuseChart(runs: readonly PolicyRun[]): string {
  const ideal = runs[0]?.report.ideal_prefix_reuse_ratio ?? 0;
  const bars = runs.map((r, i) => ({
    label: r.report.policy,
    value: r.report.prefix_cache_reused_ratio,
    color: policyColor(i),
    attrs: { 'data-chart': 'reuse', 'data-policy': r.report.policy },
  }));
  return barChart('Prefix cache reuse (reused prompt tokens / prompt tokens)', bars, 1, { value: ideal, label: 'ideal' });
}

function workerLoadCharts(runs: readonly PolicyRun[]): string {
  let span = 0;
  for (const r of runs) for (const rec of r.run.records) if (rec.dispatchMs !== null) span = Math.max(span, rec.dispatchMs);
  const bucketMs = Math.max(1, span / LOAD_BUCKETS);
  return runs
    .map((r) => {
      const workers = r.run.workerIds.length;
      const counts = r.run.workerIds.map(() => new Array<number>(LOAD_BUCKETS).fill(0));
      for (const rec of r.run.records) {
        if (rec.worker < 0 || rec.dispatchMs === null) continue;
        counts[rec.worker]![Math.min(LOAD_BUCKETS - 1, Math.floor(rec.dispatchMs / bucketMs))]!++;
      }
      const series: LineSeries[] = r.run.workerIds.map((id, w) => ({
        label: id,
        color: workerColor(w, workers),
        points: counts[w]!.map((c, b) => [((b + 0.5) * bucketMs) / 1000, c] as const),
        attrs: { 'data-chart': 'worker-load', 'data-policy': r.report.policy, 'data-worker': id },
      }));
      const chart = lineChart({
        title: `${r.report.policy}: requests dispatched per worker per ${(bucketMs / 1000).toPrecision(3)} s`,
        xLabel: 'virtual time, s',
        yLabel: 'requests',
        series,
        yMin: 0,
        width: 400,
        height: 220,
        legend: true,
      });
      return `<figure data-policy="${escapeHtml(r.report.policy)}">${chart}</figure>`;
    })
    .join('');
}

function summaryTable(runs: readonly PolicyRun[]): string {
  const head = COMPARISON_COLUMNS.map((c) => `<th>${escapeHtml(c.head)}</th>`).join('');
  const rows = runs.map((r, i) => {
    const [policy, ...figures] = COMPARISON_COLUMNS.map((c) => escapeHtml(c.cell(r.report)));
    const swatch = `<span class="swatch" style="background:${policyColor(i)}"></span>`;
    return `<tr><td>${swatch}${policy}</td>${figures.map((f) => `<td>${f}</td>`).join('')}</tr>`;
  });
  const first = runs[0];
  if (first) for (const row of referenceRows(COMPARISON_COLUMNS, first.report)) rows.push(`<tr class="reference">${row.map((f) => `<td>${escapeHtml(f)}</td>`).join('')}</tr>`);
  return scrolling(`<table><thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody></table>`);
}

/** A wide table scrolls in its own box rather than widening the page. */
function scrolling(table: string): string {
  return `<div class="table">${table}</div>`;
}

function plainTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = (tag: string, row: readonly string[]) => row.map((c) => `<${tag}>${escapeHtml(c)}</${tag}>`).join('');
  return scrolling(`<table><thead><tr>${cells('th', head)}</tr></thead><tbody>${rows.map((r) => `<tr>${cells('td', r)}</tr>`).join('')}</tbody></table>`);
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:8px 0 16px;color:#555}dt{font-weight:600}dd{margin:0}
.table{max-width:100%;overflow-x:auto}table{border-collapse:collapse}th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}th:first-child,td:first-child{text-align:left;white-space:nowrap}
.swatch{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}
figure{display:inline-block;margin:0 12px 12px 0;max-width:100%;vertical-align:top}
svg.chart{max-width:100%;height:auto;font-family:system-ui,sans-serif}
.chart .title{font-weight:600;font-size:13px}.chart .tick{font-size:11px;fill:#555}.chart .axis-label{font-size:12px;fill:#333}
.chart .grid{stroke:#eee}.chart .axis{fill:none;stroke:#999}.chart .series{fill:none;stroke-width:1.8}
.chart .reference{stroke:#333;stroke-dasharray:4 3}
`;

function singleLoadSections(runs: readonly PolicyRun[]): string[] {
  return [
    summaryTable(runs),
    '<h2>Time to first token</h2>',
    `<figure>${ttftChart(runs)}</figure>`,
    '<h2>Prefix cache reuse</h2>',
    `<figure>${reuseChart(runs)}</figure>`,
    '<h2>Requests per worker over time</h2>',
    workerLoadCharts(runs),
  ];
}

export function renderHtmlReport(input: HtmlReportInput): string {
  const settings = Object.entries(input.settings)
    .map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(String(v))}</dd>`)
    .join('');
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${escapeHtml(input.title)}</title>`,
    `<style>${STYLE}</style></head><body>`,
    `<h1>${escapeHtml(input.title)}</h1>`,
    `<dl>${settings}</dl>`,
    ...(input.figures ? ['<h2>Scenario figures</h2>', plainTable(input.figures.head, input.figures.rows), '<h2>All runs</h2>'] : []),
    ...(input.sweep ? sweepSections(input.sweep) : singleLoadSections(input.runs)),
    '</body></html>',
    '',
  ].join('\n');
}
