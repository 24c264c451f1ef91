// Byte-pair encoding on the wasm core against its pure-TS twin and against
// js-tiktoken (the tokenizer the router used before, and the reference for
// tiktoken's ids): random strings of every kind, long runs that take the heap
// and the windowed path, windows shrunk so cuts and their checks happen on
// short pieces, and vocabularies the core must refuse.
import fc from 'fast-check';
import { Tiktoken, type TiktokenBPE } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import gpt2 from 'js-tiktoken/ranks/gpt2';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { BytePairEncoder, type BpeVocabulary } from '../../bindings/bpe.js';
import { BytePairEncoderReference } from '../../bindings/reference/bpe.js';
import { tiktokenVocabulary } from '../../router/tokenize/tiktoken-vocabulary.js';

const ENCODINGS: [string, TiktokenBPE][] = [
  ['o200k_base', o200k],
  ['cl100k_base', cl100k],
  ['gpt2', gpt2],
];

interface Encoders {
  kernel: BytePairEncoder;
  /** The same kernel with tiny windows: every long piece is cut, checked, and sometimes merged again wider. */
  windowed: BytePairEncoder;
  twin: BytePairEncoderReference;
  oracle: Tiktoken;
}

const encoders = new Map<string, Encoders>();

beforeAll(() => {
  for (const [name, ranks] of ENCODINGS) {
    const vocab = tiktokenVocabulary(ranks);
    encoders.set(name, {
      kernel: new BytePairEncoder(vocab),
      windowed: new BytePairEncoder(vocab, { window: { bytes: 12, margin: 3 } }),
      twin: new BytePairEncoderReference(vocab),
      oracle: new Tiktoken(ranks),
    });
  }
}, 60_000);

/** Pieces tiktoken merges in interesting ways: repeats, digits, case changes, whitespace, multi-byte characters. */
const atom = fc.constantFrom(
  'a', 'b', 'ab', 'ba', 'aa', 'x', 'q', 'Z', 'AB', 'the', ' of', 'ing', '1', '23', '456', '!', '?!', '==', '...', ' ', '  ', '\n', '\t', '\r\n',
  'é', 'ß', 'ñ', '\u0301', '中', '文字', 'ア', '😀', '👍🏽', '👩‍💻', '\u200b', '\ud800', '\udfff', "'s", "'LL", '\u00a0',
);
/** One long run of a few atoms: a single pre-tokenized piece, or a few, hundreds of bytes long. */
const run = fc.tuple(fc.array(atom, { minLength: 1, maxLength: 3 }), fc.integer({ min: 20, max: 400 })).map(([atoms, n]) => {
  let out = '';
  for (let i = 0; out.length < n; i++) out += atoms[i % atoms.length];
  return out;
});
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 60 }),
  fc.array(atom, { maxLength: 40 }).map((a) => a.join('')),
  run,
  fc.array(fc.oneof(run, atom, fc.string({ maxLength: 10 })), { maxLength: 4 }).map((a) => a.join('')),
);

describe.each(ENCODINGS.map(([name]) => name))('%s', (name) => {
  it('the kernel, its twin and js-tiktoken give the same ids', () => {
    const { kernel, windowed, twin, oracle } = encoders.get(name)!;
    fc.assert(
      fc.property(text, (t) => {
        const expected = oracle.encode(t, [], []);
        expect([...twin.encode(t)]).toEqual(expected);
        expect([...kernel.encode(t)]).toEqual(expected);
        expect([...windowed.encode(t)]).toEqual(expected);
      }),
      { numRuns: 250 },
    );
  });
});

describe('windowed merging', () => {
  it('cuts long pieces into windows, and merges a piece again wider when a cut fails its check', () => {
    const { windowed, twin } = encoders.get('o200k_base')!;
    const before = windowed.stats();
    // Runs where the leftmost-first rule and long tokens reach across any cut.
    for (const t of ['a'.repeat(700), 'ab'.repeat(350), ' '.repeat(600), '1'.repeat(500), 'aab'.repeat(200), '中文'.repeat(200), '😀'.repeat(150)]) {
      expect([...windowed.encode(t)]).toEqual([...twin.encode(t)]);
    }
    const after = windowed.stats();
    expect(after.windows).toBeGreaterThan(before.windows);
    expect(after.widenings).toBeGreaterThan(before.widenings);
  });

  it('pieces far longer than the twin can check give the same ids with default windows as merged in one run', () => {
    const { kernel } = encoders.get('o200k_base')!;
    const single = new BytePairEncoder(tiktokenVocabulary(o200k), { window: { bytes: 1 << 24, margin: 0 } });
    let seed = 7;
    const letter = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return String.fromCharCode(97 + (seed % 26));
    };
    const random = Array.from({ length: 60_000 }, letter).join('');
    const before = kernel.stats();
    for (const t of [random, 'ab'.repeat(40_000), ' '.repeat(70_000), '中文字符'.repeat(9_000), `${'a'.repeat(30_000)}b${'a'.repeat(30_000)}`]) {
      expect(kernel.encode(t)).toEqual(single.encode(t));
    }
    expect(kernel.stats().windows).toBeGreaterThan(before.windows);
  });
});

describe('vocabulary checks', () => {
  const tiny = (tokens: string[], ranks?: number[]): BpeVocabulary => {
    const bytes: number[] = [];
    const offsets = [0];
    for (const t of tokens) {
      for (const c of t) bytes.push(c.charCodeAt(0));
      offsets.push(bytes.length);
    }
    return { bytes: Uint8Array.from(bytes), offsets: Uint32Array.from(offsets), ranks: Uint32Array.from(ranks ?? tokens.map((_, i) => i)), pattern: '\\S+|\\s+' };
  };
  const everyByte = Array.from({ length: 256 }, (_, b) => String.fromCharCode(b));

  it('a vocabulary over raw bytes merges by rank, leftmost first', () => {
    const vocab = tiny([...everyByte, 'ab', 'bc', 'abc', 'aa'], [...everyByte.map((_, i) => 100 + i), 5, 3, 9, 7]);
    for (const encoder of [new BytePairEncoder(vocab), new BytePairEncoderReference(vocab)]) {
      // A piece that is a token is that token.
      expect([...encoder.encode('abc')]).toEqual([9]);
      // bc (3) merges first, then ab (5) at the end, then a + bc = abc (9).
      expect([...encoder.encode('abcab')]).toEqual([9, 5]);
      // Equal ranks: the leftmost pair merges first.
      expect([...encoder.encode('aaa')]).toEqual([7, 100 + 97]);
    }
  });

  it('refuses a vocabulary it cannot encode every input with, or that is ambiguous', () => {
    const cases: [string, BpeVocabulary, RegExp][] = [
      ['a missing byte', tiny(everyByte.slice(1)), /every byte value/],
      ['an empty token', tiny([...everyByte, '']), /empty/],
      ['the "no token" rank', tiny([...everyByte, 'ab'], [...everyByte.map((_, i) => i), 0xffffffff]), /rank 0xffffffff/],
      ['two tokens with the same bytes', tiny([...everyByte, 'ab', 'ab']), /same bytes/],
    ];
    for (const [, vocab, message] of cases) {
      expect(() => new BytePairEncoder(vocab)).toThrow(message);
      expect(() => new BytePairEncoderReference(vocab)).toThrow(message);
    }
  });
});
