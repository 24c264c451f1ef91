// Every error status a client can get, with an OpenAI-style body: malformed
// requests (400), bodies over the limit (413), unknown models and routes
// (404), a full queue or an expired deadline (529, Retry-After), every worker
// busy or none available (503), a worker that does not answer in time (504).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, MODEL, post, settled, startStack, waitFor, type Stack } from './stack.js';

interface ErrorBody {
  error: { message: string; type: string; code: string; param?: string; policy_class?: string; stage?: string };
}

async function expectError(res: Response, status: number, code: string): Promise<ErrorBody['error']> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/application\/json/);
  const body = (await res.json()) as ErrorBody;
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.type).toBe('string');
  return body.error;
}

const busy = { prefill_tokens: 1 };
let stack: Stack;
let completions: string;
beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    edit: (doc) => {
      doc.limits = { max_body_bytes: 4096, headers_timeout_ms: 1500, max_retries: 0 };
      doc.policy_classes = [
        { name: 'default', busy, queue_limit: { requests: 1 } },
        { name: 'never-queue', busy, queue_limit: { requests: 0 } },
        { name: 'impatient', busy, slo_ms: 150 },
      ];
    },
  });
  completions = `${stack.url}/v1/chat/completions`;
});
afterAll(() => stack?.close());

describe('client errors', () => {
  it('400 for malformed JSON, a missing or malformed field, and a bad routing header', async () => {
    expect((await expectError(await post(completions, '{"model": "mock-model", "messages": ['), 400, 'KVR_ERR_INVALID_REQUEST')).message).toMatch(/not valid JSON/);
    expect((await expectError(await post(completions, { model: MODEL }), 400, 'KVR_ERR_INVALID_REQUEST')).param).toBe('messages');
    expect((await expectError(await post(completions, { messages: [{ role: 'user', content: 'x' }] }), 400, 'KVR_ERR_INVALID_REQUEST')).param).toBe('model');
    const role = await expectError(await post(completions, chat([{ role: '', content: 'x' }])), 400, 'KVR_ERR_INVALID_REQUEST');
    expect(role.message).toMatch(/messages\[0\]\.role/);
    expect((await expectError(await post(completions, chat('x', { stream: 'yes' })), 400, 'KVR_ERR_INVALID_REQUEST')).param).toBe('stream');
    expect((await expectError(await post(completions, chat('x'), { 'x-request-priority': 'high' }), 400, 'KVR_ERR_INVALID_REQUEST')).param).toBe('x-request-priority');
    const prompt = await expectError(await post(`${stack.url}/v1/completions`, { model: MODEL, prompt: [1, -2] }), 400, 'KVR_ERR_INVALID_REQUEST');
    expect(prompt.param).toBe('prompt[1]');
    await expectError(await post(completions, chat('x'), { 'x-worker-id': 'nobody' }), 400, 'KVR_ERR_UNKNOWN_WORKER');
  });

  it('413 for a body over the limit', async () => {
    await expectError(await post(completions, chat('x'.repeat(10_000))), 413, 'KVR_ERR_BODY_TOO_LARGE');
    expect(await metric(stack.url, 'kvrouter_rejections_total', { code: 'KVR_ERR_BODY_TOO_LARGE' })).toBe(1);
  });

  it('404 for an unknown model and an unknown route', async () => {
    const unknown = await expectError(await post(completions, chat('x', { model: 'gpt-17' })), 404, 'KVR_ERR_MODEL_NOT_FOUND');
    expect(unknown.message).toMatch(/gpt-17.*mock-model/);
    await expectError(await fetch(`${stack.url}/v2/nothing`), 404, 'KVR_ERR_ROUTE_NOT_FOUND');
  });
});

describe('overload', () => {
  it('queues while the worker is busy, then 529 with Retry-After past the queue limit or the deadline, 503 for a class that never queues; a queued client that leaves is dropped', async () => {
    // Holds the only worker in prefill (no first byte yet), so it is busy for every class.
    const holder = post(completions, chat('hold the worker'), { 'x-mock-header-delay-ms': '700' });
    await waitFor(() => stack.model.route.fleet.bookedRequests === 1, 'the holder to be booked');

    const leaving = new AbortController();
    const queued = post(completions, chat('wait in line'), {}, leaving.signal).catch((e: Error) => e);
    await waitFor(() => stack.model.route.scheduler.stats().queued.default!.requests === 1, 'the second request to queue');

    const full = await post(completions, chat('no room'));
    expect(full.headers.get('retry-after')).toBe('1');
    const fullError = await expectError(full, 529, 'KVR_ERR_QUEUE_FULL');
    expect(fullError.policy_class).toBe('default');

    const never = await post(completions, chat('never queue'), { 'x-policy-class': 'never-queue' });
    expect(never.headers.get('retry-after')).toBe('1');
    await expectError(never, 503, 'KVR_ERR_ALL_OVERLOADED');

    const late = await expectError(await post(completions, chat('impatient'), { 'x-policy-class': 'impatient' }), 529, 'KVR_ERR_DEADLINE_EXPIRED');
    expect(late.stage).toBe('dispatch');

    leaving.abort();
    expect(await queued).toBeInstanceOf(Error);
    await waitFor(() => stack.model.route.scheduler.stats().queued.default!.requests === 0, 'the queued request to leave');
    expect((await holder).status).toBe(200);
    await waitFor(() => settled(stack.model), 'every booking to be released');
  });

  it('503 when no worker is available (all draining)', async () => {
    stack.router.runtime.registry.setDraining('mock-0', true);
    try {
      await expectError(await post(completions, chat('anyone?')), 503, 'KVR_ERR_NO_WORKERS');
    } finally {
      stack.router.runtime.registry.setDraining('mock-0', false);
    }
    expect((await post(completions, chat('back again'))).status).toBe(200);
  });

  it('504 when the worker sends no headers in time, with the worker named', async () => {
    const res = await post(completions, chat('too slow'), { 'x-mock-header-delay-ms': '3000' });
    expect(res.headers.get('x-kvrouter-worker')).toBe('mock-0');
    await expectError(res, 504, 'KVR_ERR_UPSTREAM_TIMEOUT');
    expect(settled(stack.model)).toBe(true);
  });
});
