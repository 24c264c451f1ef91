// The admin API: off (404) without a token, 401 with a wrong one; list, add,
// drain and remove workers (with each one's ejection state); read and set busy
// thresholds at runtime.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, MODEL, post, startStack, waitFor, type Stack } from './stack.js';

const TOKEN = 'admin-secret-token';

describe('admin API without a token', () => {
  it('is not mounted at all', async () => {
    const stack = await startStack({ workers: 1 });
    try {
      const res = await fetch(`${stack.url}/admin/workers`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('KVR_ERR_ROUTE_NOT_FOUND');
    } finally {
      await stack.close();
    }
  });
});

describe('admin API with a token', () => {
  let stack: Stack;
  const admin = (path: string, init: { method?: string; body?: unknown; token?: string | null } = {}) =>
    fetch(`${stack.url}${path}`, {
      method: init.method ?? 'GET',
      headers: {
        ...(init.token !== null && { authorization: `Bearer ${init.token ?? TOKEN}` }),
        ...(init.body !== undefined && { 'content-type': 'application/json' }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
  beforeAll(async () => {
    stack = await startStack({
      edit: (doc) => {
        doc.admin_token = TOKEN;
        doc.policy_classes = [{ name: 'default' }, { name: 'batch', busy: { decode_fraction: 0.5 } }];
      },
    });
  });
  afterAll(() => stack?.close());

  interface ListedWorker {
    id: string;
    ejected: { reason: string; consecutive_failures: number; backoff_ms: number; probing_in_ms: number } | null;
    consecutive_connect_failures: number;
    consecutive_5xx: number;
  }
  const listed = async (id: string) => ((await (await admin('/admin/workers')).json()) as { workers: ListedWorker[] }).workers.find((w) => w.id === id);

  it('shows each worker\'s ejection state and failure streaks', async () => {
    // An engine that answers every request, its health check included, with a 500.
    const failing = createServer((_req, res) => {
      res.statusCode = 500;
      res.end('{"error":"engine down"}');
    });
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(failing.address() as AddressInfo).port}`;
    try {
      expect((await admin('/admin/workers', { method: 'POST', body: { id: 'failing', url, model: MODEL } })).status).toBe(201);
      expect(await listed('failing')).toMatchObject({ ejected: null, consecutive_connect_failures: 0, consecutive_5xx: 0 });
      await (await post(`${stack.url}/v1/chat/completions`, chat('to the failing worker'), { 'x-worker-id': 'failing' })).arrayBuffer();
      const once = (await listed('failing'))!;
      expect(once.ejected).toBeNull();
      expect(once.consecutive_5xx).toBeGreaterThanOrEqual(1);
      // Five 5xx answers in a row (the default threshold) take it out of rotation.
      await waitFor(
        async () => {
          await (await post(`${stack.url}/v1/chat/completions`, chat('to the failing worker'), { 'x-worker-id': 'failing' })).arrayBuffer();
          return (await listed('failing'))!.ejected !== null;
        },
        'the failing worker to be listed as ejected',
      );
      const ejected = (await listed('failing'))!.ejected!;
      expect(ejected).toMatchObject({ reason: '5xx', consecutive_failures: 5, backoff_ms: 1000 });
      expect(ejected.probing_in_ms).toBeLessThanOrEqual(1000);
      expect(await listed('mock-0')).toMatchObject({ ejected: null, consecutive_connect_failures: 0, consecutive_5xx: 0 });
    } finally {
      await admin('/admin/workers/failing', { method: 'DELETE' });
      await new Promise((resolve) => failing.close(resolve));
    }
  });

  it('answers 401 without the token or with a wrong one', async () => {
    for (const token of [null, 'not-the-token']) {
      const res = await admin('/admin/workers', { token });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('KVR_ERR_UNAUTHORIZED');
    }
  });

  it('lists, adds, drains and removes workers', async () => {
    const list = (await (await admin('/admin/workers')).json()) as { workers: { id: string; kv_events: { source: string }; draining: boolean }[] };
    expect(list.workers.map((w) => w.id)).toEqual(['mock-0', 'mock-1']);
    expect(list.workers[0]!.kv_events.source).toBe('zmq');

    const url = stack.embedded.fleet.urls[0]!;
    const bad = await admin('/admin/workers', { method: 'POST', body: { id: 'extra', url, model: MODEL, kv_events: { source: 'zmq', endpoint: 'udp://nowhere' } } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^worker\.kv_events\.endpoint: /);
    const dup = await admin('/admin/workers', { method: 'POST', body: { id: 'mock-0', url, model: MODEL } });
    expect(dup.status).toBe(409);

    const added = await admin('/admin/workers', { method: 'POST', body: { id: 'extra', url, model: MODEL, total_blocks: 100 } });
    expect(added.status).toBe(201);
    expect(((await added.json()) as { kv_events: { source: string } }).kv_events.source).toBe('none');
    const pinned = await post(`${stack.url}/v1/chat/completions`, chat('to the new worker'), { 'x-worker-id': 'extra' });
    expect(pinned.status).toBe(200);
    expect(pinned.headers.get('x-kvrouter-worker')).toBe('extra');

    const drained = await admin('/admin/workers/mock-0/drain', { method: 'POST' });
    expect(((await drained.json()) as { draining: boolean }).draining).toBe(true);
    const explained = (await (await post(`${stack.url}/router/explain`, chat('where to?'))).json()) as { workers: { worker: string; filtered: string | null }[] };
    expect(explained.workers.find((w) => w.worker === 'mock-0')!.filtered).toBe('draining');
    for (let i = 0; i < 4; i++) {
      const res = await post(`${stack.url}/v1/chat/completions`, chat(`not to mock-0 ${i}`));
      expect(res.headers.get('x-kvrouter-worker')).not.toBe('mock-0');
      await res.arrayBuffer();
    }
    const undrained = await admin('/admin/workers/mock-0/drain', { method: 'POST', body: { draining: false } });
    expect(((await undrained.json()) as { draining: boolean }).draining).toBe(false);

    expect((await admin('/admin/workers/extra', { method: 'DELETE' })).status).toBe(200);
    expect((await admin('/admin/workers/extra', { method: 'DELETE' })).status).toBe(404);
    expect((await post(`${stack.url}/v1/chat/completions`, chat('gone'), { 'x-worker-id': 'extra' })).status).toBe(400);
  });

  it('reads and sets busy thresholds at runtime', async () => {
    const before = (await (await admin('/admin/busy-thresholds')).json()) as { models: Record<string, Record<string, unknown>> };
    expect(before.models[MODEL]).toEqual({ default: null, batch: { prefill_tokens: null, prefill_fraction: null, decode_fraction: 0.5, ttft_ms: null } });
    const set = await admin('/admin/busy-thresholds', { method: 'PUT', body: { policy_class: 'default', busy: { prefill_tokens: 4096 } } });
    expect(set.status).toBe(200);
    expect(stack.model.route.busyThresholds().default).toEqual({ prefillTokens: 4096 });
    const cleared = await admin('/admin/busy-thresholds', { method: 'PUT', body: { policy_class: 'batch', busy: null } });
    expect(((await cleared.json()) as { thresholds: Record<string, unknown> }).thresholds.batch).toBeNull();
    const unknown = await admin('/admin/busy-thresholds', { method: 'PUT', body: { policy_class: 'nope', busy: null } });
    expect(unknown.status).toBe(400);
    const badField = await admin('/admin/busy-thresholds', { method: 'PUT', body: { policy_class: 'default', busy: { decode_fraction: 2 } } });
    expect(((await badField.json()) as { error: { message: string } }).error.message).toBe('busy.decode_fraction: must be <= 1, got 2');
  });
});
