// Stalled workers leave rotation: a real `kvrouter mock` process stopped with
// SIGSTOP still accepts connections but answers nothing. Once requests have
// waited on it for stall_ms with no sign of life and its health probe goes
// unanswered, it is ejected (reason stall); the request that had sent nothing
// to its client is placed on the other worker and succeeds, the stream that
// was relaying ends with an error event, and the ledger settles. After
// SIGCONT the detector's probe readmits it. A worker that is merely slow (it
// holds a long answer but answers its health probe) is left alone.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliProcess } from '../server/cli-process.js';
import { startMockProcess } from './mock-process.js';
import { chat, metric, post, settled, startStack, waitFor, type Stack } from './stack.js';

const ADMIN = 'stall-test-admin-token';

interface AdminWorker {
  id: string;
  in_flight: number;
  quiet_ms: number;
  ejected: { reason: string; stalled?: { quiet_ms: number; requests_waiting: number } } | null;
}

async function adminWorker(url: string, id: string): Promise<AdminWorker> {
  const res = await fetch(`${url}/admin/workers`, { headers: { authorization: `Bearer ${ADMIN}` } });
  return ((await res.json()) as { workers: AdminWorker[] }).workers.find((w) => w.id === id)!;
}

async function drain(url: string, id: string, draining: boolean): Promise<void> {
  const res = await fetch(`${url}/admin/workers/${id}/drain`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ draining }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

describe('a worker process stopped with SIGSTOP', () => {
  let stack: Stack;
  let mock: { process: CliProcess; url: string };

  beforeAll(async () => {
    // A real-time engine: a long stream is still running when the process is stopped.
    mock = await startMockProcess(0, ['--engine-speedup', '1']);
    stack = await startStack({
      workers: 1,
      edit: (doc) => {
        (doc.workers as unknown[]).push({ id: 'victim', url: mock.url, model: (doc.workers as { model: string }[])[0]!.model });
        doc.admin_token = ADMIN;
        doc.outlier_ejection = { stall_ms: 400, stall_probe_timeout_ms: 300, base_ejection_ms: 200, probe_interval_ms: 50 };
      },
    });
  });
  afterAll(async () => {
    mock?.process.child.kill('SIGKILL');
    await stack?.close();
  });

  it('is ejected as stalled: the waiting request is placed on the other worker, the relaying stream ends with an error event, the ledger settles', async () => {
    // With mock-0 draining, every request goes to the victim.
    await drain(stack.url, 'mock-0', true);
    const stream = await post(`${stack.url}/v1/chat/completions`, chat('a long stream', { stream: true, max_tokens: 4000 }));
    expect(stream.status).toBe(200);
    expect(stream.headers.get('x-kvrouter-worker')).toBe('victim');
    const reader = stream.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    expect(text).toMatch(/^data: /);

    mock.process.child.kill('SIGSTOP');
    const waiting = post(`${stack.url}/v1/chat/completions`, chat('sent while it is stopped'));
    await waitFor(async () => (await adminWorker(stack.url, 'victim')).in_flight === 2, 'both requests in flight on the stopped worker');
    // Alone in rotation it could not be ejected (never a model's last worker); with mock-0 back it can.
    await drain(stack.url, 'mock-0', false);

    const moved = await waiting;
    expect(moved.status).toBe(200);
    expect(moved.headers.get('x-kvrouter-worker')).toBe('mock-0');
    expect(((await moved.json()) as { object: string }).object).toBe('chat.completion');

    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
    const last = text.trim().split('\n\n').pop()!;
    const error = (JSON.parse(last.slice('data: '.length)) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('KVR_ERR_UPSTREAM_INTERRUPTED');
    expect(error.message).toMatch(/^worker victim failed mid-response: stalled: no response progress for \d+ ms and no answer to its health probe/);

    const victim = await adminWorker(stack.url, 'victim');
    expect(victim.ejected?.reason).toBe('stall');
    expect(victim.ejected?.stalled?.requests_waiting).toBe(2);
    expect(victim.ejected!.stalled!.quiet_ms).toBeGreaterThanOrEqual(400);
    expect(victim.in_flight).toBe(0);
    expect(await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'victim', reason: 'stall' })).toBe(1);
    expect(await metric(stack.url, 'kvrouter_worker_ejections_total', { worker: 'victim', reason: 'stall' })).toBe(1);
    expect(await metric(stack.url, 'kvrouter_worker_stall_aborts_total', { worker: 'victim' })).toBe(2);
    expect(await metric(stack.url, 'kvrouter_worker_stall_probes_total', { worker: 'victim', result: 'unhealthy' })).toBeGreaterThanOrEqual(1);
    expect(await metric(stack.url, 'kvrouter_upstream_retries_total', { worker: 'victim' })).toBe(1);
    await waitFor(() => settled(stack.model), 'the ledger to settle');

    const x = (await (await post(`${stack.url}/router/explain`, chat('who is out?'))).json()) as { workers: { worker: string; filtered: string | null }[] };
    expect(x.workers.find((w) => w.worker === 'victim')!.filtered).toMatch(/^ejected: stalled \(no response progress for \d+ ms, no answer to a health probe\)$/);
  });

  it('takes no request while stopped, and is readmitted by the probe after SIGCONT', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await post(`${stack.url}/v1/chat/completions`, chat(`while stopped ${i}`));
      expect(res.status).toBe(200);
      expect(res.headers.get('x-kvrouter-worker')).toBe('mock-0');
      await res.arrayBuffer();
    }
    expect(await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'victim' })).toBe(1);
    mock.process.child.kill('SIGCONT');
    await waitFor(async () => (await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'victim' })) === 0, 'the probe to readmit the worker');
    const res = await post(`${stack.url}/v1/chat/completions`, chat('back again'), { 'x-worker-id': 'victim' });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await waitFor(() => settled(stack.model), 'the ledger to settle');
  });
});

/** A worker that holds completions until released, and answers its health endpoint meanwhile. */
class SlowWorker {
  private held: ServerResponse[] = [];
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      req.resume();
      if (req.url === '/health') return void res.end('{}');
      this.held.push(res);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  release(): void {
    for (const res of this.held.splice(0)) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'slow', object: 'chat.completion', choices: [] }));
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server) return resolve();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

describe('a worker that is slow but answers its health probe', () => {
  let stack: Stack;
  const slow = new SlowWorker();

  beforeAll(async () => {
    const url = await slow.start();
    stack = await startStack({
      edit: (doc) => {
        (doc.workers as unknown[]).push({ id: 'slow', url, model: (doc.workers as { model: string }[])[0]!.model });
        // A generous probe timeout: only a worker that does not answer at all may be taken for stalled.
        doc.outlier_ejection = { stall_ms: 200, stall_probe_timeout_ms: 10_000 };
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
    await slow.close();
  });

  it('stays in rotation through its quiet periods, and the held request completes', async () => {
    const pending = post(`${stack.url}/v1/chat/completions`, chat('a long non-streaming answer'), { 'x-worker-id': 'slow' });
    await waitFor(async () => (await metric(stack.url, 'kvrouter_worker_stall_probes_total', { worker: 'slow', result: 'healthy' })) >= 2, 'two healthy stall probes');
    expect(await metric(stack.url, 'kvrouter_worker_ejected', { worker: 'slow' })).toBe(0);
    slow.release();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { id: string }).id).toBe('slow');
    expect(await metric(stack.url, 'kvrouter_worker_stall_probes_total', { worker: 'slow', result: 'unhealthy' })).toBe(0);
    await waitFor(() => settled(stack.model), 'the ledger to settle');
  });
});
