// Byte-pair encoding on the wasm core against its pure-TS twin and against
// js-tiktoken (the tokenizer the router used before, and the reference for
// tiktoken's ids): random strings of every kind, long runs that take the heap
// and the windowed path, windows shrunk so cuts and their checks happen on
// short pieces, spliced windows (tight ones, where cuts fail their check and
// windows are merged again wider, and vocabularies built so a piece must be
// refused), and vocabularies the core must refuse.
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
  /** The same kernel, long pieces all by the heap with tiny windows: every long piece is cut, checked, and sometimes merged again wider. */
  windowed: BytePairEncoder;
  /** The same kernel, long pieces all by the backtracking encoder. */
  backtracking: BytePairEncoder;
  /** The same kernel, long pieces all in spliced windows. */
  spliced: BytePairEncoder;
  /** Spliced windows of 6 bytes with 1 of context: cuts often fail their check, windows are merged again wider, pieces refused. */
  splicedTight: BytePairEncoder;
  twin: BytePairEncoderReference;
  oracle: Tiktoken;
}

const encoders = new Map<string, Encoders>();

beforeAll(() => {
  for (const [name, ranks] of ENCODINGS) {
    const vocab = tiktokenVocabulary(ranks);
    encoders.set(name, {
      kernel: new BytePairEncoder(vocab),
      windowed: new BytePairEncoder(vocab, { window: { bytes: 12, margin: 3 }, longPieces: 'heap' }),
      backtracking: new BytePairEncoder(vocab, { longPieces: 'backtrack' }),
      spliced: new BytePairEncoder(vocab, { longPieces: 'splice' }),
      splicedTight: new BytePairEncoder(vocab, { longPieces: 'splice', splice: { bytes: 6, context: 1 } }),
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

/** A vocabulary of `tokens` (one byte per character), ranked by `ranks` or in order, pieces cut at whitespace. */
const tiny = (tokens: string[], ranks?: number[]): BpeVocabulary => {
  const bytes: number[] = [];
  const offsets = [0];
  for (const t of tokens) {
    for (const c of t) bytes.push(c.charCodeAt(0));
    offsets.push(bytes.length);
  }
  return { bytes: Uint8Array.from(bytes), offsets: Uint32Array.from(offsets), ranks: Uint32Array.from(ranks ?? tokens.map((_, i) => i)), pattern: '\\S+|\\s+' };
};
/** The 256 single-byte tokens. */
const everyByte = Array.from({ length: 256 }, (_, b) => String.fromCharCode(b));

describe.each(ENCODINGS.map(([name]) => name))('%s', (name) => {
  it('the kernel, its twin and js-tiktoken give the same ids', () => {
    const { kernel, windowed, backtracking, spliced, splicedTight, twin, oracle } = encoders.get(name)!;
    fc.assert(
      fc.property(text, (t) => {
        const expected = oracle.encode(t, [], []);
        expect([...twin.encode(t)]).toEqual(expected);
        expect([...kernel.encode(t)]).toEqual(expected);
        expect([...windowed.encode(t)]).toEqual(expected);
        expect([...backtracking.encode(t)]).toEqual(expected);
        expect([...spliced.encode(t)]).toEqual(expected);
        expect([...splicedTight.encode(t)]).toEqual(expected);
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

  it('pieces far longer than the twin can check give the same ids with default heap windows, spliced windows and the chosen way as merged in one run', () => {
    const { kernel, spliced } = encoders.get('o200k_base')!;
    const vocab = tiktokenVocabulary(o200k);
    const heap = new BytePairEncoder(vocab, { longPieces: 'heap' });
    const single = new BytePairEncoder(vocab, { window: { bytes: 1 << 24, margin: 0 }, longPieces: 'heap' });
    let seed = 7;
    const letter = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return String.fromCharCode(97 + (seed % 26));
    };
    const random = Array.from({ length: 60_000 }, letter).join('');
    const before = { heap: heap.stats(), spliced: spliced.stats(), kernel: kernel.stats() };
    for (const t of [random, 'ab'.repeat(40_000), ' '.repeat(70_000), '中文字符'.repeat(9_000), `${'a'.repeat(30_000)}b${'a'.repeat(30_000)}`]) {
      const expected = single.encode(t);
      expect(heap.encode(t)).toEqual(expected);
      expect(spliced.encode(t)).toEqual(expected);
      expect(kernel.encode(t)).toEqual(expected);
    }
    expect(heap.stats().windows).toBeGreaterThan(before.heap.windows);
    expect(spliced.stats().spliced).toBeGreaterThan(before.spliced.spliced);
    // Random letters (many distinct byte pairs) take the spliced windows by the chosen way.
    expect(kernel.stats().spliced).toBeGreaterThan(before.kernel.spliced);
  });
});

describe('spliced windows', () => {
  it('tight windows: cuts fail their check, windows are merged again wider, pieces are refused, and the ids stay those of js-tiktoken', () => {
    const { splicedTight, oracle } = encoders.get('o200k_base')!;
    const before = splicedTight.stats();
    let seed = 11;
    const pick = (chars: string) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return chars[seed % chars.length]!;
    };
    const texts = [
      Array.from({ length: 3000 }, () => pick('abcdefghijklmnopqrstuvwxyz')).join(''),
      Array.from({ length: 2000 }, () => pick('aab')).join(''),
      'aab'.repeat(300),
      ' '.repeat(400),
      '中文字符'.repeat(100),
    ];
    for (const t of texts) expect([...splicedTight.encode(t)]).toEqual(oracle.encode(t, [], []));
    const after = splicedTight.stats();
    expect(after.spliced).toBeGreaterThan(before.spliced);
    expect(after.spliceWidenings).toBeGreaterThan(before.spliceWidenings);
    expect(after.spliceRefused).toBeGreaterThan(before.spliceRefused);
  });

  // Tokens a^k x of rank k - 1 (k = 1..longest), 'aa' ranked after them all: in a^n x the
  // token ending in x grows leftwards to a^longest x before any 'aa' merges, so a window that
  // ends short of the x is wrong about its last tokens however much context it has.
  const growing = (longest: number): BpeVocabulary =>
    tiny(
      [...everyByte, ...Array.from({ length: longest }, (_, k) => `${'a'.repeat(k + 1)}x`), 'aa'],
      [...everyByte.map((_, b) => 1000 + b), ...Array.from({ length: longest }, (_, k) => k), 500],
    );
  /** The ids of a^n x under `growing(longest)`: 'aa' pairs from the left, a lone 'a' if one is left, then a^longest x. */
  const grown = (n: number, longest: number): number[] => {
    const rest = n - Math.min(n, longest);
    return [...Array<number>(rest >> 1).fill(500), ...(rest & 1 ? [1000 + 97] : []), Math.min(n, longest) - 1];
  };

  it('a cut the next window proves wrong is merged again wider, and the ids are exact', () => {
    const vocab = growing(40);
    const encoder = new BytePairEncoder(vocab, { longPieces: 'splice' });
    for (const n of [201, 202, 300]) {
      const t = `${'a'.repeat(n)}x`;
      const before = encoder.stats();
      expect([...encoder.encode(t)]).toEqual(grown(n, 40));
      expect([...new BytePairEncoderReference(vocab).encode(t)]).toEqual(grown(n, 40));
      const after = encoder.stats();
      expect(after.spliceWidenings).toBeGreaterThan(before.spliceWidenings);
      expect(after.spliced).toBe(before.spliced + 1);
      expect(after.spliceRefused).toBe(before.spliceRefused);
    }
  });

  it('a piece whose token reaches past a window merged again wider is refused and merged by the heap, with the same ids', () => {
    const vocab = growing(200);
    const encoder = new BytePairEncoder(vocab, { longPieces: 'splice', splice: { bytes: 16, context: 4 } });
    for (const n of [300, 301]) {
      const t = `${'a'.repeat(n)}x`;
      const before = encoder.stats();
      expect([...encoder.encode(t)]).toEqual(grown(n, 200));
      const after = encoder.stats();
      expect(after.spliceRefused).toBe(before.spliceRefused + 1);
      expect(after.spliced).toBe(before.spliced);
    }
  });

  it('ranks too high for the window keys: pieces take the scan and the heap, with the ids of the same vocabulary ranked low', () => {
    // Windows key a pair by rank << 9 | position; a rank of 2^23 - 1 or more would overflow that.
    const tokens = [...everyByte, 'ab', 'ba', 'aa', 'bb', 'aab', 'abb', 'abab', 'baba', 'aaaa', 'abba'];
    const order = tokens.map((_, i) => (i * 7919) % tokens.length);
    const low = tiny(tokens, order);
    const high = tiny(tokens, order.map((r) => r + 2 ** 30));
    const lowEncoder = new BytePairEncoder(low, { longPieces: 'splice' });
    const highEncoder = new BytePairEncoder(high, { longPieces: 'splice' });
    const before = { low: lowEncoder.stats(), high: highEncoder.stats() };
    const piece = fc.string({ unit: fc.constantFrom('a', 'b'), minLength: 1, maxLength: 120, size: 'max' });
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 6 }), (pieces) => {
        const t = pieces.join(' ');
        const expected = [...new BytePairEncoderReference(low).encode(t)];
        expect([...lowEncoder.encode(t)]).toEqual(expected);
        expect([...highEncoder.encode(t)]).toEqual(expected.map((r) => r + 2 ** 30));
      }),
      { numRuns: 200 },
    );
    // Over 200 runs of up to 6 pieces of up to 120 letters, long pieces come up every time.
    expect(lowEncoder.stats().spliced).toBeGreaterThan(before.low.spliced);
    expect(lowEncoder.stats().spliceRefused).toBe(before.low.spliceRefused);
    expect(highEncoder.stats().spliceRefused).toBeGreaterThan(before.high.spliceRefused);
    expect(highEncoder.stats().spliced).toBe(before.high.spliced);
  });

  it('refuses splice settings out of range', () => {
    const vocab = growing(4);
    expect(() => new BytePairEncoder(vocab, { splice: { bytes: 1, context: 0 } })).toThrow(/splice.bytes/);
    expect(() => new BytePairEncoder(vocab, { splice: { bytes: 129, context: 0 } })).toThrow(/splice.bytes/);
    expect(() => new BytePairEncoder(vocab, { splice: { bytes: 8, context: 8 } })).toThrow(/splice.context/);
  });
});

describe('token lookups', () => {
  const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

  it.each(ENCODINGS.map(([name]) => name))('%s: every 3- and 4-byte token that is text encodes as js-tiktoken encodes it', (name) => {
    // Merging finds 3- and 4-byte strings through a filter and a word table each; a token either one lost would change these ids.
    const { kernel, oracle } = encoders.get(name)!;
    const vocab = tiktokenVocabulary(ENCODINGS.find(([n]) => n === name)![1]);
    let checked = 0;
    for (let i = 0; i < vocab.ranks.length; i++) {
      const bytes = vocab.bytes.subarray(vocab.offsets[i]!, vocab.offsets[i + 1]!);
      if (bytes.length !== 3 && bytes.length !== 4) continue;
      let t: string;
      try {
        t = strictUtf8.decode(bytes);
      } catch {
        continue;
      }
      expect([...kernel.encode(t)], t).toEqual(oracle.encode(t, [], []));
      // With a byte either side, the token is no longer a whole piece and has to be merged to.
      expect([...kernel.encode(`${t}${t}`)], `${t}${t}`).toEqual(oracle.encode(`${t}${t}`, [], []));
      checked++;
    }
    // Every encoding here has thousands of them (o200k_base: over 40,000).
    expect(checked).toBeGreaterThan(5_000);
  });

  it('random vocabularies of short ASCII tokens: the kernel and its twin give the same ids', () => {
    const alphabet = 'abcdef ';
    const token = fc.string({ unit: fc.constantFrom(...alphabet), minLength: 2, maxLength: 6 });
    // Text made of the vocabulary's own tokens and stray letters, some cut apart by '|' (a piece of its
    // own), so tokens are there to be found as the result of merges.
    const case_ = fc.uniqueArray(token, { minLength: 1, maxLength: 300 }).chain((tokens) =>
      fc.tuple(
        fc.constant(tokens),
        fc.array(fc.oneof(fc.constantFrom(...tokens), fc.constantFrom(...alphabet, '|')), { maxLength: 80 }).map((parts) => parts.join('')),
        fc.integer({ min: 0, max: 2 ** 31 }),
      ),
    );
    fc.assert(
      fc.property(case_, ([tokens, t, seed]) => {
        const all = [...Array.from({ length: 256 }, (_, b) => String.fromCharCode(b)), ...tokens];
        // Ranks in an order unrelated to the tokens' lengths, as real vocabularies have.
        let x = seed;
        const ranks = all.map((_, i) => i);
        for (let i = ranks.length - 1; i > 0; i--) {
          x = (Math.imul(x, 1103515245) + 12345) >>> 0;
          const j = x % (i + 1);
          [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
        }
        const bytes: number[] = [];
        const offsets = [0];
        for (const a of all) {
          for (const c of a) bytes.push(c.charCodeAt(0));
          offsets.push(bytes.length);
        }
        const vocab: BpeVocabulary = { bytes: Uint8Array.from(bytes), offsets: Uint32Array.from(offsets), ranks: Uint32Array.from(ranks), pattern: '[a-f ]+|[^a-f ]+' };
        // Then every token once as a piece of its own.
        const text = `${t}|${tokens.join('|')}`;
        const expected = [...new BytePairEncoderReference(vocab).encode(text)];
        expect([...new BytePairEncoder(vocab).encode(text)]).toEqual(expected);
        // Windows of 4 bytes and no context: cuts fail their check often, against ranks in any order.
        expect([...new BytePairEncoder(vocab, { longPieces: 'splice', splice: { bytes: 4, context: 0 } }).encode(text)]).toEqual(expected);
      }),
      { numRuns: 150 },
    );
  });
});

describe('vocabulary checks', () => {
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
