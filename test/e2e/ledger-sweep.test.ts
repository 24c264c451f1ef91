// The ledger sweep reclaims only bookings whose request is gone: a stream that
// runs longer than limits.ledger_sweep_age_ms keeps its load in the ledger
// until it ends. The worker is a real HTTP server the test holds open, the
// sweep age is configured small, and the test waits on the sweep's own
// report (kvrouter_ledger_long_running) rather than on time.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRouter } from '../../server/server.js';
import { startBareRouter } from './bare-router.js';
import { metric, waitFor } from './stack.js';

const MODEL = 'slow-model';
let worker: Server;
const held: ServerResponse[] = [];
let router: RunningRouter;

beforeAll(async () => {
  // Answers every generation with one SSE event, then holds the stream open until the test ends it.
  worker = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n');
      held.push(res);
    });
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  const port = (worker.address() as { port: number }).port;
  router = await startBareRouter({
    limits: { ledger_sweep_age_ms: 50, ledger_sweep_interval_ms: 10 },
    workers: [{ id: 'slow', url: `http://127.0.0.1:${port}`, model: MODEL }],
  });
});

afterAll(async () => {
  for (const res of held) res.destroy();
  await router?.close();
  await new Promise((resolve) => worker?.close(resolve));
});

describe('the ledger sweep and long streams', () => {
  it('a stream that outlives the sweep age keeps its booking until it ends', async () => {
    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'a long generation' }], stream: true }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toMatch(/"first"/);
    expect(await metric(router.url, 'kvrouter_ledger_bookings', { model: MODEL })).toBe(1);

    // Either the sweep keeps the booking past the age (and says so), or it reclaims it.
    await waitFor(
      async () => (await metric(router.url, 'kvrouter_ledger_long_running', { model: MODEL })) === 1 || (await metric(router.url, 'kvrouter_ledger_reclaimed_total', { model: MODEL })) > 0,
      'a sweep past the age of the booking',
    );
    expect(await metric(router.url, 'kvrouter_ledger_reclaimed_total', { model: MODEL })).toBe(0);
    expect(await metric(router.url, 'kvrouter_ledger_long_running', { model: MODEL })).toBe(1);
    expect(await metric(router.url, 'kvrouter_ledger_bookings', { model: MODEL })).toBe(1);
    expect(await metric(router.url, 'kvrouter_worker_load', { worker: 'slow', kind: 'active_requests' })).toBe(1);

    held.shift()!.end('data: [DONE]\n\n');
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
    expect(rest).toMatch(/\[DONE\]/);
    await waitFor(async () => (await metric(router.url, 'kvrouter_ledger_bookings', { model: MODEL })) === 0, 'the booking to be released');
    expect(await metric(router.url, 'kvrouter_worker_load', { worker: 'slow', kind: 'active_requests' })).toBe(0);
    expect(await metric(router.url, 'kvrouter_ledger_reclaimed_total', { model: MODEL })).toBe(0);
  });
});
