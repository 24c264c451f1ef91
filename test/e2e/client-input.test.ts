// Hostile and careless client input over real HTTP: bodies nested too deep to
// render, routing headers out of the core's range, garbage taints, and bytes
// Node's HTTP parser refuses. Each is a 4xx with an OpenAI-style body naming
// what is wrong, never a 500, and leaves no lane, booking or binding behind;
// /metrics shows the lanes so a leak would show.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metric, MODEL, post, settled, startStack, waitFor, type Stack } from './stack.js';

interface ErrorBody {
  error: { message: string; type: string; code: string; param?: string };
}

async function expectError(res: Response, status: number, code: string): Promise<ErrorBody['error']> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/application\/json/);
  const body = (await res.json()) as ErrorBody;
  expect(body.error).toMatchObject({ code, type: expect.any(String), message: expect.any(String) });
  return body.error;
}

const nested = (depth: number) => '{"a":'.repeat(depth) + '{}' + '}'.repeat(depth);

let stack: Stack;
let completions: string;
beforeAll(async () => {
  // The real tokenizer and chat template: deep tools reach JSON.stringify and the template engine.
  stack = await startStack({
    tokenizer: 'tiktoken:o200k_base',
    edit: (doc) => {
      doc.policy_classes = [{ name: 'default', busy: { prefill_tokens: 1 } }];
      doc.session_affinity = { ttl_ms: 60_000 };
    },
  });
  completions = `${stack.url}/v1/chat/completions`;
});
afterAll(() => stack?.close());

describe('bodies the JSON parser accepts but nothing can render', () => {
  it('tools[].function.parameters nested 5,000 deep is a 400 naming the field, on the chat route and on explain', async () => {
    const body = `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${nested(5000)}}}]}`;
    for (const url of [completions, `${stack.url}/router/explain`]) {
      const error = await expectError(await post(url, body), 400, 'KVR_ERR_INVALID_REQUEST');
      expect(error.param).toBe('tools[0].function.parameters.a.a…');
    }
  });

  it('tool_calls[].function.arguments nested 5,000 deep, as an object or as JSON text, is a 400 naming the field', async () => {
    const call = (args: string) =>
      `{"model":"${MODEL}","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":${args}}}]},{"role":"user","content":"x"}]}`;
    const asObject = await expectError(await post(completions, call(nested(5000))), 400, 'KVR_ERR_INVALID_REQUEST');
    expect(asObject.param).toBe('messages[0].tool_calls[0].function.arguments…');
    const asText = await expectError(await post(completions, call(JSON.stringify(nested(5000)))), 400, 'KVR_ERR_INVALID_REQUEST');
    expect(asText.param).toBe('messages[0].tool_calls[0].function.arguments');
  });

  it('the deepest body allowed is answered', async () => {
    // body 1 > tools 2 > tools[0] 3 > function 4 > parameters 5 > 59 objects more = 64
    const body = `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"f","parameters":${nested(59)}}}]}`;
    expect((await post(completions, body)).status).toBe(200);
  });
});

describe('routing headers are checked against what the core takes', () => {
  it('x-request-tier past 32 bits is a 400 naming the header, and 200 such requests leave no lane', async () => {
    for (let i = 0; i < 200; i++) {
      const error = await expectError(await post(completions, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, { 'x-request-tier': '99999999999', 'x-session-id': `tier-${i}` }), 400, 'KVR_ERR_INVALID_REQUEST');
      expect(error.param).toBe('x-request-tier');
    }
    expect(await metric(stack.url, 'kvrouter_queue_lanes', { model: MODEL })).toBe(0);
    expect(await metric(stack.url, 'kvrouter_requests_total', { code: '500' })).toBe(0);
    expect(settled(stack.model)).toBe(true);
  });

  it('garbage in x-required-taints is a 400 naming the header, not a 503', async () => {
    const error = await expectError(await post(completions, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, { 'x-required-taints': 'garbage' }), 400, 'KVR_ERR_INVALID_REQUEST');
    expect(error.param).toBe('x-required-taints');
    // A well-formed taint no worker carries is still "no worker".
    await expectError(await post(completions, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, { 'x-required-taints': 'zone=nowhere' }), 503, 'KVR_ERR_NO_WORKERS');
  });

  it('/metrics shows one lane per waiting session, back to none once they are served', async () => {
    const fleet = stack.model.route.fleet;
    // Load every worker past the class's busy threshold, as a peer's bookings would.
    const blockers = fleet.workerIds().map((id, i) => {
      const request = fleet.prepare({ id: `blocker-${i}`, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null }, [1, 2, 3, 4]);
      fleet.book(request, { id, rank: 0 }, 0);
      return request.id;
    });
    const waiting = [0, 1, 2].map((i) => post(completions, { model: MODEL, messages: [{ role: 'user', content: `session ${i}` }], max_tokens: 2 }, { 'x-session-id': `lane-${i}` }));
    await waitFor(async () => (await metric(stack.url, 'kvrouter_queue_depth', { model: MODEL })) === 3, 'three queued requests');
    expect(await metric(stack.url, 'kvrouter_queue_lanes', { model: MODEL, policy_class: 'default' })).toBe(3);
    for (const id of blockers) fleet.release(id);
    stack.model.route.scheduler.capacityChanged();
    for (const res of await Promise.all(waiting)) expect(res.status).toBe(200);
    await waitFor(() => settled(stack.model), 'the queue to drain');
    expect(await metric(stack.url, 'kvrouter_queue_lanes', { model: MODEL })).toBe(0);
    expect(await metric(stack.url, 'kvrouter_ledger_bookings', { model: MODEL })).toBe(0);
    expect(await metric(stack.url, 'kvrouter_session_bindings', { model: MODEL })).toBeGreaterThanOrEqual(3);
  });
});

/** Sends raw bytes on a fresh connection and returns everything the server wrote before closing it. */
function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.write(bytes, 'latin1');
  });
}

function parseResponse(raw: string): { status: number; headers: string; body: ErrorBody } {
  const split = raw.indexOf('\r\n\r\n');
  expect(split).toBeGreaterThan(0);
  const head = raw.slice(0, split);
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
  const body = JSON.parse(raw.slice(split + 4)) as ErrorBody;
  expect(Number(/content-length: (\d+)/i.exec(head)?.[1])).toBe(Buffer.byteLength(raw.slice(split + 4), 'latin1'));
  return { status, headers: head.toLowerCase(), body };
}

describe("what Node's HTTP parser refuses gets an OpenAI-style body too", () => {
  it('a 100 KB header is a 431', async () => {
    const { status, headers, body } = parseResponse(await rawExchange(stack.router.port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`));
    expect(status).toBe(431);
    expect(headers).toMatch(/content-type: application\/json/);
    expect(body.error).toMatchObject({ code: 'KVR_ERR_HEADERS_TOO_LARGE', type: 'invalid_request_error' });
  });

  it('a control character in a header is a 400', async () => {
    const { status, body } = parseResponse(await rawExchange(stack.router.port, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Session-Id: a\x01b\r\nContent-Length: 2\r\n\r\n{}`));
    expect(status).toBe(400);
    expect(body.error.code).toBe('KVR_ERR_INVALID_REQUEST');
    expect(body.error.message).toMatch(/malformed HTTP request/);
  });

  it('a malformed request line is a 400', async () => {
    for (const line of ['GARBAGE\r\n\r\n', 'GET /health HTTP/9.9\r\n\r\n', 'GET  HTTP/1.1\r\nHost: x\r\n\r\n']) {
      const { status, body } = parseResponse(await rawExchange(stack.router.port, line));
      expect(status, JSON.stringify(line)).toBe(400);
      expect(body.error.code).toBe('KVR_ERR_INVALID_REQUEST');
    }
  });

  it('counts them in kvrouter_rejections_total and keeps serving', async () => {
    expect(await metric(stack.url, 'kvrouter_rejections_total', { code: 'KVR_ERR_HEADERS_TOO_LARGE' })).toBeGreaterThanOrEqual(1);
    expect((await fetch(`${stack.url}/health`)).status).toBe(200);
  });
});
