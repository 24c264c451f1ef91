import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../sim/mocker/http-server.js';
import { stableJson } from '../../sim/mocker/prompt-tokens.js';
import { postJson, readStream, sseEvents } from './mock-server-fixtures.js';

type Json = Record<string, any>;

let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer({ engine: { blockSize: 16, speedup: 200 }, modelName: 'mock-7b' });
});
afterAll(() => mock.close());

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Explain KV caches in one line, please, for the router tests.' },
];
const chatPromptTokens = Buffer.byteLength(stableJson(messages));

describe('mock server: chat completions', () => {
  it('non-streaming chat returns a chat.completion with max_tokens words and usage', async () => {
    const res = await postJson(`${mock.url}/v1/chat/completions`, { model: 'x', messages, max_tokens: 5 });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.object).toBe('chat.completion');
    expect(body.model).toBe('x');
    expect(body.choices[0].message.role).toBe('assistant');
    expect(body.choices[0].message.content.split(' ')).toHaveLength(5);
    expect(body.choices[0].finish_reason).toBe('length');
    expect(body.usage.prompt_tokens).toBe(chatPromptTokens);
    expect(body.usage.completion_tokens).toBe(5);
    expect(body.usage.total_tokens).toBe(chatPromptTokens + 5);
  });

  it('usage: a repeated prompt reports the cached prefix tokens', async () => {
    const own = [{ role: 'user', content: 'a prompt only this test sends, long enough for several blocks of sixteen' }];
    const first = (await (await postJson(`${mock.url}/v1/chat/completions`, { messages: own, max_tokens: 1 })).json()) as Json;
    const second = (await (await postJson(`${mock.url}/v1/chat/completions`, { messages: own, max_tokens: 1 })).json()) as Json;
    const n = first.usage.prompt_tokens as number;
    expect(first.usage.prompt_tokens_details.cached_tokens).toBe(0);
    // Every full 16-token block except that at least one token is recomputed.
    expect(second.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor((n - 1) / 16) * 16);
    expect(second.choices[0].message.content).toBe(first.choices[0].message.content);
  });

  it('streaming chat sends one chunk per token, role first, finish_reason last, usage when asked, then [DONE]', async () => {
    const res = await postJson(`${mock.url}/v1/chat/completions`, {
      messages,
      max_completion_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const events = sseEvents(await res.text()) as Json[];
    expect(events).toHaveLength(4 + 2);
    expect(events[5]).toBe('[DONE]');
    const tokens = events.slice(0, 4);
    for (const chunk of tokens) {
      expect(chunk.object).toBe('chat.completion.chunk');
      expect(chunk.id).toBe(tokens[0]!.id);
      expect(chunk.model).toBe('mock-7b');
    }
    expect(tokens[0]!.choices[0].delta.role).toBe('assistant');
    expect(tokens[1]!.choices[0].delta.role).toBeUndefined();
    expect(tokens.map((c) => c.choices[0].finish_reason)).toEqual([null, null, null, 'length']);
    const usage = events[4]!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ prompt_tokens: chatPromptTokens, completion_tokens: 4 });
    expect(usage.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
  });

  it('streaming without include_usage ends with the last token chunk and [DONE]', async () => {
    const res = await postJson(`${mock.url}/v1/chat/completions`, { messages, max_tokens: 2, stream: true });
    const events = sseEvents(await res.text()) as Json[];
    expect(events).toHaveLength(3);
    expect(events.slice(0, -1).some((e) => e.usage !== undefined)).toBe(false);
  });

  it('max_tokens defaults to 16 when absent', async () => {
    const body = (await (await postJson(`${mock.url}/v1/chat/completions`, { messages })).json()) as Json;
    expect(body.usage.completion_tokens).toBe(16);
  });
});

describe('mock server: completions', () => {
  it('a token-id prompt skips tokenization; stream and non-stream produce the same text', async () => {
    const prompt = Array.from({ length: 40 }, (_, i) => 500 + i);
    const whole = (await (await postJson(`${mock.url}/v1/completions`, { prompt, max_tokens: 6 })).json()) as Json;
    expect(whole.object).toBe('text_completion');
    expect(whole.usage.prompt_tokens).toBe(40);
    const streamed = await postJson(`${mock.url}/v1/completions`, { prompt, max_tokens: 6, stream: true, stream_options: { include_usage: true } });
    const events = sseEvents(await streamed.text()) as Json[];
    const chunks = events.slice(0, 6);
    expect(chunks.every((c) => c.object === 'text_completion')).toBe(true);
    expect(chunks.map((c) => c.choices[0].text).join('')).toBe(whole.choices[0].text);
    expect(events[6]!.usage).toMatchObject({ prompt_tokens: 40, completion_tokens: 6, prompt_tokens_details: { cached_tokens: 32 } });
  });

  it('a text prompt (or a batch of one) is tokenized by the fallback as UTF-8 bytes', async () => {
    const a = (await (await postJson(`${mock.url}/v1/completions`, { prompt: 'héllo', max_tokens: 1 })).json()) as Json;
    const b = (await (await postJson(`${mock.url}/v1/completions`, { prompt: ['héllo'], max_tokens: 1 })).json()) as Json;
    expect(a.usage.prompt_tokens).toBe(6);
    expect(b.usage.prompt_tokens).toBe(6);
  });
});

describe('mock server: other endpoints and errors', () => {
  it('serves /v1/models and /health', async () => {
    const models = (await (await fetch(`${mock.url}/v1/models`)).json()) as Json;
    expect(models).toMatchObject({ object: 'list', data: [{ id: 'mock-7b', object: 'model' }] });
    const health = await fetch(`${mock.url}/health`);
    expect(health.status).toBe(200);
  });

  it('bad JSON is a 400 with an OpenAI-style error body', async () => {
    const res = await postJson(`${mock.url}/v1/chat/completions`, '{"messages": [');
    expect(res.status).toBe(400);
    const body = (await res.json()) as Json;
    expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    expect(body.error.message).toMatch(/not valid JSON/);
  });

  it('bad fields are 400s naming the field', async () => {
    const cases: [string, unknown, string][] = [
      ['/v1/chat/completions', { messages: [] }, 'messages'],
      ['/v1/chat/completions', { messages, max_tokens: 0 }, 'max_tokens'],
      ['/v1/chat/completions', { messages, stream: 'yes' }, 'stream'],
      ['/v1/completions', { max_tokens: 3 }, 'prompt'],
      ['/v1/completions', { prompt: '' }, 'prompt'],
      ['/v1/completions', { prompt: [1, -2] }, 'prompt'],
      ['/v1/completions', { prompt: ['a', 'b'] }, 'prompt'],
      ['/v1/completions', { prompt: 'x', n: 2 }, 'n'],
    ];
    for (const [path, body, param] of cases) {
      const res = await postJson(`${mock.url}${path}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(((await res.json()) as Json).error.param).toBe(param);
    }
  });

  it('an unknown path is a 404, a wrong method a 405', async () => {
    const missing = await fetch(`${mock.url}/v2/nothing`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as Json).error.type).toBe('not_found_error');
    expect((await fetch(`${mock.url}/v1/completions`)).status).toBe(405);
  });

  it('a prompt too long for the cache is a 400 before any byte of stream', async () => {
    const small = await startMockServer({ engine: { numBlocks: 4, blockSize: 4 } });
    try {
      const res = await postJson(`${small.url}/v1/completions`, { prompt: Array.from({ length: 20 }, () => 1), stream: true });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error.code).toBe('context_length_exceeded');
    } finally {
      await small.close();
    }
  });

  it('a body over the limit is a 413', async () => {
    const tiny = await startMockServer({ maxBodyBytes: 100 });
    try {
      const res = await postJson(`${tiny.url}/v1/completions`, { prompt: 'x'.repeat(200) });
      expect(res.status).toBe(413);
    } finally {
      await tiny.close();
    }
  });

  it('an injected tokenizer receives the body and the kind', async () => {
    const seen: string[] = [];
    const custom = await startMockServer({
      promptTokens: (body, kind) => {
        seen.push(`${kind}:${JSON.stringify(body.messages ?? body.prompt)}`);
        return [1, 2, 3];
      },
    });
    try {
      const body = (await (await postJson(`${custom.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 })).json()) as Json;
      expect(body.usage.prompt_tokens).toBe(3);
      expect(seen).toEqual(['chat:[{"role":"user","content":"hi"}]']);
    } finally {
      await custom.close();
    }
  });

  it('a completed stream ends with [DONE] and a clean end of body', async () => {
    const res = await postJson(`${mock.url}/v1/completions`, { prompt: 'abc', max_tokens: 3, stream: true });
    const { text, broken } = await readStream(res);
    expect(broken).toBe(false);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});
