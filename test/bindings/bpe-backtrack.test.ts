// The backtracking encoder of long pieces (assembly/bpe-backtrack.ts) against
// the heap merge (the same kernel, long pieces forced onto the heap) and
// js-tiktoken: single long pieces built to make it backtrack (letter runs,
// repeated units, CJK, random bytes of every class), for o200k_base and
// cl100k_base; and small vocabularies where its load-time checks must turn
// it off.
import fc from 'fast-check';
import { Tiktoken, type TiktokenBPE } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { BytePairEncoder, type BpeVocabulary } from '../../bindings/bpe.js';
import { BytePairEncoderReference } from '../../bindings/reference/bpe.js';
import { tiktokenVocabulary } from '../../router/tokenize/tiktoken-vocabulary.js';

const ENCODINGS: [string, TiktokenBPE][] = [
  ['o200k_base', o200k],
  ['cl100k_base', cl100k],
];

interface Encoders {
  backtracking: BytePairEncoder;
  heap: BytePairEncoder;
  chosen: BytePairEncoder;
  oracle: Tiktoken;
}

const encoders = new Map<string, Encoders>();

beforeAll(() => {
  for (const [name, ranks] of ENCODINGS) {
    const vocab = tiktokenVocabulary(ranks);
    encoders.set(name, {
      backtracking: new BytePairEncoder(vocab, { longPieces: 'backtrack' }),
      heap: new BytePairEncoder(vocab, { longPieces: 'heap' }),
      chosen: new BytePairEncoder(vocab),
      oracle: new Tiktoken(ranks),
    });
  }
}, 60_000);

/** Units whose repeats merge into long tokens and back off again: letters, case changes, subwords, CJK, emoji, spaces. */
const unit = fc.oneof(
  fc.constantFrom('a', 'b', 'ab', 'ba', 'aab', 'abc', 'the', 'ing', 'tion', 'AB', 'Ab', 'aB', 'x', 'zz', 'é', 'ß', 'ñ', '中', '文字', '测试', 'ア', '한', '😀', '👍🏽', ' ', '  ', '\t', '!', '=='),
  fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz'), minLength: 1, maxLength: 6 }),
);
/** A run of a few units repeated, some units changed here and there (the changes make the encoder back off). */
const repeated = fc
  .tuple(fc.array(unit, { minLength: 1, maxLength: 4 }), fc.integer({ min: 17, max: 400 }), fc.array(fc.tuple(fc.nat(), unit), { maxLength: 6 }))
  .map(([units, n, changes]) => {
    const parts: string[] = [];
    for (let size = 0, i = 0; size < n; i++) {
      parts.push(units[i % units.length]!);
      size += parts.at(-1)!.length;
    }
    for (const [at, u] of changes) parts[at % parts.length] = u;
    return parts.join('');
  });
/** Random letters (one pre-tokenized piece however long), of a small or the whole alphabet. */
const letters = fc
  .tuple(fc.constantFrom('ab', 'abc', 'etaoin', 'abcdefghijklmnopqrstuvwxyz', 'ABCab', 'ÀÉÎõü', '中文字符测试的是'), fc.integer({ min: 17, max: 400 }))
  .chain(([alphabet, n]) => fc.array(fc.constantFrom(...alphabet), { minLength: n, maxLength: n }).map((a) => a.join('')));
/** Characters of every class, so pieces of every kind (and raw bytes of lone surrogates) come out long. */
const anyText = fc.oneof(fc.string({ unit: 'binary', minLength: 17, maxLength: 300 }), fc.string({ unit: 'grapheme', minLength: 17, maxLength: 200 }));
const longText = fc.oneof(repeated, letters, anyText, fc.array(fc.oneof(repeated, letters), { minLength: 2, maxLength: 3 }).map((a) => a.join(' ')));

describe.each(ENCODINGS.map(([name]) => name))('%s', (name) => {
  it('the backtracking encoder, the heap merge, the chosen path and js-tiktoken give the same ids on long pieces', () => {
    const { backtracking, heap, chosen, oracle } = encoders.get(name)!;
    const before = backtracking.stats().backtracked;
    fc.assert(
      fc.property(longText, (t) => {
        const expected = oracle.encode(t, [], []);
        expect([...heap.encode(t)]).toEqual(expected);
        expect([...backtracking.encode(t)]).toEqual(expected);
        expect([...chosen.encode(t)]).toEqual(expected);
      }),
      { numRuns: 150 },
    );
    expect(backtracking.stats().backtracking).toBe(true);
    // Every case has a piece over 16 bytes (150 cases, each with at least one).
    expect(backtracking.stats().backtracked - before).toBeGreaterThanOrEqual(150);
    expect(heap.stats().backtracked).toBe(0);
  });

  it("pieces of 256 KiB give the heap merge's ids", () => {
    const { backtracking, heap } = encoders.get(name)!;
    let seed = 11;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    const random = Array.from({ length: 1 << 18 }, () => String.fromCharCode(97 + (next() % 26))).join('');
    for (const t of [random, 'ab'.repeat(1 << 17), 'AB'.repeat(1 << 17), ' '.repeat(1 << 18), '中文字符测试'.repeat(14_564), '😀🎉👍🏽🚀'.repeat(10_000)]) {
      expect(backtracking.encode(t)).toEqual(heap.encode(t));
    }
  });
});

describe('the chosen path', () => {
  it('runs that repeat a few units take the backtracking encoder, random letters spliced windows', () => {
    const { chosen } = encoders.get('o200k_base')!;
    let seed = 3;
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    const random = Array.from({ length: 20_000 }, () => String.fromCharCode(97 + (next() % 26))).join('');
    const repeats = ['ab'.repeat(2_000), ' '.repeat(3_000), '中文字符测试'.repeat(300)];
    const before = chosen.stats();
    for (const t of repeats) chosen.encode(t);
    const afterRepeats = chosen.stats();
    expect(afterRepeats.backtracked - before.backtracked).toBe(repeats.length);
    chosen.encode(random);
    const afterRandom = chosen.stats();
    expect(afterRandom.backtracked).toBe(afterRepeats.backtracked);
    expect(afterRandom.spliced).toBe(afterRepeats.spliced + 1);
    expect(afterRandom.spliceRefused).toBe(afterRepeats.spliceRefused);
  });

  it('refuses an unknown longPieces', () => {
    const vocab = tiktokenVocabulary(cl100k);
    expect(() => new BytePairEncoder(vocab, { longPieces: 'fast' as never })).toThrow(/longPieces/);
  });
});

describe('load-time checks', () => {
  const everyByte = Array.from({ length: 256 }, (_, b) => String.fromCharCode(b));
  const tiny = (tokens: string[], ranks: number[]): BpeVocabulary => {
    const bytes: number[] = [];
    const offsets = [0];
    for (const t of tokens) {
      for (const c of t) bytes.push(c.charCodeAt(0));
      offsets.push(bytes.length);
    }
    return { bytes: Uint8Array.from(bytes), offsets: Uint32Array.from(offsets), ranks: Uint32Array.from(ranks), pattern: '[a-z]+|[^a-z]+' };
  };
  const byteRanks = everyByte.map((_, i) => 100 + i);

  it('a token reached by merging that ranks below a token it is split into turns the encoder off; ids stay right', () => {
    // bc (400) merges first, then a + bc = abc, which ranks 5: below bc, so the rank order is not the merge order.
    const vocab = tiny([...everyByte, 'bc', 'abc', 'ab'], [...byteRanks, 400, 5, 500]);
    const encoder = new BytePairEncoder(vocab, { longPieces: 'backtrack' });
    const twin = new BytePairEncoderReference(vocab);
    expect(encoder.stats().backtracking).toBe(false);
    for (const t of ['abc'.repeat(10), `${'ab'.repeat(9)}c`, 'cabcab'.repeat(5)]) expect([...encoder.encode(t)]).toEqual([...twin.encode(t)]);
    expect(encoder.stats().backtracked).toBe(0);
  });

  it('a token no merge reaches is left out, and the encoder stays on', () => {
    // abc is a token, but no two of its bytes are: merging "abc" leaves a, b, c, so abc is never a merge result inside a longer piece.
    const vocab = tiny([...everyByte, 'abc', 'cd'], [...everyByte.map((_, i) => i), 256, 257]);
    const encoder = new BytePairEncoder(vocab, { longPieces: 'backtrack' });
    const twin = new BytePairEncoderReference(vocab);
    expect(encoder.stats().backtracking).toBe(true);
    for (const t of ['abc'.repeat(10), 'abcd'.repeat(8), `x${'abc'.repeat(7)}`]) expect([...encoder.encode(t)]).toEqual([...twin.encode(t)]);
    expect(encoder.stats().backtracked).toBe(3);
  });

  it("random vocabularies of short tokens with ranks in any order: long pieces give the twin's ids", () => {
    const alphabet = 'abcd';
    const token = fc.string({ unit: fc.constantFrom(...alphabet), minLength: 2, maxLength: 5 });
    const case_ = fc.tuple(
      fc.uniqueArray(token, { minLength: 1, maxLength: 120 }),
      fc.array(fc.constantFrom(...alphabet), { minLength: 17, maxLength: 120 }).map((a) => a.join('')),
      fc.integer({ min: 0, max: 2 ** 31 }),
      fc.boolean(),
    );
    let on = 0;
    fc.assert(
      fc.property(case_, ([tokens, t, seed, shuffled]) => {
        const all = [...everyByte, ...tokens];
        // In list order, or shuffled (then the rank order is often not the merge order and the checks turn the encoder off).
        const ranks = all.map((_, i) => i);
        let x = seed;
        for (let i = ranks.length - 1; shuffled && i > 0; i--) {
          x = (Math.imul(x, 1103515245) + 12345) >>> 0;
          const j = x % (i + 1);
          [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
        }
        const vocab = tiny(all, ranks);
        const encoder = new BytePairEncoder(vocab, { longPieces: 'backtrack' });
        if (encoder.stats().backtracking) on++;
        expect([...encoder.encode(t)]).toEqual([...new BytePairEncoderReference(vocab).encode(t)]);
      }),
      { numRuns: 200 },
    );
    // Tokens in list order rank shorter ones first, and most such vocabularies pass.
    expect(on).toBeGreaterThan(20);
  });
});
