// Prompts built to be expensive to tokenize, over real HTTP: one unbroken
// run of letters, repeated rare bytes, digits, whitespace, emoji, random
// unicode. Past the model's tokenize limit a prompt is rejected with a 400
// naming the limit, or routed on its bytes; under it, it is tokenized off the
// event loop, so /health answers while it is. Never a 500.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedTokenizePool } from '../../server/request/tokenize-pool.js';
import { chat, MODEL, post, settled, startStack, waitFor, type Stack } from './stack.js';

const TOKENIZER = 'tiktoken:o200k_base';
const LIMIT = 50_000;
/** KV blocks per mock worker: room for the longest prompt here (about half a million tokens). */
const NUM_BLOCKS = 1 << 17;

/** An unbroken run of letters: one pre-tokenized piece as long as the text. */
const letters = (n: number) => 'ab'.repeat(Math.ceil(n / 2)).slice(0, n);

function hostileTexts(n: number): Record<string, string> {
  let seed = 11;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
  const random = (pick: () => string) => {
    let out = '';
    while (out.length < n) out += pick();
    return out;
  };
  return {
    letters: letters(n),
    randomLetters: random(() => String.fromCharCode(97 + (next() % 26))),
    rareBytes: random(() => '\u0fff\u10ff\u07ff'),
    digits: random(() => '1234567890'),
    punctuation: random(() => '!@#$%^&*()[]{}'),
    whitespace: random(() => ' \t  \n'),
    emoji: random(() => '😀🎉👍🏽🚀'),
    unicode: random(() => String.fromCodePoint(next() % 0x10ffff)),
  };
}

function withLimit(limit: Record<string, unknown>) {
  return (doc: Record<string, unknown>) => {
    (doc.models as Record<string, unknown>[])[0]!.tokenize_limit = limit;
  };
}

async function explain(stack: Stack, body: Record<string, unknown>): Promise<{ prompt_basis: string; prompt_tokens: number }> {
  const res = await post(`${stack.url}/router/explain`, body);
  expect(res.status).toBe(200);
  return (await res.json()) as { prompt_basis: string; prompt_tokens: number };
}

describe('over the limit: reject', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ workers: 1, tokenizer: TOKENIZER, numBlocks: NUM_BLOCKS, edit: withLimit({ max_chars: LIMIT, over: 'reject' }) });
  });
  afterAll(() => stack?.close());

  it('answers 400 with an OpenAI error body naming the limit, for chats and completions', async () => {
    for (const [body, param] of [
      [chat(letters(LIMIT + 1_000)), 'messages'],
      [{ model: MODEL, prompt: letters(LIMIT + 1), max_tokens: 4 }, 'prompt'],
    ] as const) {
      const path = 'messages' in body ? '/v1/chat/completions' : '/v1/completions';
      const res = await post(`${stack.url}${path}`, body);
      expect(res.status).toBe(400);
      const error = ((await res.json()) as { error: { code: string; type: string; message: string; param: string } }).error;
      expect(error.code).toBe('KVR_ERR_INVALID_REQUEST');
      expect(error.type).toBe('invalid_request_error');
      expect(error.param).toBe(param);
      expect(error.message).toContain('tokenize_limit.max_chars');
      expect(error.message).toContain(String(LIMIT));
    }
    await waitFor(() => settled(stack.model), 'nothing booked');
  });

  it('tokenizes a prompt under the limit, however hostile', async () => {
    const res = await post(`${stack.url}/v1/chat/completions`, chat(letters(LIMIT - 1_000)));
    expect(res.status).toBe(200);
    await res.text();
  });

  it('counts only text the caches do not hold: a long conversation sent again in parts stays under it', async () => {
    const turn = (i: number) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `${i} ${letters(LIMIT / 2)}` });
    const messages = [turn(0)];
    for (let i = 1; i < 4; i++) {
      const res = await post(`${stack.url}/v1/chat/completions`, chat(messages));
      expect(res.status).toBe(200);
      await res.text();
      messages.push(turn(i));
    }
    // Over the limit as a whole, but every message but the last was tokenized before.
    expect(messages.reduce((n, m) => n + m.content.length, 0)).toBeGreaterThan(LIMIT);
    expect((await explain(stack, chat(messages))).prompt_basis).toBe('tokens');
  });
});

describe('over the limit: route on bytes', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ workers: 2, tokenizer: TOKENIZER, numBlocks: NUM_BLOCKS, edit: withLimit({ max_chars: LIMIT, over: 'bytes' }) });
  });
  afterAll(() => stack?.close());

  it('serves the request, routed on the rendered prompt packed 4 bytes per id', async () => {
    const content = `é${letters(LIMIT)}`;
    // Explained first: the embedded mock workers tokenize what they serve with the router's tokenizer, filling its caches.
    const rendered = `<|im_start|>user\n${content}<|im_end|>\n<|im_start|>assistant\n`;
    const x = await explain(stack, chat(content));
    expect(x.prompt_basis).toBe('bytes');
    expect(x.prompt_tokens).toBe(Math.ceil(Buffer.byteLength(rendered) / 4));
    const res = await post(`${stack.url}/v1/chat/completions`, chat(content));
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: unknown[] }).choices.length).toBe(1);
    // Under the limit the same model routes on tokens.
    expect((await explain(stack, chat('hello'))).prompt_basis).toBe('tokens');
    await waitFor(() => settled(stack.model), 'nothing booked');
  });
});

describe('default limits', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ workers: 2, tokenizer: TOKENIZER, numBlocks: NUM_BLOCKS });
  });
  afterAll(() => stack?.close());

  it('every hostile prompt is answered 200, as a chat and as a completion', async () => {
    for (const [kind, text] of Object.entries(hostileTexts(60_000))) {
      for (const [path, body] of [
        ['/v1/chat/completions', chat(text)],
        ['/v1/completions', { model: MODEL, prompt: text, max_tokens: 4 }],
      ] as const) {
        const res = await post(`${stack.url}${path}`, body);
        expect(res.status, `${kind} ${path}`).toBe(200);
        await res.text();
      }
    }
    await waitFor(() => settled(stack.model), 'nothing booked');
  });

  it('/health answers while a hostile prompt is being tokenized, before that request completes', async () => {
    const pool = sharedTokenizePool();
    let hostileDone = false;
    // Two million letters: far under the default limit, seconds of tokenizing on the old path.
    const hostile = post(`${stack.url}/v1/chat/completions`, chat(letters(2_000_000))).then(async (res) => {
      await res.text();
      hostileDone = true;
      return res.status;
    });
    await waitFor(() => pool.queuedChars >= 2_000_000, 'the hostile prompt on a tokenizer thread', 30_000);
    const health = await fetch(`${stack.url}/health`);
    expect(health.status).toBe(200);
    expect(hostileDone).toBe(false);
    expect(await hostile).toBe(200);
  });
});
