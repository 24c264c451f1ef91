// Worker failures and client aborts over real HTTP: a stream cut by its worker
// ends with an error event (never a clean end), failures before the first
// byte move the request to another worker, and a client that goes away frees
// its booking at once, whether it was streaming or still waiting for headers.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { delayedMarker } from '../sim/mock-server-fixtures.js';
import { refusedPort } from './refused-port.js';
import { chat, metric, post, settled, sseEvents, startStack, waitFor, type Stack } from './stack.js';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('worker failures', () => {
  let stack: Stack;
  let broken: Server;
  let brokenHits = 0;
  beforeAll(async () => {
    // A worker that answers every request with 503, and one whose port refuses connections.
    broken = createServer((req, res) => {
      brokenHits++;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'engine overloaded', type: 'server_error' } }));
    });
    const brokenUrl = await listen(broken);
    const refusedUrl = `http://127.0.0.1:${refusedPort()}`;
    stack = await startStack({
      edit: (doc) => {
        (doc.models as Record<string, unknown>[])[0]!.selection = { policy: 'round-robin' };
        (doc.workers as unknown[]).push({ id: 'broken', url: brokenUrl, model: 'mock-model' }, { id: 'refused', url: refusedUrl, model: 'mock-model' });
        doc.limits = { max_retries: 3 };
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
    broken?.close();
  });

  it('retries a 5xx answer and a refused connection before the first byte on the next worker', async () => {
    const served: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await post(`${stack.url}/v1/chat/completions`, chat(`retry me ${i}`));
      expect(res.status).toBe(200);
      served.push(res.headers.get('x-kvrouter-worker')!);
      await res.json();
    }
    expect(new Set(served)).toEqual(new Set(['mock-0', 'mock-1']));
    expect(brokenHits).toBeGreaterThanOrEqual(2);
    expect(await metric(stack.url, 'kvrouter_upstream_retries_total', { worker: 'broken' })).toBe(brokenHits);
    expect(await metric(stack.url, 'kvrouter_upstream_retries_total', { worker: 'refused' })).toBeGreaterThanOrEqual(2);
    expect(settled(stack.model)).toBe(true);
  });

  it('ends a stream its worker cut mid-way with an error event, not [DONE], and counts it as interrupted', async () => {
    const before = await metric(stack.url, 'kvrouter_requests_total', { outcome: 'interrupted' });
    // Pinned to a healthy worker so the cut is the only failure.
    const res = await post(`${stack.url}/v1/chat/completions`, chat('cut me', { stream: true, max_tokens: 8 }), { 'x-mock-disconnect-after': '2', 'x-worker-id': 'mock-0' });
    expect(res.status).toBe(200);
    const events = sseEvents(await res.text());
    expect(events).toHaveLength(3);
    expect(events).not.toContain('[DONE]');
    const last = events.at(-1) as { error: { code: string; type: string; message: string } };
    expect(last.error.code).toBe('KVR_ERR_UPSTREAM_INTERRUPTED');
    expect(last.error.message).toMatch(/mock-0 failed mid-response/);
    expect(await metric(stack.url, 'kvrouter_requests_total', { outcome: 'interrupted', worker: 'mock-0' })).toBe(before + 1);
    expect(settled(stack.model)).toBe(true);
  });

  it('surfaces the worker failure (502, with the worker) when every attempt fails before the first byte', async () => {
    const res = await post(`${stack.url}/v1/chat/completions`, chat('cut everywhere'), { 'x-mock-disconnect-after': '0' });
    expect(res.status).toBe(502);
    expect(res.headers.get('x-kvrouter-worker')).toMatch(/^(mock-0|mock-1|broken|refused)$/);
    const body = (await res.json()) as { error: { code: string } };
    expect(body.error.code).toBe('KVR_ERR_UPSTREAM');
    expect(settled(stack.model)).toBe(true);
  });
});

describe('client aborts', () => {
  /** How long the worker holds back a response in the header-delay case: long next to freeing a booking. */
  const DELAY_MS = 2000;
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ workers: 1 });
  });
  afterAll(() => stack?.close());

  it('a client that leaves mid-stream frees its booking and stops the worker', async () => {
    const engine = stack.embedded.fleet.engines[0]!;
    const abort = new AbortController();
    const res = await post(`${stack.url}/v1/chat/completions`, chat('a long story', { stream: true, max_tokens: 20_000 }), {}, abort.signal);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    expect(stack.model.route.fleet.bookedRequests).toBe(1);
    abort.abort();
    await waitFor(() => settled(stack.model), 'the booking to be freed');
    await waitFor(() => engine.stats().aborted === 1, 'the engine to abort the request');
    expect(engine.stats().running).toBe(0);
  });

  it('a client that leaves while the worker has not answered yet frees its booking at once and the worker never runs it', async () => {
    const engine = stack.embedded.fleet.engines[0]!;
    const admitted = engine.stats().admittedPromptTokens;
    const abort = new AbortController();
    const pending = post(`${stack.url}/v1/chat/completions`, chat('slow to start'), { 'x-mock-header-delay-ms': String(DELAY_MS) }, abort.signal).catch((e: Error) => e);
    await waitFor(() => stack.model.route.fleet.bookedRequests === 1, 'the request to be booked');
    abort.abort();
    expect((await pending) as Error).toBeInstanceOf(Error);
    // A marker sent to the worker now comes out of the same delay after the request that left.
    let delayOver = false;
    const marker = delayedMarker(stack.embedded.fleet.urls[0]!, DELAY_MS, [1, 2, 3]).then(() => void (delayOver = true));
    await waitFor(() => settled(stack.model), 'the booking to be freed');
    // Freed while the worker still held the request back: the router did not wait for its answer.
    expect(delayOver).toBe(false);
    await marker;
    // The worker saw its connection close during the delay, so it never started the request: only the marker's 3 tokens arrived.
    expect(engine.stats().admittedPromptTokens).toBe(admitted + 3);
    expect(await metric(stack.url, 'kvrouter_requests_total', { outcome: 'aborted', code: '499' })).toBe(2);
  });
});
