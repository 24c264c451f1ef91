// GET /ready over real HTTP: one worker's lost KV-event feed leaves the router
// ready (the worker still serves, without cache awareness), the body shows
// each worker's state, and the router is unready only when some model has no
// worker that serves it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, MODEL, post, startStack, waitFor, type Stack } from './stack.js';

interface ReadyBody {
  ready: boolean;
  waiting_for_kv_events: string[];
  models_without_workers: string[];
  workers: { id: string; model: string; serving: boolean; draining: boolean; ejected: unknown; kv_events: { source: string; connected: boolean | null } }[];
}

const TOKEN = 'admin-secret-token';

describe('/ready', () => {
  let stack: Stack;
  const ready = async () => {
    const res = await fetch(`${stack.url}/ready`);
    return { status: res.status, body: (await res.json()) as ReadyBody };
  };
  const drain = (id: string, draining: boolean) =>
    post(`${stack.url}/admin/workers/${id}/drain`, { draining }, { authorization: `Bearer ${TOKEN}` }).then((r) => expect(r.status).toBe(200));

  beforeAll(async () => {
    stack = await startStack({ workers: 2, edit: (doc) => void (doc.admin_token = TOKEN) });
    await waitFor(async () => (await ready()).status === 200, 'both KV-event feeds at start', 10_000);
  });
  afterAll(() => stack?.close());

  it("stays ready when one worker's KV-event feed is lost, and reports that feed in the body", async () => {
    await stack.embedded.publishers[1]!.close();
    await waitFor(async () => (await metric(stack.url, 'kvrouter_kv_source_connected', { worker: 'mock-1' })) === 0, "mock-1's feed to drop");
    const { status, body } = await ready();
    expect(status).toBe(200);
    expect(body.ready).toBe(true);
    expect(body.waiting_for_kv_events).toEqual(['mock-1']);
    expect(body.workers).toEqual([
      { id: 'mock-0', model: MODEL, serving: true, draining: false, ejected: null, consecutive_connect_failures: 0, consecutive_5xx: 0, in_flight: 0, quiet_ms: 0, kv_events: { source: 'zmq', connected: true } },
      { id: 'mock-1', model: MODEL, serving: true, draining: false, ejected: null, consecutive_connect_failures: 0, consecutive_5xx: 0, in_flight: 0, quiet_ms: 0, kv_events: { source: 'zmq', connected: false } },
    ]);
    // The worker without its feed still serves.
    const res = await post(`${stack.url}/v1/chat/completions`, chat('no feed'), { 'x-worker-id': 'mock-1' });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it('is unready while a model has no worker that serves it, and ready again when one does', async () => {
    await drain('mock-0', true);
    expect((await ready()).status).toBe(200);
    await drain('mock-1', true);
    const { status, body } = await ready();
    expect(status).toBe(503);
    expect(body.models_without_workers).toEqual([MODEL]);
    expect(body.workers.map((w) => [w.id, w.serving, w.draining])).toEqual([
      ['mock-0', false, true],
      ['mock-1', false, true],
    ]);
    // The worker whose feed is lost is enough to be ready again.
    await drain('mock-1', false);
    expect((await ready()).status).toBe(200);
    await drain('mock-0', false);
  });
});
