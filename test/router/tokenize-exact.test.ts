// The tiktoken:<encoding> tokenizers give exactly js-tiktoken's ids (the
// tokenizer kvrouter used before its wasm encoder) for raw prompts holding
// special tokens, long unbroken runs and arbitrary code units, whether the
// text is new, cached, or arrives in a plan finished later.
import fc from 'fast-check';
import { Tiktoken, type TiktokenBPE } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import p50k from 'js-tiktoken/ranks/p50k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { IM_END, IM_START } from '../../router/tokenize/chatml.js';
import { createTokenizer, packBytes, type PromptTokenizer } from '../../router/tokenize/index.js';
import { memoryIO } from './tokenize-arbitraries.js';

const ENCODINGS: [string, TiktokenBPE][] = [
  ['o200k_base', o200k],
  ['cl100k_base', cl100k],
  ['p50k_base', p50k],
];

const cases = new Map<string, { tok: PromptTokenizer; oracle: Tiktoken; specials: string[] }>();
beforeAll(async () => {
  for (const [name, ranks] of ENCODINGS) {
    const tok = await createTokenizer(`tiktoken:${name}`, memoryIO({}));
    const [start] = tok.encodeText(IM_START);
    const [end] = tok.encodeText(IM_END);
    const markers = { [IM_START]: start!, [IM_END]: end! };
    cases.set(name, { tok, oracle: new Tiktoken(ranks, markers), specials: [...Object.keys(ranks.special_tokens), IM_START, IM_END] });
  }
}, 60_000);

const piece = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.constantFrom('hello', ' world', "it's", '  \n\t', '1234567', '<|im', 'start|>', '<|', '|>'),
  fc.tuple(fc.constantFrom('ab', 'a', 'xq', ' ', '9', '!?', '中', '😀', 'é'), fc.integer({ min: 1, max: 300 })).map(([s, n]) => s.repeat(n)),
);

describe.each(ENCODINGS.map(([name]) => name))('tiktoken:%s', (name) => {
  it('raw prompts with special tokens give js-tiktoken ids, first and again from the cache', () => {
    const { tok, oracle, specials } = cases.get(name)!;
    fc.assert(
      fc.property(fc.array(fc.oneof(piece, fc.constantFrom(...specials)), { maxLength: 8 }), (parts) => {
        const text = parts.join('');
        const expected = oracle.encode(text, 'all');
        expect([...tok.encodeText(text)]).toEqual(expected);
        expect([...tok.encodeText(text)]).toEqual(expected);
        const plan = tok.planText(text);
        expect([...plan.run()]).toEqual(expected);
      }),
      { numRuns: 150 },
    );
  });

  it('a prompt repeating many new pieces between special tokens encodes each distinct piece once, with js-tiktoken ids', () => {
    const { tok, oracle, specials } = cases.get(name)!;
    let run = 0;
    fc.assert(
      // Up to 14 distinct pieces: deduplicated both by the short scan and by the index built past it.
      fc.property(fc.array(fc.integer({ min: 0, max: 13 }), { minLength: 1, maxLength: 40 }), fc.constantFrom(...specials), (picks, special) => {
        run++; // pieces new to the cache in every run
        const text = picks.map((k) => `piece ${run}.${k} of the prompt`).join(special);
        const plan = tok.planText(text);
        expect(plan.texts.length).toBe(new Set(picks).size);
        expect([...plan.run()]).toEqual(oracle.encode(text, 'all'));
      }),
      { numRuns: 100 },
    );
  });
});

describe('packBytes', () => {
  /** The UTF-8 bytes, 4 per id little-endian, the last id zero-padded, written out plainly. */
  const packed = (text: string) => {
    const bytes = new TextEncoder().encode(text);
    const ids: number[] = [];
    for (let i = 0; i < bytes.length; i += 4) ids.push(((bytes[i] ?? 0) | ((bytes[i + 1] ?? 0) << 8) | ((bytes[i + 2] ?? 0) << 16) | ((bytes[i + 3] ?? 0) << 24)) >>> 0);
    return ids;
  };

  it('packs long texts whose surrogate pairs, lone surrogates and multi-byte characters fall on any boundary', () => {
    fc.assert(
      fc.property(fc.integer({ min: 65_530, max: 65_540 }), fc.constantFrom('😀', '\ud800', '\udc00', 'é', '中', 'a'), fc.string({ unit: 'binary', maxLength: 20 }), (at, unit, tail) => {
        const text = 'a'.repeat(at) + unit.repeat(3) + tail + '中'.repeat(30_000);
        expect([...packBytes(text)]).toEqual(packed(text));
      }),
      { numRuns: 40 },
    );
    expect([...packBytes('')]).toEqual([]);
  });
});

describe('a message too long for the render cache', () => {
  it('is rendered whole (no segment is rendered or cached for it), with the same ids', async () => {
    // With caches this small the bound is its floor: a message over 1,048,576 characters renders whole.
    const tok = await createTokenizer('tiktoken:o200k_base', memoryIO({}), { renderCacheChars: 800 });
    const content = 'word '.repeat(220_000);
    const { oracle } = cases.get('o200k_base')!;
    const short = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello' }];
    tok.encodeChat(short);
    const misses = tok.stats().segmentMisses;
    expect(misses).toBeGreaterThan(0);
    const long = [...short, { role: 'assistant', content }, { role: 'user', content: 'and now?' }];
    expect([...tok.encodeChat(long)]).toEqual(oracle.encode(tok.renderChat(long), 'all'));
    expect(tok.stats().segmentMisses).toBe(misses);
    expect(tok.renderChat(long)).toContain(`<|im_start|>assistant\n${content}<|im_end|>`);
  });
});
