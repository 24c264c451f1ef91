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
});

describe('request body', () => {
  it('names malformed JSON, a missing model and a bad stream flag', () => {
    expect(param(() => parseJsonBody(Buffer.from('{"a":')))).toMatch(/not valid JSON/);
    expect(param(() => parseJsonBody('[1]'))).toMatch(/must be a JSON object/);
    expect(param(() => modelOf({}))).toBe('model');
    expect(param(() => streamOf({ stream: 1 }))).toBe('stream');
    expect(streamOf({ stream: true })).toBe(true);
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
