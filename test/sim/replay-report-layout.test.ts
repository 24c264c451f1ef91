// The HTML report laid out by a real browser: headless Chromium renders a
// load-sweep report and a single-load report, and no chart title or legend
// (nor any other chart text) reaches outside its SVG, and no SVG outside
// the box it sits in, at a desktop width and a narrow one. A screenshot of
// each stays in test-artifacts/ (gitignored) for people to look at.
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderHtmlReport } from '../../sim/replay/html-report.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { idealFigures, replay, runSettings } from '../../sim/replay/replay.js';
import { serialRunner } from '../../sim/replay/run-pool.js';
import { sweep } from '../../sim/replay/sweep.js';
import { jsonl, sharedDocumentTrace } from './replay-fixtures.js';

const artifacts = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

const trace = parseMooncakeTrace(jsonl(sharedDocumentTrace({ requests: 40, documents: 5, docBlocks: 4, blockSize: 64, gapMs: 100, output: 8 })), { traceBlockSize: 64 });
// Long labels are what used to run off the charts.
const policies = ['kv', 'round-robin', 'kv:prefill_load_scale=16:overlap_credit=1.5:active_request_weight=0.25'];
const options = { workers: 3, engine: { blockSize: 16, numBlocks: 2048 } };

interface Overflow {
  chart: string;
  text: string;
  kind: string;
}

/** Every chart text (kind: title, legend or other) whose box is not inside its SVG's, and every SVG not inside its container. */
async function overflows(page: Page): Promise<{ checked: Record<string, number>; outside: Overflow[] }> {
  return page.evaluate(() => {
    const inside = (a: DOMRect, b: DOMRect) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
    const outside: { chart: string; text: string; kind: string }[] = [];
    const checked: Record<string, number> = { title: 0, legend: 0, other: 0, svg: 0 };
    for (const svg of document.querySelectorAll('svg.chart')) {
      const box = svg.getBoundingClientRect();
      const name = svg.querySelector('.title')?.textContent ?? '?';
      const container = svg.parentElement!.getBoundingClientRect();
      checked.svg!++;
      if (!inside(box, container)) outside.push({ chart: name, text: '(the chart itself)', kind: 'svg' });
      for (const text of svg.querySelectorAll('text')) {
        const kind = text.classList.contains('title') ? 'title' : text.closest('.legend') ? 'legend' : 'other';
        checked[kind]!++;
        if (!inside(text.getBoundingClientRect(), box)) outside.push({ chart: name, text: text.textContent ?? '', kind });
      }
    }
    return { checked, outside };
  });
}

let browser: Browser;
let sweepHtml: string;
let singleHtml: string;

beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const settings = runSettings(options);
  const result = await sweep(
    policies.map((p) => ({ label: p, policy: p })),
    [1, 4, 16],
    { ttftP90Ms: 30, precision: 0.25 },
    serialRunner(trace, settings, idealFigures(trace, settings.engine, settings.workers)),
  );
  sweepHtml = renderHtmlReport({ title: 'kvrouter replay: a load sweep with a long title that has to wrap onto a second line', settings: { workers: 3 }, runs: [], sweep: result });
  singleHtml = renderHtmlReport({ title: 'kvrouter replay: one load', settings: { workers: 3 }, runs: replay(trace, { ...options, policies }) });
  mkdirSync(artifacts, { recursive: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
});

describe.each([
  ['load sweep', () => sweepHtml, 'sweep'],
  ['single load', () => singleHtml, 'single'],
])('the %s report in Chromium', (_what, html, name) => {
  it.each([
    [1280, 'wide'],
    [640, 'narrow'],
  ])('at %i px wide, every chart title, legend and label lies inside its chart, and every chart inside its box', async (width, tag) => {
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    try {
      await page.setContent(html());
      const { checked, outside } = await overflows(page);
      expect(outside).toEqual([]);
      // The check looked at something: titles on every chart, legends where there are series to tell apart.
      expect(checked.title).toBeGreaterThanOrEqual(checked.svg!);
      expect(checked.legend).toBeGreaterThanOrEqual(policies.length);
      expect(checked.other).toBeGreaterThan(0);
      // Nothing makes the page scroll sideways.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await page.screenshot({ path: `${artifacts}replay-report-${name}-${tag}.png`, fullPage: true });
    } finally {
      await page.close();
    }
  });
});

describe('the load-sweep report', () => {
  it('opens with latency against load: a mean, a p90 and a p99 line per policy, then the capacities', () => {
    const first = sweepHtml.indexOf('<svg');
    expect(sweepHtml.slice(first, first + 400)).toContain('Mean time to first token against load');
    for (const policy of policies) {
      for (const stat of ['mean', 'p90', 'p99']) expect(sweepHtml.split(`data-chart="latency-load" data-policy="${policy}" data-stat="${stat}"`).length - 1).toBe(1);
      expect(sweepHtml).toContain(`data-capacity="${policy}"`);
    }
    expect(sweepHtml.indexOf('Capacity:')).toBeGreaterThan(first);
    expect(sweepHtml.indexOf('Capacity:')).toBeLessThan(sweepHtml.indexOf('data-chart="ttft-cdf"'));
  });
});
