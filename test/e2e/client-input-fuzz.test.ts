// Any body the JSON parser accepts, and any routing header a client can send,
// gets a 200 or a 4xx with an OpenAI-style error body from a real router over
// HTTP (real tokenizer and chat template, real mock workers): never a 5xx,
// never a crash, and nothing left queued or booked afterwards.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metric, MODEL, settled, startStack, waitFor, type Stack } from './stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    tokenizer: 'tiktoken:o200k_base',
    edit: (doc) => {
      doc.session_affinity = { ttl_ms: 60_000 };
      for (const w of doc.workers as { taints?: string[] }[]) w.taints = ['zone=a', 'a=b', 'c=d'];
    },
  });
});
afterAll(() => stack?.close());

const ROUTES = ['/v1/chat/completions', '/v1/completions', '/router/explain'] as const;

/** JSON text placed verbatim (numbers JSON.stringify cannot write, nesting deeper than it can walk). */
class Raw {
  constructor(readonly text: string) {}
}

function toJson(value: unknown): string {
  if (value instanceof Raw) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}:${toJson(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Mostly the valid shape, sometimes anything. */
const mostly = <T, U>(valid: fc.Arbitrary<T>, other: fc.Arbitrary<U>) => fc.oneof({ weight: 5, arbitrary: valid }, { weight: 1, arbitrary: other });
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 2 });

// Every UTF-16 unit, lone surrogates included, with the awkward ones often.
const oddChar = fc.oneof(
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom('\u0000', '\ud800', '\udfff', '\ufeff', '\u202e', '<|im_start|>', '<|endoftext|>', '{{', '{%', '\\', '"', '\n'),
);
const oddString = fc.oneof(fc.string({ unit: oddChar, minLength: 1, maxLength: 40 }), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }), fc.constant(''));
const hugeNumber = fc.constantFrom('1e400', '-1e400', '1e-400', '-0', '123456789012345678901234567890', '1.7976931348623157e308', '4294967296', '-1', '0.5').map((t) => new Raw(t));
const anyValue = fc.oneof(fc.jsonValue({ maxDepth: 3 }), oddString, hugeNumber);
// Nesting around the limit and far past it (JSON.stringify and the template engine recurse).
const depth = fc.oneof(fc.constantFrom(58, 59, 60, 61, 64, 65, 2000, 5000, 20_000), fc.integer({ min: 1, max: 5000 }));
const deep = fc
  .tuple(depth, fc.constantFrom(['[', ']'], ['{"a":', '}']))
  .map(([depth, [open, close]]) => new Raw(open!.repeat(depth) + (open === '[' ? '1' : '{}') + close!.repeat(depth)));

const toolCall = fc.record({
  id: maybe(mostly(oddString, anyValue)),
  type: maybe(mostly(fc.constant('function'), anyValue)),
  function: mostly(fc.record({ name: mostly(oddString, anyValue), arguments: maybe(fc.oneof(deep, oddString, anyValue, deep.map((r) => r.text))) }), anyValue),
});
const part = mostly(fc.record({ type: mostly(fc.constant('text'), fc.constantFrom('image_url', 'input_audio')), text: mostly(oddString, anyValue) }), anyValue);
const message = mostly(
  fc.record({
    role: mostly(fc.constantFrom('system', 'user', 'assistant', 'tool', 'developer'), fc.oneof(fc.constant(''), anyValue)),
    content: mostly(fc.oneof(oddString, fc.array(part, { minLength: 1, maxLength: 3 })), fc.oneof(anyValue, deep)),
    name: maybe(mostly(oddString, anyValue)),
    tool_calls: maybe(mostly(fc.array(toolCall, { maxLength: 2 }), anyValue)),
    tool_call_id: maybe(mostly(oddString, anyValue)),
    reasoning_content: maybe(mostly(oddString, anyValue)),
  }),
  anyValue,
);
const tool = mostly(fc.record({ type: mostly(fc.constant('function'), anyValue), function: mostly(fc.record({ name: mostly(oddString, anyValue), parameters: maybe(fc.oneof(deep, anyValue)) }), anyValue) }), anyValue);
// A valid max_tokens stays small: a mock worker would otherwise generate for ever.
const maxTokens = mostly(fc.integer({ min: 1, max: 3 }), fc.oneof(fc.constantFrom(0, -1, 1.5, '2', true), fc.constantFrom('1e400', '-1e400', '-0', '0.5').map((t) => new Raw(t))));
const common = {
  model: mostly(fc.constant(MODEL), anyValue),
  stream: maybe(mostly(fc.boolean(), anyValue)),
  max_tokens: maxTokens,
  temperature: maybe(fc.oneof(fc.double(), hugeNumber, anyValue)),
  seed: maybe(fc.oneof(fc.integer(), hugeNumber)),
  user: maybe(fc.oneof(oddString, anyValue)),
  stream_options: maybe(mostly(fc.record({ include_usage: mostly(fc.boolean(), anyValue) }), anyValue)),
};
const chatBody = fc.record({
  ...common,
  messages: mostly(fc.array(message, { minLength: 1, maxLength: 4 }), anyValue),
  tools: maybe(mostly(fc.array(tool, { maxLength: 2 }), anyValue)),
  add_generation_prompt: maybe(mostly(fc.boolean(), anyValue)),
});
const completionBody = fc.record({
  ...common,
  prompt: mostly(
    fc.oneof(oddString, fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 1, maxLength: 40 }), fc.array(fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 1 })),
    fc.oneof(fc.array(fc.oneof(fc.integer(), fc.double(), hugeNumber, anyValue), { maxLength: 20 }), anyValue, deep),
  ),
});

const anyRoute = fc.constantFrom(...ROUTES);
const chatRoute = fc.constantFrom('/v1/chat/completions', '/v1/chat/completions', '/router/explain');
const completionRoute = fc.constantFrom('/v1/completions', '/v1/completions', '/router/explain');
/** A route and a body for it: random JSON anywhere, near-valid bodies mostly where they belong. */
const request = fc.oneof(
  fc.tuple(anyRoute, fc.json({ maxDepth: 4 })),
  fc.tuple(anyRoute, fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v))),
  { weight: 3, arbitrary: fc.tuple(mostly(chatRoute, anyRoute), chatBody.map(toJson)) },
  { weight: 3, arbitrary: fc.tuple(mostly(completionRoute, anyRoute), completionBody.map(toJson)) },
  // Near-valid with one field swapped for JSON text of any kind.
  fc.tuple(chatRoute, fc.tuple(chatBody, fc.constantFrom('messages', 'tools', 'model', 'stream'), fc.json({ maxDepth: 3 })).map(([b, key, text]) => toJson({ ...b, [key]: new Raw(text) }))),
);

// Header values fetch can send: visible ASCII and spaces; each header mostly well-formed.
const headerText = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 300 }),
  fc.constantFrom('', ' ', '0', '-1', '2147483648', '99999999999', '-99999999999', '1e12', '1e13', '1e308', '-1e308', 'NaN', 'Infinity', '0x10', 'a=b:1e9', 'a=b:1e308,a=b:1e308', 'w#70000', 'mock-0#1', 'x'.repeat(257)),
);
const header = (valid: fc.Arbitrary<string>) => fc.oneof({ weight: 3, arbitrary: valid }, { weight: 1, arbitrary: headerText });
const headers = fc.record(
  {
    'x-session-id': header(fc.string({ unit: fc.constantFrom('a', 'b', '-', '7'), minLength: 1, maxLength: 8 })),
    'x-session-final': header(fc.constantFrom('true', 'false')),
    'x-policy-class': header(fc.constantFrom('default', 'batch', 'nope')),
    'x-request-priority': header(fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.double({ min: -1e12, max: 1e12, noNaN: true })).map(String)),
    'x-request-tier': header(fc.integer({ min: -(2 ** 31) + 1, max: 2 ** 31 - 1 }).map(String)),
    'x-worker-id': header(fc.constantFrom('mock-0', 'mock-1', 'mock-1#0', 'mock-0#1', 'nobody')),
    'x-required-taints': header(fc.constantFrom('zone=a', 'a=b,c=d', '')),
    'x-preferred-taints': header(fc.constantFrom('zone=a:2', 'a=b', 'a=b:0,c=d:1000000')),
  },
  { requiredKeys: [] },
);

/** Answers seen, by route and status: the generators must reach the workers, not only the validators. */
const seen = new Map<string, number>();

async function expectNot5xx(route: string, text: string, sent: Record<string, string>): Promise<void> {
  const res = await fetch(`${stack.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', ...sent }, body: text });
  const answer = await res.text();
  const context = `${res.status} for POST ${route} ${JSON.stringify(sent)} ${text.slice(0, 300)}: ${answer.slice(0, 300)}`;
  seen.set(`${route} ${res.status}`, (seen.get(`${route} ${res.status}`) ?? 0) + 1);
  // A well-formed x-required-taints no worker matches (with the pin, say) is the fleet's answer, not the request's fault.
  const noWorkerForTaints = res.status === 503 && sent['x-required-taints'] !== undefined && answer.includes('"KVR_ERR_NO_WORKERS"');
  expect(res.status < 500 || noWorkerForTaints, context).toBe(true);
  if (res.status >= 400) {
    expect(res.headers.get('content-type'), context).toMatch(/application\/json/);
    const error = (JSON.parse(answer) as { error?: { message?: unknown; type?: unknown; code?: unknown } }).error;
    expect(typeof error?.message, context).toBe('string');
    expect(typeof error?.type, context).toBe('string');
    expect(typeof error?.code === 'string' || error?.code === null, context).toBe(true);
  }
}

describe('random client input over HTTP', () => {
  it('random JSON bodies and near-valid requests are a 200 or an OpenAI-style 4xx, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(request, async ([route, text]) => expectNot5xx(route, text, {})),
      { numRuns: 600 },
    );
  });

  it('random routing headers on a valid request are a 200 or an OpenAI-style 4xx, never a 5xx', async () => {
    const chat = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 });
    const completion = JSON.stringify({ model: MODEL, prompt: 'hi', max_tokens: 2 });
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ROUTES), headers, async (route, sent) => expectNot5xx(route, route === '/v1/completions' ? completion : chat, sent)),
      { numRuns: 300 },
    );
  });

  it('reached the workers on every route, and left nothing queued, booked or in a lane, with no 500', async () => {
    for (const route of ROUTES) expect(seen.get(`${route} 200`) ?? 0, `200s on ${route}: ${JSON.stringify([...seen])}`).toBeGreaterThan(10);
    await waitFor(() => settled(stack.model), 'every request to settle', 30_000);
    expect(await metric(stack.url, 'kvrouter_queue_lanes', { model: MODEL })).toBe(0);
    expect(await metric(stack.url, 'kvrouter_requests_total', { code: '500' })).toBe(0);
    expect(await metric(stack.url, 'kvrouter_rejections_total', { code: 'KVR_ERR_INTERNAL' })).toBe(0);
  });
});
