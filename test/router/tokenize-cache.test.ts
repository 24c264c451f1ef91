// The building blocks of incremental tokenization: the bounded text cache
// (fingerprint buckets confirmed by exact comparison, LRU by weight) and the
// special-token splitter (leftmost-longest, HF lstrip/rstrip rules).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fingerprint, TextCache } from '../../router/tokenize/piece-cache.js';
import { SpecialSplitter } from '../../router/tokenize/special-split.js';

describe('TextCache', () => {
  it('texts that share a fingerprint keep their own values', () => {
    // 2,000 characters: every 7th is sampled, so changing character 1 keeps the fingerprint
    const a = `x${'a'.repeat(1999)}`;
    const b = `xb${'a'.repeat(1998)}`;
    expect(fingerprint(a)).toBe(fingerprint(b));
    const cache = new TextCache<number>(100, () => 1);
    cache.set(a, 1);
    cache.set(b, 2);
    expect(cache.get(a)).toBe(1);
    expect(cache.get(b)).toBe(2);
    expect(cache.get(`xc${'a'.repeat(1998)}`)).toBeUndefined();
  });

  it('a text hit a moment ago is found again only while it is cached: replaced, cleared or dropped from its bucket, it is gone', () => {
    const cache = new TextCache<number>(3, () => 1);
    cache.set('system prompt', 1);
    expect(cache.get('system prompt')).toBe(1);
    cache.set('system prompt', 2); // replaced
    expect(cache.get('system prompt')).toBe(2);
    expect(cache.get('system prompt', 'tagged')).toBeUndefined();
    cache.clear();
    expect(cache.get('system prompt')).toBeUndefined();
    // A text dropped from a full bucket (texts sharing a fingerprint, see above).
    const big = new TextCache<number>(100, () => 1);
    const twin = (c: string) => `x${c}${'a'.repeat(1998)}`;
    big.set(twin('b'), 1);
    expect(big.get(twin('b'))).toBe(1);
    for (const c of 'cdef') big.set(twin(c), 2);
    expect(big.get(twin('b'))).toBeUndefined();
    expect(big.get(twin('f'))).toBe(2);
  });

  it('a tag qualifies the text', () => {
    const cache = new TextCache<string>(100, () => 1);
    cache.set('ok', 'as user', 'user');
    cache.set('ok', 'as assistant', 'assistant');
    expect(cache.get('ok', 'user')).toBe('as user');
    expect(cache.get('ok', 'assistant')).toBe('as assistant');
    expect(cache.get('ok')).toBeUndefined();
  });

  it('every character of a short text counts: templated texts that differ in a few characters get their own buckets', () => {
    const texts = Array.from({ length: 1000 }, (_, i) => `<|im_start|>user\nCustomer ${i} asks: do you have a cordless drill with two batteries, a case and a charger, and can it be delivered to the shop on the corner by Friday morning?<|im_end|>\n`);
    expect(new Set(texts.map(fingerprint)).size).toBe(texts.length);
  });

  it('keeps a text hit between a stream of texts seen once, within its bound', () => {
    const cache = new TextCache<number[]>(40, (v) => v.length);
    cache.set('hot', [1, 2, 3, 4]);
    for (let i = 0; i < 200; i++) {
      expect(cache.get('hot')).toEqual([1, 2, 3, 4]);
      cache.set(`once ${i}`, [i, i, i, i]);
      expect(cache.weight).toBeLessThanOrEqual(40);
    }
    expect(cache.get('once 0')).toBeUndefined();
    expect(cache.get('once 199')).toEqual([199, 199, 199, 199]);
  });

  it('stays within its weight bound, evicting what was not hit since the hand last passed', () => {
    const cache = new TextCache<number[]>(10, (v) => v.length);
    cache.set('a', [1, 2, 3, 4]);
    cache.set('b', [1, 2, 3, 4]);
    expect(cache.get('a')).toBeDefined(); // a is now more recent than b
    cache.set('c', [1, 2, 3, 4]);
    expect(cache.weight).toBe(8);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBeDefined();
    expect(cache.get('c')).toBeDefined();
  });

  it('replacing a text keeps one entry and its weight exact', () => {
    const cache = new TextCache<number[]>(10, (v) => v.length);
    cache.set('a', [1, 2]);
    cache.set('a', [1, 2, 3]);
    expect(cache.weight).toBe(3);
    expect(cache.get('a')).toEqual([1, 2, 3]);
  });

  it('counts hits and misses; a lookup under any bound finds only what was stored', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ maxLength: 300 }), fc.boolean()), { maxLength: 60 }), fc.integer({ min: 0, max: 400 }), (ops, capacity) => {
        const cache = new TextCache<string>(capacity, (v) => v.length + 1);
        const stored = new Map<string, string>();
        let lookups = 0;
        for (const [text, write] of ops) {
          if (write) {
            cache.set(text, `v:${text}`);
            stored.set(text, `v:${text}`);
          } else {
            lookups++;
            const got = cache.get(text);
            if (got !== undefined) expect(got).toBe(stored.get(text));
          }
          expect(cache.weight).toBeLessThanOrEqual(capacity);
        }
        expect(cache.hits + cache.misses).toBe(lookups);
      }),
    );
  });

  it('a set right after a miss files the text under its own key, whatever was missed (texts and tags drawn from a few, so they recur)', () => {
    const texts = ['a', 'b', 'x'.repeat(600), 'x'.repeat(599) + 'y', 'ab'];
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(texts.length - 1), fc.constantFrom('', 't', 'u'), fc.boolean()), { maxLength: 80 }), (ops) => {
        const cache = new TextCache<string>(1e6, () => 1);
        const stored = new Map<string, string>();
        for (const [i, tag, write] of ops) {
          const text = texts[i]!;
          if (write) {
            cache.set(text, `${tag}:${text}`, tag);
            stored.set(`${tag}\u0000${text}`, `${tag}:${text}`);
          } else expect(cache.get(text, tag)).toBe(stored.get(`${tag}\u0000${text}`));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('rejects a negative capacity', () => {
    expect(() => new TextCache<number>(-1, () => 1)).toThrow(RangeError);
  });
});

describe('SpecialSplitter', () => {
  it('takes the longest special token at the leftmost position', () => {
    const s = new SpecialSplitter([
      { content: '<a>', id: 1 },
      { content: '<a><b>', id: 2 },
      { content: '<b>', id: 3 },
    ]);
    expect(s.split('x<a><b>y<a>z<b>')).toEqual(['x', 2, 'y', 1, 'z', 3]);
    expect(s.split('')).toEqual([]);
    expect(s.split('<a><a>')).toEqual([1, 1]);
  });

  it('lstrip trims whitespace before a token, rstrip after it, as Hugging Face added tokens do', () => {
    const s = new SpecialSplitter([
      { content: '[L]', id: 1, lstrip: true },
      { content: '[R]', id: 2, rstrip: true },
    ]);
    expect(s.split('a  [L]  b')).toEqual(['a', 1, '  b']);
    expect(s.split('a  [R]  b')).toEqual(['a  ', 2, 'b']);
    expect(s.split('  [R]   [L]  ')).toEqual(['  ', 2, 1, '  ']);
  });

  it('a part may be tokenized alone only when it starts with a special token that strips nothing before it', () => {
    const s = new SpecialSplitter([
      { content: '<|im_start|>', id: 1 },
      { content: '[L]', id: 2, lstrip: true },
    ]);
    expect(s.overlaps).toBe(false);
    expect(s.startsWithSpecial('<|im_start|>user')).toBe(true);
    expect(s.startsWithSpecial('user<|im_start|>')).toBe(false);
    expect(s.startsWithSpecial('[L]x')).toBe(false);
    // Without lstrip tokens: any token at the start, and only at the start.
    const plain = new SpecialSplitter([
      { content: '<|im_start|>', id: 1 },
      { content: '<|im_end|>', id: 2 },
    ]);
    expect(plain.startsWithSpecial('<|im_end|>\n')).toBe(true);
    expect(plain.startsWithSpecial('<|im_start|>user')).toBe(true);
    expect(plain.startsWithSpecial(' <|im_start|>user')).toBe(false);
    expect(plain.startsWithSpecial('')).toBe(false);
    // "ab" then "b>": a match starting in one part could run into the next
    const overlapping = new SpecialSplitter([
      { content: '<ab', id: 1 },
      { content: 'b>', id: 2 },
    ]);
    expect(overlapping.overlaps).toBe(true);
    expect(overlapping.startsWithSpecial('b>x')).toBe(false);
  });
});
