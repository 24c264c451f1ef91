// Small inline-SVG charts for the HTML report: line charts (linear or log
// axes) and horizontal bars. Plain strings, no scripts and no external
// references, so the report opens anywhere without a network.
//
// Nothing may be cut off, and an SVG cannot measure its own text, so the
// layout sizes every text from a conservative estimate of its width
// (textWidth): long titles wrap onto more lines, the legend goes under the
// plot in as many rows as its entries need, margins grow to fit tick and
// bar labels, and a chart widens when a single word or entry would not fit.

export interface LineSeries {
  label: string;
  color: string;
  /** [x, y] in data units, x ascending. */
  points: readonly (readonly [number, number])[];
  /** Extra attributes on the series' path (data-* markers for readers and tests). */
  attrs?: Record<string, string>;
  dashed?: boolean;
  /** Draw a dot at every point (for series of a few points, such as loads). */
  markers?: boolean;
  /** Leave the series out of the legend (a second line of a series already listed). */
  unlisted?: boolean;
}

/** A horizontal line across the plot at y, labelled at its right end. */
export interface Reference {
  y: number;
  label: string;
}

export interface LineChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly LineSeries[];
  xLog?: boolean;
  yLog?: boolean;
  yMin?: number;
  yMax?: number;
  /** Width and height of the plot area (the chart adds margins, title and legend). */
  width?: number;
  height?: number;
  /** List the series' labels and colours under the plot. */
  legend?: boolean;
  /** A line of text under the legend, e.g. how to read line styles. */
  note?: string;
  references?: readonly Reference[];
  /** The x ticks to draw, in place of round ones (e.g. the loads a sweep measured). */
  xTicks?: readonly number[];
}

export interface Bar {
  label: string;
  value: number;
  color: string;
  attrs?: Record<string, string>;
}

const TITLE_SIZE = 13;
const TICK_SIZE = 11;
const LABEL_SIZE = 12;
const LINE = 1.35;
const EDGE = 10;

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function attributes(attrs: Record<string, string> | undefined): string {
  return Object.entries(attrs ?? {})
    .map(([k, v]) => ` ${k}="${escapeHtml(v)}"`)
    .join('');
}

/**
 * A width no narrower than the text renders at in a proportional sans-serif
 * face at `size` px (bold for titles): per character class, a little more
 * than the widest common faces give it.
 */
export function textWidth(text: string, size: number, bold = false): number {
  let em = 0;
  for (const c of text) {
    if ('il.,:;|!\'`'.includes(c)) em += 0.34;
    else if ('fjrt()[]{} /-'.includes(c)) em += 0.45;
    else if ('mwMW@%'.includes(c)) em += 1.0;
    else if (c >= 'A' && c <= 'Z') em += 0.78;
    else em += 0.64;
  }
  return Math.ceil(em * size * (bold ? 1.08 : 1)) + 2;
}

/** The text broken at spaces into lines no wider than `width` (a word wider than that gets a line of its own). */
export function wrapText(text: string, size: number, width: number, bold = false): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    const candidate = line === '' ? word : `${line} ${word}`;
    if (line !== '' && textWidth(candidate, size, bold) > width) {
      lines.push(line);
      line = word;
    } else line = candidate;
  }
  lines.push(line);
  return lines;
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

/**
 * Powers of ten within [min, max], with 2 and 5 between them when the span is
 * short; round linear steps when it is under a decade.
 */
export function logTicks(min: number, max: number): number[] {
  if (max / min < 10) return linearTicks(min, max).filter((t) => t > 0);
  const ticks: number[] = [];
  const short = Math.log10(max / min) < 2;
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of short ? [1, 2, 5] : [1]) {
      const t = m * 10 ** e;
      if (t >= min * (1 - 1e-9) && t <= max * (1 + 1e-9)) ticks.push(Number(t.toPrecision(12)));
    }
  }
  return ticks;
}

function label(value: number): string {
  if (value !== 0 && (Math.abs(value) >= 1e5 || Math.abs(value) < 1e-3)) return value.toExponential(0);
  return String(Number(value.toPrecision(4)));
}

/** One axis: its range, its mapping to pixels and its ticks. */
interface Axis {
  min: number;
  max: number;
  ticks: number[];
  /** Position in [0, 1] along the axis. */
  at(value: number): number;
}

function axis(values: readonly number[], log: boolean, fixedMin?: number, fixedMax?: number): Axis {
  const usable = log ? values.filter((v) => v > 0) : values;
  let min = fixedMin ?? (usable.length ? Math.min(...usable) : log ? 1 : 0);
  let max = fixedMax ?? (usable.length ? Math.max(...usable) : log ? 10 : 1);
  if (log) {
    min = min > 0 ? min : 1;
    // Whole decades, or a short span padded to one.
    if (!(max > min)) max = min * 10;
    const lo = Math.log10(min);
    const hi = Math.log10(max);
    return { min, max, ticks: logTicks(min, max), at: (v) => (Math.log10(Math.max(v, min)) - lo) / (hi - lo) };
  }
  if (fixedMin === undefined) min = Math.min(0, min);
  if (!(max > min)) max = min + 1;
  return { min, max, ticks: linearTicks(min, max), at: (v) => (v - min) / (max - min) };
}

function textLines(lines: readonly string[], x: number, y: number, size: number, cls: string, anchor = 'start'): string {
  const spans = lines.map((l, i) => `<tspan x="${x}" dy="${i === 0 ? 0 : (size * LINE).toFixed(1)}">${escapeHtml(l)}</tspan>`).join('');
  return `<text class="${cls}" x="${x}" y="${y}" text-anchor="${anchor}">${spans}</text>`;
}

function frame(width: number, height: number, body: string, cls = 'chart'): string {
  return `<svg class="${cls}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img">${body}</svg>`;
}

/** Legend entries laid out in rows across `width`: [x, row] per entry. */
function legendLayout(labels: readonly string[], width: number): { places: [number, number][]; rows: number } {
  const places: [number, number][] = [];
  let x = 0;
  let row = 0;
  for (const l of labels) {
    const w = 26 + textWidth(l, TICK_SIZE) + 14;
    if (x > 0 && x + w > width) {
      row++;
      x = 0;
    }
    places.push([x, row]);
    x += w;
  }
  return { places, rows: labels.length === 0 ? 0 : row + 1 };
}

/**
 * References of one value as one line, their labels joined: two labels at one
 * height would print over each other (the floors of a replay whose fleet
 * cache holds everything are equal).
 */
function mergedReferences(references: readonly Reference[]): Reference[] {
  const merged: Reference[] = [];
  for (const r of references) {
    const same = merged.find((m) => m.y === r.y);
    if (same) same.label = `${same.label} = ${r.label}`;
    else merged.push({ y: r.y, label: r.label });
  }
  return merged;
}

export function lineChart(spec: LineChartSpec): string {
  const all = spec.series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]);
  const references = mergedReferences(spec.references ?? []);
  const ys = [...all.map((p) => p[1]), ...references.map((r) => r.y)];
  const x = axis(xs, spec.xLog === true);
  if (spec.xTicks) x.ticks = spec.xTicks.filter((t) => t >= x.min && t <= x.max);
  const y = axis(ys, spec.yLog === true, spec.yMin, spec.yMax);
  const yTickW = Math.max(...y.ticks.map((t) => textWidth(label(t), TICK_SIZE)));
  const referenceW = Math.max(0, ...references.map((r) => textWidth(r.label, TICK_SIZE) + 6));
  const left = EDGE + LABEL_SIZE * LINE + 6 + yTickW + 6;
  const lastTickHalf = x.ticks.length ? textWidth(label(x.ticks[x.ticks.length - 1]!), TICK_SIZE) / 2 : 0;
  const right = Math.max(EDGE + lastTickHalf, EDGE + referenceW);
  let plotW = spec.width ?? 560;
  const plotH = spec.height ?? 260;
  const listed = spec.series.filter((s) => !s.unlisted);
  // The chart is at least wide enough for its widest legend entry, note and title word.
  const widest = Math.max(
    0,
    ...listed.map((s) => 26 + textWidth(s.label, TICK_SIZE) + 14),
    ...(spec.note ? spec.note.split(' ').map((w) => textWidth(w, TICK_SIZE)) : []),
    ...spec.title.split(' ').map((w) => textWidth(w, TITLE_SIZE, true)),
    textWidth(spec.xLabel, LABEL_SIZE),
  );
  plotW = Math.max(plotW, widest - (left - EDGE) - (right - EDGE));
  const width = Math.ceil(left + plotW + right);
  const inner = width - 2 * EDGE;
  const titleLines = wrapText(spec.title, TITLE_SIZE, inner, true);
  const top = EDGE + TITLE_SIZE + (titleLines.length - 1) * TITLE_SIZE * LINE + 12;
  const plotBottom = top + plotH;
  const xLabelY = plotBottom + TICK_SIZE + 6 + LABEL_SIZE + 4;
  const legend = spec.legend ? legendLayout(listed.map((s) => s.label), inner) : { places: [], rows: 0 };
  const legendTop = xLabelY + 12;
  const noteLines = spec.note ? wrapText(spec.note, TICK_SIZE, inner) : [];
  const noteTop = legendTop + legend.rows * 18 + (legend.rows > 0 ? 4 : 0);
  const height = Math.ceil(noteTop + noteLines.length * TICK_SIZE * LINE + EDGE);
  const fx = (v: number) => left + x.at(v) * plotW;
  const fy = (v: number) => top + plotH - y.at(v) * plotH;
  const parts: string[] = [textLines(titleLines, EDGE, EDGE + TITLE_SIZE, TITLE_SIZE, 'title')];
  for (const t of x.ticks) {
    const px = fx(t).toFixed(1);
    parts.push(`<line class="grid" x1="${px}" x2="${px}" y1="${top}" y2="${plotBottom}"/>`);
    parts.push(`<text class="tick" x="${px}" y="${plotBottom + TICK_SIZE + 3}" text-anchor="middle">${label(t)}</text>`);
  }
  for (const t of y.ticks) {
    const py = fy(t).toFixed(1);
    parts.push(`<line class="grid" x1="${left}" x2="${left + plotW}" y1="${py}" y2="${py}"/>`);
    parts.push(`<text class="tick" x="${left - 6}" y="${py}" text-anchor="end" dominant-baseline="middle">${label(t)}</text>`);
  }
  parts.push(`<rect class="axis" x="${left}" y="${top}" width="${plotW}" height="${plotH}"/>`);
  parts.push(`<text class="axis-label" x="${(left + plotW / 2).toFixed(1)}" y="${xLabelY}" text-anchor="middle">${escapeHtml(spec.xLabel)}</text>`);
  const yLabelX = EDGE + LABEL_SIZE;
  const yLabelY = (top + plotH / 2).toFixed(1);
  parts.push(`<text class="axis-label" x="${yLabelX}" y="${yLabelY}" text-anchor="middle" transform="rotate(-90 ${yLabelX} ${yLabelY})">${escapeHtml(spec.yLabel)}</text>`);
  for (const r of references) {
    const py = fy(r.y).toFixed(1);
    parts.push(`<line class="reference" x1="${left}" x2="${left + plotW}" y1="${py}" y2="${py}"/>`);
    parts.push(`<text class="tick reference-label" x="${left + plotW + 4}" y="${py}" dominant-baseline="middle">${escapeHtml(r.label)}</text>`);
  }
  for (const s of spec.series) {
    const points = s.points.filter((p) => (!spec.xLog || p[0] > 0) && (!spec.yLog || p[1] > 0));
    const d = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${fx(p[0]).toFixed(1)},${fy(p[1]).toFixed(1)}`).join('');
    parts.push(
      `<path class="series" d="${d}" stroke="${s.color}"${s.dashed ? ' stroke-dasharray="5 3"' : ''}${attributes(s.attrs)}><title>${escapeHtml(s.label)}</title></path>`,
    );
    if (s.markers) for (const p of points) parts.push(`<circle cx="${fx(p[0]).toFixed(1)}" cy="${fy(p[1]).toFixed(1)}" r="2.6" fill="${s.color}"/>`);
  }
  // Without a legend there are no places, and nothing is drawn.
  if (spec.legend) {
    listed.forEach((s, i) => {
      const [lx, row] = legend.places[i]!;
      const ex = EDGE + lx;
      const ey = legendTop + row * 18 + 6;
      parts.push(
        `<g class="legend"><line x1="${ex}" x2="${ex + 20}" y1="${ey}" y2="${ey}" stroke="${s.color}" stroke-width="3"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>` +
          `<text class="tick" x="${ex + 26}" y="${ey}" dominant-baseline="middle">${escapeHtml(s.label)}</text></g>`,
      );
    });
  }
  if (noteLines.length > 0) parts.push(textLines(noteLines, EDGE, noteTop + TICK_SIZE, TICK_SIZE, 'tick note'));
  return frame(width, height, parts.join(''));
}

/** Horizontal bars on a 0..max scale, with an optional dashed reference line (e.g. the ideal). */
export function barChart(title: string, bars: readonly Bar[], max: number, reference?: { value: number; label: string }): string {
  const rowH = 26;
  const labelW = Math.max(60, ...bars.map((b) => textWidth(b.label, TICK_SIZE))) + 8;
  const valueW = textWidth('0.000', TICK_SIZE) + 8;
  const plotW = 420;
  const refHalf = reference ? textWidth(`${reference.label} ${reference.value.toFixed(3)}`, TICK_SIZE) / 2 : 0;
  let width = Math.ceil(EDGE + labelW + plotW + Math.max(valueW, refHalf) + EDGE);
  width = Math.max(width, ...title.split(' ').map((w) => textWidth(w, TITLE_SIZE, true) + 2 * EDGE));
  const titleLines = wrapText(title, TITLE_SIZE, width - 2 * EDGE, true);
  const top = EDGE + TITLE_SIZE + (titleLines.length - 1) * TITLE_SIZE * LINE + 12;
  const height = Math.ceil(top + bars.length * rowH + (reference ? 24 : 0) + EDGE);
  const x0 = EDGE + labelW;
  const fx = (v: number) => x0 + (Math.max(0, v) / max) * plotW;
  const parts = [textLines(titleLines, EDGE, EDGE + TITLE_SIZE, TITLE_SIZE, 'title')];
  bars.forEach((b, i) => {
    const y = top + i * rowH;
    parts.push(
      `<text class="tick" x="${x0 - 8}" y="${y + rowH / 2}" text-anchor="end" dominant-baseline="middle">${escapeHtml(b.label)}</text>` +
        `<rect class="bar" x="${x0}" y="${y + 4}" width="${(fx(b.value) - x0).toFixed(1)}" height="${rowH - 8}" fill="${b.color}"${attributes(b.attrs)}><title>${escapeHtml(`${b.label}: ${b.value.toFixed(3)}`)}</title></rect>` +
        `<text class="tick" x="${(fx(b.value) + 6).toFixed(1)}" y="${y + rowH / 2}" dominant-baseline="middle">${b.value.toFixed(3)}</text>`,
    );
  });
  if (reference) {
    const x = fx(reference.value).toFixed(1);
    const bottom = top + bars.length * rowH;
    parts.push(`<line class="reference" x1="${x}" x2="${x}" y1="${top - 4}" y2="${bottom}"/>`);
    parts.push(`<text class="tick" x="${x}" y="${bottom + 16}" text-anchor="middle">${escapeHtml(`${reference.label} ${reference.value.toFixed(3)}`)}</text>`);
  }
  return frame(width, height, parts.join(''));
}
