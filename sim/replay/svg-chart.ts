// Small inline-SVG charts for the HTML report: line charts (linear or log x)
// and horizontal bars. Plain strings, no scripts and no external references,
// so the report opens anywhere without a network.

export interface LineSeries {
  label: string;
  color: string;
  /** [x, y] in data units, x ascending. */
  points: readonly (readonly [number, number])[];
  /** Extra attributes on the series' path (data-* markers for readers and tests). */
  attrs?: Record<string, string>;
  dashed?: boolean;
}

export interface LineChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly LineSeries[];
  xLog?: boolean;
  yMin?: number;
  yMax?: number;
  width?: number;
  height?: number;
  /** List the series' labels and colours to the right of the plot. */
  legend?: boolean;
}

export interface Bar {
  label: string;
  value: number;
  color: string;
  attrs?: Record<string, string>;
}

const PAD = { left: 64, right: 16, top: 28, bottom: 44 };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function attributes(attrs: Record<string, string> | undefined): string {
  return Object.entries(attrs ?? {})
    .map(([k, v]) => ` ${k}="${escapeHtml(v)}"`)
    .join('');
}

/** Round tick steps (1, 2 or 5 x 10^k) giving about `count` ticks over [min, max]. */
export function linearTicks(min: number, max: number, count = 5): number[] {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  const ticks: number[] = [];
  for (let t = Math.ceil(min / step) * step; t <= max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

/** Powers of ten within [min, max] (with 2 and 5 between them when the span is short). */
export function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  const short = Math.log10(max / min) < 2;
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of short ? [1, 2, 5] : [1]) {
      const t = m * 10 ** e;
      if (t >= min && t <= max) ticks.push(t);
    }
  }
  return ticks;
}

function label(value: number): string {
  if (value !== 0 && (Math.abs(value) >= 1e5 || Math.abs(value) < 1e-3)) return value.toExponential(0);
  return String(Number(value.toPrecision(4)));
}

function frame(width: number, height: number, title: string, body: string, extraAttrs = ''): string {
  return (
    `<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img"${extraAttrs}>` +
    `<text x="${PAD.left}" y="18" class="title">${escapeHtml(title)}</text>${body}</svg>`
  );
}

export function lineChart(spec: LineChartSpec): string {
  const legendW = spec.legend ? 130 : 0;
  const width = (spec.width ?? 640) + legendW;
  const height = spec.height ?? 320;
  const all = spec.series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]).filter((x) => !spec.xLog || x > 0);
  const ys = all.map((p) => p[1]);
  let xMin = xs.length ? Math.min(...xs) : 0;
  let xMax = xs.length ? Math.max(...xs) : 1;
  if (spec.xLog) {
    xMin = xMin > 0 ? xMin : 1;
    xMax = Math.max(xMax, xMin * 10);
  } else if (!(xMax > xMin)) xMax = xMin + 1;
  const yMin = spec.yMin ?? (ys.length ? Math.min(0, ...ys) : 0);
  let yMax = spec.yMax ?? (ys.length ? Math.max(...ys) : 1);
  if (!(yMax > yMin)) yMax = yMin + 1;
  const plotW = width - legendW - PAD.left - PAD.right;
  const plotH = height - PAD.top - PAD.bottom;
  const fx = spec.xLog
    ? (x: number) => PAD.left + ((Math.log10(Math.max(x, xMin)) - Math.log10(xMin)) / (Math.log10(xMax) - Math.log10(xMin))) * plotW
    : (x: number) => PAD.left + ((x - xMin) / (xMax - xMin)) * plotW;
  const fy = (y: number) => PAD.top + plotH - ((y - yMin) / (yMax - yMin)) * plotH;
  const parts: string[] = [];
  for (const t of spec.xLog ? logTicks(xMin, xMax) : linearTicks(xMin, xMax)) {
    const x = fx(t).toFixed(1);
    parts.push(`<line class="grid" x1="${x}" x2="${x}" y1="${PAD.top}" y2="${PAD.top + plotH}"/>`);
    parts.push(`<text class="tick" x="${x}" y="${PAD.top + plotH + 14}" text-anchor="middle">${label(t)}</text>`);
  }
  for (const t of linearTicks(yMin, yMax)) {
    const y = fy(t).toFixed(1);
    parts.push(`<line class="grid" x1="${PAD.left}" x2="${PAD.left + plotW}" y1="${y}" y2="${y}"/>`);
    parts.push(`<text class="tick" x="${PAD.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${label(t)}</text>`);
  }
  parts.push(`<rect class="axis" x="${PAD.left}" y="${PAD.top}" width="${plotW}" height="${plotH}"/>`);
  parts.push(`<text class="axis-label" x="${PAD.left + plotW / 2}" y="${height - 6}" text-anchor="middle">${escapeHtml(spec.xLabel)}</text>`);
  parts.push(
    `<text class="axis-label" x="14" y="${PAD.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 14 ${PAD.top + plotH / 2})">${escapeHtml(spec.yLabel)}</text>`,
  );
  for (const s of spec.series) {
    const d = s.points
      .filter((p) => !spec.xLog || p[0] > 0)
      .map((p, i) => `${i === 0 ? 'M' : 'L'}${fx(p[0]).toFixed(1)},${fy(p[1]).toFixed(1)}`)
      .join('');
    parts.push(
      `<path class="series" d="${d}" stroke="${s.color}"${s.dashed ? ' stroke-dasharray="4 3"' : ''}${attributes(s.attrs)}><title>${escapeHtml(s.label)}</title></path>`,
    );
  }
  if (spec.legend) {
    spec.series.forEach((s, i) => {
      const x = width - legendW + 8;
      const y = PAD.top + 8 + i * 16;
      parts.push(`<line x1="${x}" x2="${x + 16}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="3"/>`);
      parts.push(`<text class="tick" x="${x + 22}" y="${y}" dominant-baseline="middle">${escapeHtml(s.label)}</text>`);
    });
  }
  return frame(width, height, spec.title, parts.join(''));
}

/** Horizontal bars on a 0..max scale, with an optional dashed reference line (e.g. the ideal). */
export function barChart(title: string, bars: readonly Bar[], max: number, reference?: { value: number; label: string }): string {
  const width = 640;
  const rowH = 26;
  const labelW = 160;
  const height = PAD.top + bars.length * rowH + 30;
  const plotW = width - labelW - 70;
  const fx = (v: number) => labelW + (Math.max(0, v) / max) * plotW;
  const parts = bars.map((b, i) => {
    const y = PAD.top + i * rowH;
    return (
      `<text class="tick" x="${labelW - 8}" y="${y + rowH / 2}" text-anchor="end" dominant-baseline="middle">${escapeHtml(b.label)}</text>` +
      `<rect class="bar" x="${labelW}" y="${y + 4}" width="${(fx(b.value) - labelW).toFixed(1)}" height="${rowH - 8}" fill="${b.color}"${attributes(b.attrs)}><title>${escapeHtml(`${b.label}: ${b.value.toFixed(3)}`)}</title></rect>` +
      `<text class="tick" x="${(fx(b.value) + 6).toFixed(1)}" y="${y + rowH / 2}" dominant-baseline="middle">${b.value.toFixed(3)}</text>`
    );
  });
  if (reference) {
    const x = fx(reference.value).toFixed(1);
    const bottom = PAD.top + bars.length * rowH;
    parts.push(`<line class="reference" x1="${x}" x2="${x}" y1="${PAD.top - 4}" y2="${bottom}"/>`);
    parts.push(`<text class="tick" x="${x}" y="${bottom + 16}" text-anchor="middle">${escapeHtml(`${reference.label} ${reference.value.toFixed(3)}`)}</text>`);
  }
  return frame(width, height, title, parts.join(''));
}
