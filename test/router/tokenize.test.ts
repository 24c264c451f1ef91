// The shipped ChatML template over tiktoken encodings and byte packing:
// incremental results equal whole-prompt results, caches behave, every part
// of the request reaches the ids, and bad input is named.
import { Template } from '@huggingface/jinja';
import fc from 'fast-check';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHATML_TEMPLATE, IM_END, IM_START } from '../../router/tokenize/chatml.js';
import { createTokenizer, packBytes, type ChatMessage, type PromptTokenizer } from '../../router/tokenize/index.js';
import { normalizeChat } from '../../router/tokenize/messages.js';
import { chatOptions, conversation, memoryIO } from './tokenize-arbitraries.js';

const io = memoryIO({});
let tok: PromptTokenizer;
let oracle: Tiktoken;
const chatml = new Template(CHATML_TEMPLATE);

beforeAll(async () => {
  tok = await createTokenizer('tiktoken:o200k_base', io);
  const [start] = tok.encodeText(IM_START);
  const [end] = tok.encodeText(IM_END);
  oracle = new Tiktoken(o200k, { [IM_START]: start!, [IM_END]: end! });
});

const chat = (n: number, size = 40): ChatMessage[] =>
  Array.from({ length: n }, (_, i) => ({ role: i === 0 ? 'system' : i % 2 ? 'user' : 'assistant', content: `message ${i}: ${'lorem ipsum dolor '.repeat(size)}` }));

describe('tiktoken:o200k_base with the ChatML template', () => {
  it('loads in incremental tokenization and segmented rendering mode', () => {
    expect(tok.spec).toBe('tiktoken:o200k_base');
    expect(tok.mode).toBe('incremental');
    expect(tok.renderMode).toBe('segmented');
  });

  it('gives the ChatML markers ids above every id of the encoding', () => {
    const [start] = tok.encodeText(IM_START);
    const [end] = tok.encodeText(IM_END);
    const encodingMax = Math.max(...Object.values(o200k.special_tokens));
    expect(start).toBeGreaterThan(encodingMax);
    expect(end).toBe(start! + 1);
    // the markers split text like real special tokens: the text around them is tokenized on its own
    expect(Array.from(tok.encodeText(`hi${IM_START}there`))).toEqual([...oracle.encode('hi'), start, ...oracle.encode('there')]);
  });

  it('segmented rendering equals the ChatML template rendered whole, and incremental ids equal whole-prompt ids', () => {
    fc.assert(
      fc.property(conversation, chatOptions, (messages, options) => {
        const input = normalizeChat(messages, options);
        const whole = chatml.render({ messages: input.messages, tools: input.tools, add_generation_prompt: input.addGenerationPrompt });
        expect(tok.renderChat(messages, options)).toBe(whole);
        expect(Array.from(tok.encodeChat(messages, options))).toEqual(oracle.encode(whole, 'all'));
      }),
      { numRuns: 150 },
    );
    expect(tok.stats().fallbacks).toBe(0);
  });

  it('a new turn tokenizes only the new pieces and renders only the new messages', async () => {
    const t = await createTokenizer('tiktoken:o200k_base', io);
    const first = chat(8);
    t.encodeChat(first);
    const before = t.stats();
    const next = [...first, { role: 'assistant', content: 'a fresh answer' }, { role: 'user', content: 'a fresh question' }];
    t.encodeChat(next);
    const after = t.stats();
    // each message's rendered text is one cached span: the two new ones miss, the
    // generation prompt hits, and the head (first message) and the 7 later old
    // messages come with the earlier turn's ids in one piece, not looked up
    expect(after.pieceMisses - before.pieceMisses).toBe(2);
    expect(after.pieceHits - before.pieceHits).toBe(1);
    expect(after.segmentMisses - before.segmentMisses).toBe(2);
    expect(after.segmentHits - before.segmentHits).toBe(7);
  });

  it('a new message sends only its own text to the tokenizer: the short texts between template markers are known from earlier ones', async () => {
    const t = await createTokenizer('tiktoken:o200k_base', io);
    const system = { role: 'system', content: 'be brief' };
    t.encodeChat([system, { role: 'user', content: 'first question' }]);
    const messages = [system, { role: 'user', content: 'second question' }];
    const plan = t.planChat(messages);
    expect(plan.texts).toEqual(['user\nsecond question']);
    expect([...plan.run()]).toEqual(oracle.encode(t.renderChat(messages), 'all'));
  });

  it('the piece cache stays within its token bound and keeps the most recent pieces', async () => {
    const t = await createTokenizer('tiktoken:o200k_base', io, { cacheTokens: 300 });
    const messages = chat(12, 10); // ~45 tokens per message
    t.encodeChat(messages);
    expect(t.stats().cachedTokens).toBeGreaterThan(0);
    expect(t.stats().cachedTokens).toBeLessThanOrEqual(300);
    const misses = t.stats().pieceMisses;
    t.encodeChat([messages[0]!, messages[11]!]); // the last message is recent: still cached
    expect(t.stats().pieceMisses - misses).toBe(1); // only the evicted first message
  });

  it('a piece heavier than the whole cache is tokenized but not kept', async () => {
    const t = await createTokenizer('tiktoken:o200k_base', io, { cacheTokens: 10 });
    const text = 'word '.repeat(50);
    expect(Array.from(t.encodeText(text))).toEqual(oracle.encode(text));
    expect(t.stats().cachedTokens).toBe(0);
  });

  it('all messages reach the ids: changing message 1 of 5 changes the tokens', () => {
    const messages = chat(5);
    const changed = messages.map((m, i) => (i === 1 ? { ...m, content: `${m.content as string}!` } : m));
    expect(Array.from(tok.encodeChat(changed))).not.toEqual(Array.from(tok.encodeChat(messages)));
  });

  it('tools reach the ids: changing a tool changes the tokens', () => {
    const messages = chat(3);
    const tool = (description: string) => [{ type: 'function', function: { name: 'search', description, parameters: {} } }];
    const a = tok.encodeChat(messages, { tools: tool('Search the web.') });
    const b = tok.encodeChat(messages, { tools: tool('Search the docs.') });
    const none = tok.encodeChat(messages);
    expect(Array.from(a)).not.toEqual(Array.from(b));
    expect(a.length).toBeGreaterThan(none.length);
  });

  it('tool calls reach the ids', () => {
    const call = (path: string) => [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'read', arguments: JSON.stringify({ path }) } }] }];
    expect(Array.from(tok.encodeChat(call('a.txt')))).not.toEqual(Array.from(tok.encodeChat(call('b.txt'))));
  });

  it('the generation prompt is appended only when asked', () => {
    const messages = chat(2);
    expect(tok.renderChat(messages).endsWith(`${IM_START}assistant\n`)).toBe(true);
    expect(tok.renderChat(messages, { addGenerationPrompt: false }).endsWith(`${IM_END}\n`)).toBe(true);
  });

  it('multi-part text content is joined with newlines', () => {
    const parts = tok.renderChat([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }]);
    expect(parts).toBe(tok.renderChat([{ role: 'user', content: 'a\nb' }]));
  });
});

describe('malformed requests are rejected with the field named', () => {
  it.each<[string, { messages: unknown; tools?: unknown }, RegExp]>([
    ['messages not an array', { messages: 'hi' }, /messages must be an array/],
    ['message not an object', { messages: [1] }, /messages\[0\] must be an object/],
    ['message without role', { messages: [{ content: 'x' }] }, /messages\[0\]\.role/],
    ['content a number', { messages: [{ role: 'user', content: 3 }] }, /messages\[0\]\.content must be/],
    ['non-string text part', { messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] }, /messages\[0\]\.content\[0\]\.text must be a string/],
    ['image part without a URL', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, /messages\[0\]\.content\[0\]\.image_url\.url must be a non-empty string/],
    ['audio part', { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] }, /messages\[0\]\.content\[0\]\.type must be "text" or "image_url"/],
    ['tool_calls not an array', { messages: [{ role: 'assistant', content: '', tool_calls: {} }] }, /messages\[0\]\.tool_calls must be an array/],
    ['name not a string', { messages: [{ role: 'user', content: '', name: 1 }] }, /messages\[0\]\.name must be a string/],
    ['tools not an array', { messages: [{ role: 'user', content: '' }], tools: {} }, /tools must be an array/],
  ])('%s', (_, { messages, tools }, message) => {
    expect(() => tok.encodeChat(messages as ChatMessage[], { tools: tools as unknown[] })).toThrow(TypeError);
    expect(() => tok.encodeChat(messages as ChatMessage[], { tools: tools as unknown[] })).toThrow(message);
  });

  it('a raw prompt must be a string', () => {
    expect(() => tok.encodeText(42 as unknown as string)).toThrow(TypeError);
  });
});

describe('tokenizer specs', () => {
  it.each([
    ['unknown scheme', 'sentencepiece:x', /unknown tokenizer spec "sentencepiece:x"/],
    ['unknown encoding', 'tiktoken:o300k', /unknown tiktoken encoding "o300k"/],
    ['empty hf dir', 'hf:', /hf:<dir>/],
  ])('%s is rejected naming the spec', async (_, spec, message) => {
    await expect(createTokenizer(spec, io)).rejects.toThrow(message);
  });

  it('rejects a negative cache bound', async () => {
    await expect(createTokenizer('bytes', io, { cacheTokens: -1 })).rejects.toThrow(/cacheTokens/);
  });

  it('every encoding shipped in js-tiktoken loads in incremental mode', async () => {
    for (const enc of ['cl100k_base', 'gpt2']) {
      const t = await createTokenizer(`tiktoken:${enc}`, io);
      expect(t.mode).toBe('incremental');
      expect(t.encodeChat(chat(2)).length).toBeGreaterThan(10);
    }
  });
});

describe('bytes', () => {
  it('packs UTF-8 bytes 4 per id, little-endian, zero-padding the last', () => {
    expect(Array.from(packBytes('abcd'))).toEqual([0x64636261]);
    expect(Array.from(packBytes('abcde'))).toEqual([0x64636261, 0x65]);
    expect(Array.from(packBytes('é'))).toEqual([0xa9c3]); // U+00E9 is C3 A9 in UTF-8
    expect(Array.from(packBytes('🙂'))).toEqual([0x82999ff0]);
    expect(packBytes('').length).toBe(0);
  });

  it('equals the packed bytes of the rendered ChatML prompt, so shared conversation prefixes share leading ids', async () => {
    const t = await createTokenizer('bytes', io);
    fc.assert(
      fc.property(conversation, chatOptions, (messages, options) => {
        const ids = t.encodeChat(messages, options);
        const bytes = new TextEncoder().encode(t.renderChat(messages, options));
        expect(ids.length).toBe(Math.ceil(bytes.length / 4));
        for (let i = 0; i < bytes.length; i++) expect((ids[i >> 2]! >>> (8 * (i & 3))) & 0xff).toBe(bytes[i]);
      }),
      { numRuns: 50 },
    );
    const longer = t.encodeChat([...chat(3), { role: 'user', content: 'next' }]);
    const shorter = t.encodeChat(chat(3), { addGenerationPrompt: false });
    expect(Array.from(longer.slice(0, shorter.length - 1))).toEqual(Array.from(shorter.slice(0, -1)));
  });
});
