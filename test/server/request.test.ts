// What a request says about its routing: headers to fields, and the prompt
// token ids (whole conversation, text, or ids as given), with errors naming
// the header or field at fault.
import { beforeAll, describe, expect, it } from 'vitest';
import { RouterError } from '../../router/errors.js';
import { createTokenizer, type PromptTokenizer } from '../../router/tokenize/index.js';
import { modelOf, parseJsonBody, parseWorkerLabel, requestFields, streamOf } from '../../server/request/fields.js';
import { promptTokens } from '../../server/request/prompt.js';

/** The param a rejected prompt names (or the message when it names none). */
async function rejectedParam(pending: Promise<unknown>): Promise<string | undefined> {
  const error: unknown = await pending.then(
    () => new Error('accepted'),
    (thrown: unknown) => thrown,
  );
  expect(RouterError.is(error)).toBe(true);
  expect((error as RouterError).status).toBe(400);
  return ((error as RouterError).details.param as string | undefined) ?? (error as Error).message;
}

function param(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    expect(RouterError.is(error)).toBe(true);
    expect((error as RouterError).status).toBe(400);
    return ((error as RouterError).details.param as string | undefined) ?? (error as Error).message;
  }
  throw new Error('accepted');
}

describe('routing headers', () => {
  it('reads session, class, priority, tier, pin and taints', () => {
    const fields = requestFields('r1', {
      'x-session-id': 'conv-7',
      'x-session-final': 'true',
      'x-policy-class': 'batch',
      'x-request-priority': '250.5',
      'x-request-tier': '2',
      'x-worker-id': 'gpu-a#3',
      'x-required-taints': 'zone=a, gpu=h100',
      'x-preferred-taints': 'rack=1:2.5,pool=warm',
    });
    expect(fields).toEqual({
      id: 'r1',
      sessionId: 'conv-7',
      sessionFinal: true,
      policyClass: 'batch',
      priority: 250.5,
      tier: 2,
      pin: { id: 'gpu-a', rank: 3 },
      allowedWorkers: null,
      requiredTaints: ['zone=a', 'gpu=h100'],
      preferredTaints: [
        { taint: 'rack=1', weight: 2.5 },
        { taint: 'pool=warm', weight: 1 },
      ],
    });
  });

  it('defaults every field when no header is sent', () => {
    expect(requestFields('r2', {})).toEqual({ id: 'r2', sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null });
  });

  it('names the header a bad value came in', () => {
    expect(param(() => requestFields('r', { 'x-request-tier': '1.5' }))).toBe('x-request-tier');
    expect(param(() => requestFields('r', { 'x-request-priority': '' }))).toBe('x-request-priority');
    expect(param(() => requestFields('r', { 'x-worker-id': 'a#x' }))).toBe('x-worker-id');
    expect(param(() => requestFields('r', { 'x-preferred-taints': 'zone=a:-1' }))).toBe('x-preferred-taints');
    expect(parseWorkerLabel('w#0', 'p')).toEqual({ id: 'w', rank: 0 });
  });

  it('takes a tier the lane heap can key (32 bits) and refuses a larger one', () => {
    expect(requestFields('r', { 'x-request-tier': '2147483647' }).tier).toBe(2147483647);
    expect(requestFields('r', { 'x-request-tier': '-2147483647' }).tier).toBe(-2147483647);
    for (const tier of ['99999999999', '2147483648', '-2147483648', '1e10', 'Infinity']) {
      expect(param(() => requestFields('r', { 'x-request-tier': tier }))).toBe('x-request-tier');
    }
  });

  it('takes a priority that keeps the lane order key finite and refuses larger ones', () => {
    expect(requestFields('r', { 'x-request-priority': '-1e12' }).priority).toBe(-1e12);
    for (const priority of ['1e13', '1e308', '-1.7976931348623157e308', 'NaN', '0x']) {
      expect(param(() => requestFields('r', { 'x-request-priority': priority }))).toBe('x-request-priority');
    }
  });

  it('bounds the length of session ids, class names and worker labels', () => {
    const long = 'x'.repeat(257);
    expect(requestFields('r', { 'x-session-id': 'x'.repeat(256) }).sessionId).toHaveLength(256);
    expect(param(() => requestFields('r', { 'x-session-id': long }))).toBe('x-session-id');
    expect(param(() => requestFields('r', { 'x-policy-class': long }))).toBe('x-policy-class');
    expect(param(() => requestFields('r', { 'x-worker-id': long }))).toBe('x-worker-id');
    expect(requestFields('r', { 'x-worker-id': 'gpu#65535' }).pin).toEqual({ id: 'gpu', rank: 65535 });
    for (const label of ['gpu#65536', 'gpu#1e3', 'gpu#-1', 'gpu#', '#1', '']) {
      expect(param(() => requestFields('r', { 'x-worker-id': label }))).toBe('x-worker-id');
    }
  });

  it('x-session-final is "true" or "false"', () => {
    expect(requestFields('r', { 'x-session-final': 'false' }).sessionFinal).toBe(false);
    expect(requestFields('r', { 'x-session-final': 'TRUE' }).sessionFinal).toBe(true);
    expect(param(() => requestFields('r', { 'x-session-final': 'yes' }))).toBe('x-session-final');
  });

  it('taints are "key=value" entries; anything else is a 400 naming the header', () => {
    expect(requestFields('r', { 'x-required-taints': 'zone=a,tier=' }).requiredTaints).toEqual(['zone=a', 'tier=']);
    for (const taints of ['garbage', '=a', 'zone = a', 'zone=a,b', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')]) {
      expect(param(() => requestFields('r', { 'x-required-taints': taints }))).toBe('x-required-taints');
    }
    for (const taints of ['garbage:1', 'zone=a:1e7', 'zone=a:', 'zone=a:NaN', 'zone:1']) {
      expect(param(() => requestFields('r', { 'x-preferred-taints': taints }))).toBe('x-preferred-taints');
    }
  });
});

describe('request body', () => {
  it('names malformed JSON, a missing model and a bad stream flag', () => {
    expect(param(() => parseJsonBody(Buffer.from('{"a":')))).toMatch(/not valid JSON/);
    expect(param(() => parseJsonBody('[1]'))).toMatch(/must be a JSON object/);
    expect(param(() => modelOf({}))).toBe('model');
    expect(param(() => streamOf({ stream: 1 }))).toBe('stream');
    expect(streamOf({ stream: true })).toBe(true);
  });

  const nested = (depth: number, leaf = '1') => '['.repeat(depth) + leaf + ']'.repeat(depth);

  it('refuses JSON nested deeper than the renderer can walk, naming the field', () => {
    // The body is level 1, tools 2, tools[0] 3, its function 4: parameters of 60 nested arrays reach level 64.
    const tools = (depth: number) => `{"tools":[{"function":{"parameters":${nested(depth)}}}]}`;
    expect(parseJsonBody(tools(60)).tools).toBeDefined();
    expect(param(() => parseJsonBody(tools(61)))).toBe('tools[0].function.parameters[0][0]…');
    expect(param(() => parseJsonBody(tools(5000)))).toBe('tools[0].function.parameters[0][0]…');
    expect(param(() => parseJsonBody(`{"a":${nested(100_000)}}`))).toBe('a[0][0][0][0][0]…');
  });

  it('counts the nesting of tool-call arguments sent as JSON text, whose brackets inside strings do not count', () => {
    const body = (args: string) => JSON.stringify({ messages: [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: args } }] }] });
    expect(param(() => parseJsonBody(body(nested(5000))))).toBe('messages[0].tool_calls[0].function.arguments');
    expect(param(() => parseJsonBody(body(nested(59))))).toBe('messages[0].tool_calls[0].function.arguments');
    expect(parseJsonBody(body(nested(58))).messages).toBeDefined();
    expect(parseJsonBody(body(JSON.stringify({ text: '['.repeat(5000) + '\\"' + '{'.repeat(5000) }))).messages).toBeDefined();
  });
});

describe('prompt token ids', () => {
  let tok: PromptTokenizer;
  beforeAll(async () => {
    tok = await createTokenizer('bytes', { readFile: () => Promise.reject(new Error('no files')) });
  });

  it('renders the whole conversation with its tools and the generation prompt', async () => {
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: 'bye' },
    ];
    const tools = [{ type: 'function', function: { name: 'f' } }];
    expect(await promptTokens(tok, { messages, tools }, 'chat')).toEqual(tok.encodeChat(messages, { tools }));
    expect(await promptTokens(tok, { messages, add_generation_prompt: false }, 'chat')).toEqual(tok.encodeChat(messages, { addGenerationPrompt: false }));
    expect((await promptTokens(tok, { messages }, 'chat')).length).toBeGreaterThan((await promptTokens(tok, { messages: messages.slice(0, 1) }, 'chat')).length);
  });

  it('takes a completion prompt as text, as token ids, or as a batch of one', async () => {
    expect(await promptTokens(tok, { prompt: 'abcd' }, 'completion')).toEqual(tok.encodeText('abcd'));
    expect(Array.from(await promptTokens(tok, { prompt: [5, 6, 7] }, 'completion'))).toEqual([5, 6, 7]);
    expect(Array.from(await promptTokens(tok, { prompt: [[9, 8]] }, 'completion'))).toEqual([9, 8]);
    expect(await promptTokens(tok, { prompt: ['abcd'] }, 'completion')).toEqual(tok.encodeText('abcd'));
  });

  it('names what is wrong with a prompt', async () => {
    expect(await rejectedParam(promptTokens(tok, {}, 'completion'))).toBe('prompt');
    expect(await rejectedParam(promptTokens(tok, { prompt: ['a', 'b'] }, 'completion'))).toBe('prompt');
    expect(await rejectedParam(promptTokens(tok, { prompt: [1, 2.5] }, 'completion'))).toBe('prompt[1]');
    expect(await rejectedParam(promptTokens(tok, { messages: [] }, 'chat'))).toBe('messages');
    expect(await rejectedParam(promptTokens(tok, { messages: [{ role: 'user', content: 'x' }], tools: 'all' }, 'chat'))).toBe('tools');
    expect(await rejectedParam(promptTokens(tok, { messages: [{ role: 'user', content: 5 }] }, 'chat'))).toMatch(/^messages\[0\]\.content/);
  });
});
