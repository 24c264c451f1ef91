// Dead and failing workers leave rotation: a worker killed with SIGKILL (a
// real `kvrouter mock` process) is ejected after its threshold of connection
// failures and comes back through the health probe once it is restarted on
// its port; a worker answering 5xx is ejected, readmitted when healthy, and
// ejected again for twice as long; the last worker of a model is never
// ejected; /metrics, /router/explain and /ready show who is out and why.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliProcess } from '../server/cli-process.js';
import { startMockProcess } from './mock-process.js';
import { chat, metric, MODEL, post, settled, startStack, waitFor, type Stack } from './stack.js';

interface ReadyBody {
  ready: boolean;
  workers: {
    id: string;
    serving: boolean;
    ejected: { reason: string; consecutive_failures: number; ejections_in_a_row: number; backoff_ms: number } | null;
    consecutive_connect_failures: number;
    consecutive_5xx: number;
  }[];
}

async function readiness(url: string): Promise<{ status: number; body: ReadyBody }> {
  const res = await fetch(`${url}/ready`);
  return { status: res.status, body: (await res.json()) as ReadyBody };
}

const workerState = async (url: string, id: string) => (await readiness(url)).body.workers.find((w) => w.id === id)!;

describe('a worker killed with SIGKILL', () => {
  let stack: Stack;
  let mock: { process: CliProcess; url: string };
  let port: number;

  beforeAll(async () => {
    mock = await startMockProcess(0);
    port = Number(new URL(mock.url).port);
    stack = await startStack({
      edit: (doc) => {
        (doc.workers as unknown[]).push({ id: 'victim', url: mock.url, model: MODEL });
        doc.limits = { max_retries: 0 };
        doc.outlier_ejection = { consecutive_connect_failures: 3, probe_interval_ms: 50 };
      },
    });
  });
  afterAll(async () => {
    mock?.process.child.kill('SIGKILL');
    await stack?.close();
  });

  it('takes no more requests after its threshold of connection failures, even with max_retries 0', async () => {
    const res = await post(`${stack.url}/v1/chat/completions`, chat('before the kill'), { 'x-worker-id': 'victim' });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    mock.process.child.kill('SIGKILL');
    await mock.process.exited;

    // Every request without retries that lands on the dead worker fails; after the third it gets none.
    const outcomes: { status: number; worker: string | null }[] = [];
    await waitFor(
      async () => {
        const r = await post(`${stack.url}/v1/chat/completions`, chat(`after the kill ${outcomes.length}`));
        outcomes.push({ status: r.status, worker: r.headers.get('x-kvrouter-worker') });
        await r.arrayBuffer();
        return (await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'victim' })) === 1;
      },
      'the dead worker to be ejected',
      10_000,
    );
    const failed = outcomes.filter((o) => o.status !== 200);
    expect(failed).toHaveLength(3);
    expect(failed.every((o) => o.status === 502 && o.worker === 'victim')).toBe(true);

    const after: (string | null)[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await post(`${stack.url}/v1/chat/completions`, chat(`while it is out ${i}`));
      expect(r.status).toBe(200);
      after.push(r.headers.get('x-kvrouter-worker'));
      await r.arrayBuffer();
    }
    expect(after).not.toContain('victim');
    expect(await metric(stack.url, 'kvrouter_worker_ejections_total', { worker: 'victim', reason: 'connect_failure' })).toBe(1);
    expect(await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'victim', reason: 'connect_failure' })).toBe(1);
    expect(settled(stack.model)).toBe(true);
  });

  it('shows in explain as filtered with the reason, and in /ready as not serving while the router stays ready', async () => {
    const x = (await (await post(`${stack.url}/router/explain`, chat('who is out?'))).json()) as {
      workers: { worker: string; eligible: boolean; filtered: string | null; ejection: { reason: string } | null }[];
    };
    const victim = x.workers.find((w) => w.worker === 'victim')!;
    expect(victim.eligible).toBe(false);
    expect(victim.filtered).toBe('ejected: 3 consecutive connection failures');
    expect(victim.ejection?.reason).toBe('connect_failure');
    expect(x.workers.find((w) => w.worker === 'mock-0')!.ejection).toBeNull();

    const { status, body } = await readiness(stack.url);
    expect(status).toBe(200);
    const state = body.workers.find((w) => w.id === 'victim')!;
    expect(state.serving).toBe(false);
    expect(state.ejected).toMatchObject({ reason: 'connect_failure', consecutive_failures: 3, ejections_in_a_row: 1 });
  });

  it('is readmitted by the health probe once restarted on its port, with no request sent to it meanwhile', async () => {
    const probesBefore = await metric(stack.url, 'kvrouter_worker_health_probes_total', { worker: 'victim', result: 'healthy' });
    expect(probesBefore).toBe(0);
    mock = await startMockProcess(port);
    await waitFor(async () => (await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'victim' })) === 0, 'the probe to readmit the worker', 15_000);
    expect(await metric(stack.url, 'kvrouter_worker_health_probes_total', { worker: 'victim', result: 'healthy' })).toBe(1);
    expect((await workerState(stack.url, 'victim')).serving).toBe(true);
    const res = await post(`${stack.url}/v1/chat/completions`, chat('back again'), { 'x-worker-id': 'victim' });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });
});

/** A worker whose answers the test switches between healthy and 503 (GET /health included). */
class SwitchableWorker {
  healthy = true;
  completions = 0;
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      req.resume();
      if (req.url !== '/health') this.completions++;
      if (!this.healthy) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'engine is restarting', type: 'server_error' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/health' ? {} : { id: 'x', object: 'chat.completion', choices: [] }));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server) return resolve();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

describe('a worker answering 5xx', () => {
  let stack: Stack;
  const flaky = new SwitchableWorker();
  const solo = new SwitchableWorker();

  beforeAll(async () => {
    const flakyUrl = await flaky.start();
    const soloUrl = await solo.start();
    stack = await startStack({
      edit: (doc) => {
        (doc.models as unknown[]).push({ name: 'solo-model', tokenizer: 'bytes' });
        (doc.workers as unknown[]).push({ id: 'flaky', url: flakyUrl, model: MODEL }, { id: 'solo', url: soloUrl, model: 'solo-model' });
        doc.limits = { max_retries: 0 };
        doc.outlier_ejection = { consecutive_5xx: 4, base_ejection_ms: 300, max_ejection_ms: 10_000, probe_interval_ms: 50 };
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
    await flaky.close();
    await solo.close();
  });

  const toFlaky = () => post(`${stack.url}/v1/chat/completions`, chat('to flaky'), { 'x-worker-id': 'flaky' });

  it('is ejected after its threshold of consecutive 5xx, probed while unhealthy, and readmitted once healthy', async () => {
    flaky.healthy = false;
    for (let i = 0; i < 4; i++) {
      const res = await toFlaky();
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { code: string; upstream_status: number } }).error).toMatchObject({ code: 'KVR_ERR_UPSTREAM', upstream_status: 503 });
    }
    const state = await workerState(stack.url, 'flaky');
    expect(state.ejected).toMatchObject({ reason: '5xx', consecutive_failures: 4, ejections_in_a_row: 1, backoff_ms: 300 });
    // Out of selection: a request pinned to it is refused by the router, and the worker never sees it.
    const seen = flaky.completions;
    const pinned = await toFlaky();
    expect(pinned.status).toBe(503);
    expect(((await pinned.json()) as { error: { code: string } }).error.code).toBe('KVR_ERR_NO_WORKERS');
    expect(flaky.completions).toBe(seen);
    // Unhealthy probes keep it out.
    await waitFor(async () => (await metric(stack.url, 'kvrouter_worker_health_probes_total', { worker: 'flaky', result: 'unhealthy' })) >= 2, 'failed probes');
    expect((await workerState(stack.url, 'flaky')).serving).toBe(false);
    flaky.healthy = true;
    await waitFor(async () => (await workerState(stack.url, 'flaky')).serving, 'the probe to readmit the worker');
    const res = await toFlaky();
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it('stays out twice as long when ejected again soon after it came back', async () => {
    flaky.healthy = false;
    for (let i = 0; i < 4; i++) expect((await toFlaky()).status).toBe(502);
    expect((await workerState(stack.url, 'flaky')).ejected).toMatchObject({ reason: '5xx', ejections_in_a_row: 2, backoff_ms: 600 });
    expect(await metric(stack.url, 'kvrouter_worker_ejections_total', { worker: 'flaky', reason: '5xx' })).toBe(2);
    flaky.healthy = true;
    await waitFor(async () => (await workerState(stack.url, 'flaky')).serving, 'the probe to readmit the worker');
  });

  it('never ejects the last worker of a model: the client keeps getting the worker error, and the hold is counted', async () => {
    solo.healthy = false;
    for (let i = 0; i < 6; i++) {
      const res = await post(`${stack.url}/v1/chat/completions`, { ...chat('to solo'), model: 'solo-model' });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { upstream_status: number } }).error.upstream_status).toBe(503);
    }
    expect(solo.completions).toBe(6);
    expect(await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'solo' })).toBe(0);
    // The 4th, 5th and 6th failures each crossed the threshold.
    expect(await metric(stack.url, 'kvrouter_worker_ejections_held_total', { worker: 'solo', reason: '5xx' })).toBe(3);
    const { status, body } = await readiness(stack.url);
    expect(status).toBe(200);
    expect(body.workers.find((w) => w.id === 'solo')).toMatchObject({ serving: true, consecutive_5xx: 6, ejected: null });
    solo.healthy = true;
  });
});

describe('a worker that cuts its streams mid-way', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({
      edit: (doc) => {
        doc.limits = { max_retries: 0 };
        // A long backoff: the healthy probe must not readmit it before the test looks.
        doc.outlier_ejection = { consecutive_connect_failures: 3, base_ejection_ms: 600_000, max_ejection_ms: 600_000 };
      },
    });
  });
  afterAll(() => stack?.close());

  // The mocker closes the socket after two chunks: the client has its 200 and headers already.
  const cut = async (i: number, worker = 'mock-0') => {
    const res = await post(`${stack.url}/v1/chat/completions`, chat(`cut ${i}`, { stream: true, max_tokens: 8 }), { 'x-mock-disconnect-after': '2', 'x-worker-id': worker });
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/KVR_ERR_UPSTREAM_INTERRUPTED/);
  };

  it('counts each cut toward its consecutive failures and is ejected at the threshold', async () => {
    await cut(0);
    await cut(1);
    expect(await workerState(stack.url, 'mock-0')).toMatchObject({ serving: true, ejected: null });
    expect(await workerState(stack.url, 'mock-0')).toMatchObject({ consecutive_connect_failures: 2 });
    await cut(2);
    expect((await workerState(stack.url, 'mock-0')).ejected).toMatchObject({ reason: 'connect_failure', consecutive_failures: 3 });
    expect(await metric(stack.url, 'kvrouter_worker_ejections_total', { worker: 'mock-0', reason: 'connect_failure' })).toBe(1);
  });

  it('a stream that ends whole ends the streak', async () => {
    await cut(3, 'mock-1');
    await cut(4, 'mock-1');
    expect(await workerState(stack.url, 'mock-1')).toMatchObject({ consecutive_connect_failures: 2 });
    const whole = await post(`${stack.url}/v1/chat/completions`, chat('whole', { stream: true, max_tokens: 4 }), { 'x-worker-id': 'mock-1' });
    expect(whole.status).toBe(200);
    expect(await whole.text()).toMatch(/\[DONE\]/);
    expect(await workerState(stack.url, 'mock-1')).toMatchObject({ serving: true, consecutive_connect_failures: 0, ejected: null });
  });
});
