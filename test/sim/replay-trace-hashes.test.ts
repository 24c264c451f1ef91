// Engine block hashes read from trace ids: a replay names each engine block
// of a trace prompt from its ids instead of hashing its tokens. They must
// name blocks exactly as the token hash does (equal exactly for equal
// prefixes), and an engine given them must behave as one hashing itself.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { chainedBlockHashes } from '../../sim/mocker/block-hash.js';
import { MockEngine } from '../../sim/mocker/engine.js';
import type { RequestResult } from '../../sim/mocker/sequence.js';
import { traceRequest } from '../../sim/replay/mooncake.js';
import { TRACE_NAMESPACE } from '../../sim/replay/synthetic-tokens.js';
import { traceBlockHashes } from '../../sim/replay/trace-prefixes.js';
import { promptTokens, type ReplayRequest } from '../../sim/replay/workload.js';

const TRACE_BLOCK = 24;

function prompt(ids: number[], length: number): ReplayRequest {
  return traceRequest({ id: ids.join('.') + `/${length}`, sessionId: null, arrival: { atMs: 0 }, inputLength: length, outputLength: 3 }, { hashIds: ids, blockSize: TRACE_BLOCK, namespace: TRACE_NAMESPACE });
}

/** Prompts over a few ids (so they share prefixes often), each cut somewhere in its last trace block. */
const prompts = fc.array(
  fc.tuple(fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 5 }), fc.integer({ min: 1, max: TRACE_BLOCK })).map(([ids, cut]) => prompt(ids, (ids.length - 1) * TRACE_BLOCK + cut)),
  { minLength: 2, maxLength: 12 },
);

describe('engine block hashes from trace ids', () => {
  it('are equal exactly where the token hashes are, at block sizes that divide the trace block and ones that do not', () => {
    fc.assert(
      fc.property(prompts, fc.constantFrom(4, 8, 7, 30), (requests, blockSize) => {
        const fromIds = requests.map((r) => traceBlockHashes(r.trace!, r.inputLength, blockSize));
        const fromTokens = requests.map((r) => chainedBlockHashes(promptTokens(r), blockSize));
        for (let a = 0; a < requests.length; a++) {
          expect(fromIds[a]!.length).toBe(fromTokens[a]!.length);
          for (let b = 0; b < requests.length; b++) {
            for (let j = 0; j < Math.min(fromIds[a]!.length, fromIds[b]!.length); j++) {
              expect(fromIds[a]![j] === fromIds[b]![j]).toBe(fromTokens[a]![j] === fromTokens[b]![j]);
            }
          }
        }
      }),
    );
  });

  it('an engine given them serves the same requests exactly as one hashing the tokens itself', () => {
    const requests = [[1, 2, 3], [1, 2, 4], [1, 2, 3, 5], [6], [1, 2, 3]].map((ids, i) => prompt(ids, ids.length * TRACE_BLOCK - i));
    const serve = (withHashes: boolean) => {
      const clock = new VirtualClock(0);
      const engine = new MockEngine({ clock, blockSize: 8, numBlocks: 24, hashBlocks: chainedBlockHashes, onEvents: () => {} });
      const results: RequestResult[] = [];
      requests.forEach((r, i) =>
        clock.at(i * 5, () =>
          engine.submit({
            id: r.id,
            tokens: promptTokens(r),
            maxTokens: 3,
            blockHashes: withHashes ? traceBlockHashes(r.trace!, r.inputLength, 8) : undefined,
            onComplete: (result) => results.push(result),
          }),
        ),
      );
      clock.runAll();
      return { results, stats: engine.stats() };
    };
    const mine = serve(true);
    const own = serve(false);
    expect(mine.results.map((r) => [r.id, r.cachedTokens, r.tokenTimesMs])).toEqual(own.results.map((r) => [r.id, r.cachedTokens, r.tokenTimesMs]));
    expect(mine.stats).toEqual(own.stats);
    // The cache is small enough to evict, and the last prompt repeats the first: reuse and eviction both happened.
    expect(own.stats.prefixHitTokens).toBeGreaterThan(0);
  });

  it('the engine refuses block hashes that do not cover the prompt full blocks', () => {
    const engine = new MockEngine({ clock: new VirtualClock(0), blockSize: 8 });
    const r = prompt([1, 2], 40);
    expect(() => engine.submit({ id: 'x', tokens: promptTokens(r), maxTokens: 1, blockHashes: traceBlockHashes(r.trace!, 40, 16) })).toThrow(/blockHashes has 2 hashes for 5 full blocks/);
  });
});
