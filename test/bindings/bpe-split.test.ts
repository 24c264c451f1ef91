// The core's o200k_base pre-tokenizer (assembly/bpe-split.ts) against the
// encoding's regular expression run by V8: the same pieces on random text
// made of every character class the pattern tells apart (and of whole
// Unicode), and the same ids as js-tiktoken when text reaches the core in
// batches that end anywhere, even inside a piece.
import fc from 'fast-check';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { BytePairEncoder, O200K_PATTERN } from '../../bindings/bpe.js';
import { tiktokenVocabulary } from '../../router/tokenize/tiktoken-vocabulary.js';
import { patternEnds as patternEndsOf } from '../helpers/pattern-ends.js';

const utf8 = new TextEncoder();

let kernel: BytePairEncoder;
let batched: BytePairEncoder;
let oracle: Tiktoken;

beforeAll(() => {
  const vocab = tiktokenVocabulary(o200k);
  kernel = new BytePairEncoder(vocab);
  batched = new BytePairEncoder(vocab, { batchUnits: 7 });
  oracle = new Tiktoken(o200k);
}, 60_000);

/** Piece ends (UTF-8 byte offsets) of the pattern's matches, as tiktoken cuts text (none skipped). */
const patternEnds = (text: string) => patternEndsOf(O200K_PATTERN, text);

/** Characters of every class and set boundary of the pattern. */
const CLASSES: Record<string, string[]> = {
  upper: ['A', 'Z', 'É', 'Σ', 'Ж', '\u01c5' /* Lt */, '\u1e9e', '𝐀'],
  lower: ['a', 's', 't', 'r', 'e', 'v', 'm', 'l', 'd', 'S', 'T', 'R', 'E', 'V', 'M', 'L', 'D', 'é', 'ß', 'σ', 'ж', '𝐚', '\u10ff'],
  both: ['\u02b0' /* Lm */, '\u3005', 'ª', '中', '文', 'ア', 'ㄱ', '한', '\u05d0', '\u0e01', '𠀀'],
  mark: ['\u0301', '\u0308', '\u0903' /* Mc */, '\u20dd' /* Me */, '\u0e31', '\ufe0f', '\u200d'],
  number: ['0', '1', '9', '\u0661', '\u216b' /* Nl */, '½', '²', '\u0966', '𝟘'],
  space: [' ', ' ', ' ', '\t', '\v', '\f', '\u00a0', '\u1680', '\u2003', '\u2028', '\u2029', '\u202f', '\u3000', '\ufeff'],
  newline: ['\n', '\r', '\r\n'],
  other: ["'", "'", '/', '!', '.', ',', '-', '$', '\u0fff', '\u07ff', '€', '😀', '🏽', '\u0085', '\u200b', '\ud800', '\udc00', '\u0000', '\uffff'],
};
const char = fc.constantFrom(...Object.values(CLASSES).flat());
const classRun = fc.tuple(fc.constantFrom(...Object.values(CLASSES)), fc.integer({ min: 1, max: 6 })).chain(([chars, n]) =>
  fc.array(fc.constantFrom(...chars), { minLength: n, maxLength: n }).map((a) => a.join('')),
);
const contraction = fc.constantFrom("'s", "'S", "'t", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'ll", "'lL", "'LL", "'d", "'D", "'x", "'r", "'l", "'");
/** Long ASCII letter runs (scanned 16 bytes at a time) broken by characters of any class. */
const asciiRuns = fc
  .array(fc.tuple(fc.stringMatching(/^[a-z]{0,40}$/), fc.stringMatching(/^[A-Z]{0,40}$/), char), { maxLength: 4 })
  .map((runs) => runs.flat().join(''));
const text = fc.oneof(
  fc.array(char, { maxLength: 40 }).map((a) => a.join('')),
  asciiRuns,
  fc.array(fc.oneof(classRun, contraction, char), { maxLength: 16 }).map((a) => a.join('')),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
);

/** The hostile inputs of the benchmark (bench/tokenize-hostile.bench.ts), short enough for the twin's pace. */
function hostile(bytes: number): string[] {
  let seed = 99;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
  const fill = (pick: () => string) => {
    let out = '';
    while (utf8.encode(out).length < bytes) out += pick();
    return out;
  };
  return [
    fill(() => 'ab'),
    fill(() => String.fromCharCode(97 + (next() % 26))),
    fill(() => 'AB'),
    fill(() => '\u0fff\u10ff\u07ff'),
    fill(() => '1234567890'),
    fill(() => '!@#$%^&*()[]{}<>'),
    fill(() => ' '),
    fill(() => ' \t \n'),
    fill(() => String.fromCodePoint(next() % 0x10ffff)),
    fill(() => String.fromCharCode(next() % 0xd800)),
    fill(() => '中文字符测试'),
    fill(() => '😀🎉👍🏽🚀'),
  ];
}

describe('the core pre-tokenizer', () => {
  it('cuts text where the o200k_base pattern does', () => {
    fc.assert(
      fc.property(text, (t) => {
        expect([...kernel.pieceEnds(t)!]).toEqual(patternEnds(t));
      }),
      { numRuns: 3000 },
    );
  });

  it('cuts the hostile inputs where the pattern does', () => {
    for (const t of hostile(20_000)) expect([...kernel.pieceEnds(t)!]).toEqual(patternEnds(t));
  });

  it('gives js-tiktoken ids when batches end anywhere, inside pieces too', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(text, classRun.map((r) => r.repeat(5))), { maxLength: 6 }), (parts) => {
        const t = parts.join('');
        const expected = oracle.encode(t, [], []);
        expect([...batched.encode(t)]).toEqual(expected);
        expect([...kernel.encode(t)]).toEqual(expected);
      }),
      { numRuns: 1000 },
    );
  });

  it('gives js-tiktoken ids on the hostile inputs, whole and in batches', () => {
    for (const t of hostile(1_500)) {
      const expected = oracle.encode(t, [], []);
      expect([...kernel.encode(t)]).toEqual(expected);
      expect([...batched.encode(t)]).toEqual(expected);
    }
  });

  it('is used for o200k_base only: other patterns are run by V8', () => {
    const vocab = tiktokenVocabulary(o200k);
    expect(new BytePairEncoder({ ...vocab, pattern: `${O200K_PATTERN}|x` }).pieceEnds('ab cd')).toBeUndefined();
  });

  it('refuses a batch size out of range', () => {
    const vocab = tiktokenVocabulary(o200k);
    expect(() => new BytePairEncoder(vocab, { batchUnits: 1 })).toThrow(/batchUnits/);
  });
});
