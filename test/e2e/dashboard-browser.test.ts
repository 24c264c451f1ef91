// The dashboard in a real browser: headless Chromium loads GET /dashboard
// from a router in front of mock workers while traffic runs, the charts
// update as the page polls, the numbers it shows are the ones /metrics
// reports, and the explain box draws one overlap bar and one cost bar per
// worker, as POST /router/explain answers. A screenshot stays in
// test-artifacts/ (gitignored). With an admin token the page asks for it.
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, MODEL, post, settled, startStack, waitFor, type Stack } from './stack.js';

const artifacts = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
const SHARED = 'You are the operator assistant of a large inference fleet. Answer briefly and precisely. '.repeat(6);

let browser: Browser;
let stack: Stack;

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  stack = await startStack({ workers: 3, speedup: 5 });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/** Requests with a shared system prompt, streamed and not, until stopped (and at most `limit`). */
function traffic(url: string, limit: number): { stop(): Promise<number> } {
  let stopped = false;
  let sent = 0;
  const lanes = Array.from({ length: 3 }, async (_, lane) => {
    while (!stopped && sent < limit) {
      const n = sent++;
      const body = chat([{ role: 'system', content: SHARED }, { role: 'user', content: `lane ${lane} question ${n}` }], n % 2 === 0 ? { stream: true, stream_options: { include_usage: true }, max_tokens: 8 } : { max_tokens: 8 });
      const res = await post(`${url}/v1/chat/completions`, body);
      await res.arrayBuffer();
    }
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(lanes);
      return sent;
    },
  };
}

/** The numbers the page shows, by data-metric key ("blocks_held|mock-0"). */
async function shown(page: Page): Promise<Record<string, string>> {
  return page.evaluate(() => Object.fromEntries([...document.querySelectorAll('[data-metric]')].map((e) => [e.getAttribute('data-metric')!, e.textContent ?? ''])));
}

const percent = (x: number) => `${(x * 100).toFixed(1)}%`;

/** What /metrics says for each number the page shows per worker. */
async function fromMetrics(url: string, workers: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const w of workers) {
    out[`blocks_held|${w}`] = String(await metric(url, 'kvrouter_worker_kv_blocks', { worker: w }));
    out[`requests_routed|${w}`] = String(await metric(url, 'kvrouter_prefix_requests_total', { worker: w, source: 'predicted' }));
    out[`active_requests|${w}`] = String(await metric(url, 'kvrouter_worker_load', { worker: w, kind: 'active_requests' }));
    out[`hit_rate_predicted|${w}`] = percent(await metric(url, 'kvrouter_prefix_hit_rate', { worker: w, source: 'predicted', weight: 'token' }));
    out[`hit_rate_reported|${w}`] = percent(await metric(url, 'kvrouter_prefix_hit_rate', { worker: w, source: 'reported', weight: 'token' }));
  }
  return out;
}

describe('GET /dashboard in Chromium', () => {
  it('updates live under traffic, shows what /metrics says, and draws explain bars', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const load = traffic(stack.url, 400);
    try {
      await page.goto(`${stack.url}/dashboard`);
      const updates = () => page.evaluate(() => Number(document.body.getAttribute('data-updates') ?? 0));
      const points = () => page.evaluate(() => Number(document.querySelector('svg.lines')?.getAttribute('data-points') ?? 0));
      await waitFor(async () => (await updates()) >= 3 && (await points()) >= 3, 'three polls drawn');
      await waitFor(async () => Number((await shown(page))['requests_routed|mock-0'] ?? 0) + Number((await shown(page))['requests_routed|mock-1'] ?? 0) > 0, 'routed requests on the page');
      // The TTFT chart drew a line from the polled percentiles.
      await waitFor(() => page.evaluate(() => document.querySelector('svg.lines polyline') !== null), 'a TTFT line');
      const sent = await load.stop();
      expect(sent).toBeGreaterThan(0);
      await waitFor(() => settled(stack.model), 'the traffic to settle');

      const workers = ['mock-0', 'mock-1', 'mock-2'];
      let last: { page: Record<string, string>; metrics: Record<string, string> } | null = null;
      await waitFor(
        async () => {
          const metrics = await fromMetrics(stack.url, workers);
          const onPage = await shown(page);
          last = { page: Object.fromEntries(Object.keys(metrics).map((k) => [k, onPage[k]!])), metrics };
          return JSON.stringify(last.page) === JSON.stringify(metrics);
        },
        () => `the page to show what /metrics says: ${JSON.stringify(last)}`,
      );
      const total = workers.reduce((n, w) => n + Number(last!.metrics[`requests_routed|${w}`]), 0);
      expect(total).toBe(sent);
      expect(await page.locator('#diagnostics tr').count()).toBe(3);
      expect(await page.locator('[data-verdict-count="ok"]').textContent()).toBe('ok 3');

      await page.fill('#prompt', SHARED);
      await page.click('#explain-button');
      await waitFor(async () => Object.keys(await shown(page)).some((k) => k.startsWith('overlap|')), 'the explain bars');
      const answer = (await (await post(`${stack.url}/router/explain`, { model: MODEL, messages: [{ role: 'user', content: SHARED }] })).json()) as { prompt_blocks: number; workers: { worker: string; overlap_blocks: number }[] };
      const bars = await shown(page);
      for (const w of answer.workers) {
        expect(bars[`overlap|${w.worker}`]).toBe(`${w.overlap_blocks} / ${answer.prompt_blocks}`);
        expect(bars[`cost|${w.worker}`]).toBeDefined();
      }
      expect(await page.locator('svg.bars rect.bar').count()).toBeGreaterThan(workers.length * 2);
      await page.screenshot({ path: `${artifacts}dashboard.png`, fullPage: true });
      // On a narrow screen nothing makes the page scroll sideways.
      await page.setViewportSize({ width: 640, height: 1000 });
      await waitFor(async () => (await page.evaluate(() => document.documentElement.scrollWidth)) <= 640, 'the page to fit 640 px');
      await page.screenshot({ path: `${artifacts}dashboard-narrow.png`, fullPage: true });
    } finally {
      await load.stop();
      await page.close();
    }
  });

  it('with an admin token, the page asks for it and then shows the data; the data endpoint refuses without it', async () => {
    const guarded = await startStack({ workers: 1, edit: (doc) => void (doc.admin_token = 'dashboard-secret') });
    const page = await browser.newPage();
    try {
      expect((await fetch(`${guarded.url}/dashboard/data`)).status).toBe(401);
      await page.goto(`${guarded.url}/dashboard`);
      await page.locator('#auth').waitFor({ state: 'visible' });
      expect(await page.evaluate(() => document.body.getAttribute('data-updates'))).toBeNull();
      await page.fill('#token', 'dashboard-secret');
      await page.click('#auth button');
      await waitFor(async () => Number(await page.evaluate(() => document.body.getAttribute('data-updates') ?? 0)) >= 1, 'the first update with the token');
      expect(await page.locator('#auth').isHidden()).toBe(true);
    } finally {
      await page.close();
      await guarded.close();
    }
  });
});
