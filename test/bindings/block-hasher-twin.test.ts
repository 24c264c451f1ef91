// Differential tests: the wasm BlockHasher and its pure-TS twin on the same
// random prompts, block sizes, seeds, LoRA names and cache salts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockHasher, seedFor } from '../../bindings/block-hasher.js';
import { BlockHasher as TwinBlockHasher } from '../../bindings/reference/block-hasher.js';

const U64_MAX = (1n << 64n) - 1n;
const wasm = new BlockHasher();
const twin = new TwinBlockHasher();

const token = fc.integer({ min: 0, max: 0xffffffff });
const smallVocabularyToken = fc.integer({ min: 0, max: 200 });
const name = fc.option(fc.oneof(fc.constant(''), fc.string({ unit: 'binary', maxLength: 40 })), { nil: undefined });
const requestSeed = fc
  .record({ seed: fc.option(fc.bigInt(0n, U64_MAX), { nil: undefined }), lora: name, salt: name })
  .map((options) => seedFor(options));

/** Block sizes around every XXH3 length class for 4-byte tokens: 1, 2-4, 5-32, 33-60, 61+ (long path). */
const blockSize = fc.oneof(
  fc.integer({ min: 1, max: 4 }),
  fc.integer({ min: 5, max: 60 }),
  fc.constantFrom(16, 32, 60, 61, 64, 128),
);

describe('BlockHasher vs its twin', () => {
  it('localHashes and sequenceHashes agree on random prompts, block sizes and seeds (lora, salt)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(token, smallVocabularyToken), { maxLength: 700, size: 'max' }),
        blockSize,
        requestSeed,
        (tokens, size, seed) => {
          const local = wasm.localHashes(tokens, size, seed);
          expect([...local]).toEqual([...twin.localHashes(tokens, size, seed)]);
          expect([...wasm.sequenceHashes(local, seed)]).toEqual([...twin.sequenceHashes(local, seed)]);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('hashInto views agree with the twin, chained (both lists in one pass) or not, long blocks with and without a scramble included', () => {
    // 61-256 tokens take the one-pass long path with the secret derived once; 257+ scramble.
    const anySize = fc.oneof(blockSize, fc.integer({ min: 61, max: 256 }), fc.constantFrom(255, 256, 257, 300));
    fc.assert(
      fc.property(fc.uint32Array({ maxLength: 2000, size: 'max' }), anySize, requestSeed, fc.boolean(), (tokens, size, seed, chained) => {
        wasm.tokenView(tokens.length).set(tokens);
        twin.tokenView(tokens.length).set(tokens);
        const count = wasm.hashInto(tokens.length, size, seed, chained);
        expect(twin.hashInto(tokens.length, size, seed, chained)).toBe(count);
        expect([...wasm.localView(count)]).toEqual([...twin.localView(count)]);
        if (chained) expect([...wasm.sequenceView(count)]).toEqual([...twin.sequenceView(count)]);
      }),
      { numRuns: 100 },
    );
  });

  it('agrees on block sizes over 256 tokens (long inputs with scrambled 1 KiB blocks)', () => {
    fc.assert(
      fc.property(fc.uint32Array({ minLength: 1000, maxLength: 3000, size: 'max' }), fc.integer({ min: 257, max: 1000 }), requestSeed, (tokens, size, seed) => {
        expect([...wasm.localHashes(tokens, size, seed)]).toEqual([...twin.localHashes(tokens, size, seed)]);
      }),
      { numRuns: 20 },
    );
  });

  it('raw xxh3 agrees on random bytes and seeds', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 1500, size: 'max' }), fc.bigInt(0n, U64_MAX), (bytes, seed) => {
        expect(wasm.xxh3(bytes, seed)).toBe(twin.xxh3(bytes, seed));
      }),
      { numRuns: 200 },
    );
  });

  it('rejects the same bad tokens with the same error', () => {
    const bad = fc.constantFrom<unknown>(-1, 2 ** 32, 1.5, NaN, Infinity, '7', null, undefined, 3n);
    fc.assert(
      fc.property(fc.array(smallVocabularyToken, { maxLength: 50 }), bad, fc.nat(), blockSize, (tokens, value, at, size) => {
        const prompt: unknown[] = [...tokens];
        prompt.splice(at % (prompt.length + 1), 0, value);
        const run = (hasher: BlockHasher | TwinBlockHasher) => {
          try {
            hasher.localHashes(prompt as number[], size);
          } catch (err) {
            return `${(err as Error).name}: ${(err as Error).message}`;
          }
          return 'no error';
        };
        const error = run(wasm);
        expect(error).toMatch(/^(RangeError|TypeError): tokens\[\d+\]/);
        expect(run(twin)).toBe(error);
      }),
      { numRuns: 100 },
    );
  });
});
