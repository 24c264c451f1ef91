// `kvrouter replay --report out.html`: one self-contained HTML page comparing
// the policies of a replay. Charts are inline SVG built here; the page has no
// scripts, styles or fonts from anywhere else, so it opens offline.
import { ttfts } from './metrics.js';
import type { PolicyRun } from './replay.js';
import { barChart, escapeHtml, lineChart, type LineSeries } from './svg-chart.js';
import { COMPARISON_COLUMNS } from './table.js';

export interface HtmlReportInput {
  title: string;
  /** Settings shown under the title (workload, fleet, delays...). */
  settings: Record<string, string | number>;
  runs: readonly PolicyRun[];
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

function ttftChart(runs: readonly PolicyRun[]): string {
  const series: LineSeries[] = runs.map((r, i) => ({
    label: r.report.policy,
    color: policyColor(i),
    points: cdfPoints(ttfts(r.run.records)),
    attrs: { 'data-chart': 'ttft-cdf', 'data-policy': r.report.policy },
  }));
  return lineChart({ title: 'Time to first token (CDF)', xLabel: 'TTFT, ms (log scale)', yLabel: 'fraction of requests', series, xLog: true, yMin: 0, yMax: 1, legend: true });
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
        height: 260,
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
  return `<table><thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function plainTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = (tag: string, row: readonly string[]) => row.map((c) => `<${tag}>${escapeHtml(c)}</${tag}>`).join('');
  return `<table><thead><tr>${cells('th', head)}</tr></thead><tbody>${rows.map((r) => `<tr>${cells('td', r)}</tr>`).join('')}</tbody></table>`;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:8px 0 16px;color:#555}dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse}th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}th:first-child,td:first-child{text-align:left;white-space:nowrap}
.swatch{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}
figure{display:inline-block;margin:0 12px 12px 0}
.chart .title{font-weight:600;font-size:13px}.chart .tick{font-size:11px;fill:#555}.chart .axis-label{font-size:12px;fill:#333}
.chart .grid{stroke:#eee}.chart .axis{fill:none;stroke:#999}.chart .series{fill:none;stroke-width:1.8}
.chart .reference{stroke:#333;stroke-dasharray:4 3}
`;

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
    summaryTable(input.runs),
    '<h2>Time to first token</h2>',
    ttftChart(input.runs),
    '<h2>Prefix cache reuse</h2>',
    reuseChart(input.runs),
    '<h2>Requests per worker over time</h2>',
    workerLoadCharts(input.runs),
    '</body></html>',
    '',
  ].join('\n');
}
