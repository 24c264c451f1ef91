// Retries over real HTTP: a worker 5xx that survives every retry reaches the
// client as the documented KVR_ERR_UPSTREAM 502 (the worker's status in
// upstream_status), never as the worker's raw answer; and in a class with busy
// thresholds a retry that finds every other worker busy waits in the queue
// and is served once capacity frees, instead of failing with "all workers are
// busy".
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, post, settled, startStack, waitFor, type Stack } from './stack.js';

interface ErrorBody {
  error: { code: string; type: string; message: string; upstream_status?: number };
}

describe('a 5xx on every attempt', () => {
  for (const maxRetries of [0, 1]) {
    it(`answers KVR_ERR_UPSTREAM 502 with the upstream status, not the worker's body (max_retries ${maxRetries})`, async () => {
      const stack = await startStack({ workers: 2, edit: (doc) => void (doc.limits = { max_retries: maxRetries }) });
      try {
        // The mock answers 500 with its own error body when asked to.
        const res = await post(`${stack.url}/v1/chat/completions`, chat('fail everywhere'), { 'x-mock-status': '500' });
        expect(res.status).toBe(502);
        expect(res.headers.get('x-kvrouter-worker')).toMatch(/^mock-[01]$/);
        const body = (await res.json()) as ErrorBody;
        expect(body.error.code).toBe('KVR_ERR_UPSTREAM');
        expect(body.error.type).toBe('upstream_error');
        expect(body.error.upstream_status).toBe(500);
        expect(body.error.message).toMatch(/^worker mock-[01] answered 500: mock failure: status 500 requested by x-mock-status$/);
        expect(await metric(stack.url, 'kvrouter_upstream_retries_total')).toBe(maxRetries);
        expect(await metric(stack.url, 'kvrouter_requests_total', { code: '502', outcome: 'error' })).toBe(1);
        expect(settled(stack.model)).toBe(true);
      } finally {
        await stack.close();
      }
    });
  }
});

describe('a retry in a class with busy thresholds', () => {
  let stack: Stack;
  let broken: Server;
  let brokenHits = 0;

  beforeAll(async () => {
    broken = createServer((req, res) => {
      req.resume();
      if (req.url === '/health') return void res.end('{}');
      brokenHits++;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'engine overloaded', type: 'server_error' } }));
    });
    await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
    const brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
    stack = await startStack({
      workers: 1,
      edit: (doc) => {
        (doc.workers as unknown[]).push({ id: 'broken', url: brokenUrl, model: 'mock-model' });
        // A worker with any prompt not yet prefilled is busy for this class.
        (doc.models as Record<string, unknown>[])[0]!.policy_classes = [{ name: 'interactive', busy: { prefill_tokens: 0 } }];
        doc.limits = { max_retries: 2 };

      },
    });
  });
  afterAll(async () => {
    await stack?.close();
    broken?.close();
  });

  it('waits in the queue while the only other worker is busy, then is served there', async () => {
    // mock-0 is busy with a request that sends nothing for a while; only the broken worker is free.
    const blocker = post(`${stack.url}/v1/chat/completions`, chat('hold mock-0'), { 'x-worker-id': 'mock-0', 'x-mock-header-delay-ms': '500' });
    await waitFor(() => stack.model.route.fleet.load().find((l) => l.worker === 'mock-0')!.activeRequests === 1, 'mock-0 to be busy');
    const hitsBefore = brokenHits;
    const retried = post(`${stack.url}/v1/chat/completions`, chat('goes to broken first'));
    // It failed on the broken worker and now waits for mock-0 instead of failing.
    await waitFor(() => stack.model.route.scheduler.stats().queued.interactive!.requests === 1, 'the retry to wait in the queue');
    expect(brokenHits).toBe(hitsBefore + 1);
    const res = await retried;
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('mock-0');
    await res.arrayBuffer();
    expect((await blocker).status).toBe(200);
    await waitFor(() => settled(stack.model), 'every booking to be released');
  });

  it('serves a whole burst while the broken worker takes a share of first attempts', async () => {
    const burst = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const res = await post(`${stack.url}/v1/chat/completions`, chat(`burst ${i}`));
        await res.arrayBuffer();
        return { status: res.status, worker: res.headers.get('x-kvrouter-worker') };
      }),
    );
    expect(burst.filter((r) => r.status !== 200)).toEqual([]);
    expect(new Set(burst.map((r) => r.worker))).toEqual(new Set(['mock-0']));
    expect(await metric(stack.url, 'kvrouter_upstream_retries_total', { worker: 'broken' })).toBeGreaterThan(1);
    await waitFor(() => settled(stack.model), 'every booking to be released');
  });
});
