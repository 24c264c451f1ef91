// The model fleet's side of the index failure path: a batch the index cannot
// apply comes back as the IndexFailure (the rest of the router goes on), a
// batch for a worker no longer registered too, and a request booked on an
// approximate-mode worker is not failed by an index without memory.
import { describe, expect, it } from 'vitest';
import { IndexFailure } from '../../bindings/prefix-index-api.js';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { ModelFleet, plainFields } from '../../router/model-fleet.js';

const BS = 4;
const prompt = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function stored(tokens: number[], tag: bigint): KvEventBatch {
  const blockHashes = Array.from({ length: tokens.length / BS }, (_, i) => tag + BigInt(i));
  return { ts: 0, dpRank: 0, events: [{ type: 'stored', blockHashes, parentBlockHash: null, tokenIds: tokens, blockSize: BS, loraName: null, medium: 'GPU' }] };
}

function setup() {
  const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 1 });
  p.addWorker({ id: 'a', totalBlocks: 1000, maxBatchedTokens: 8192 });
  p.addWorker({ id: 'b', totalBlocks: 1000, maxBatchedTokens: 8192 });
  p.addWorker({ id: 'r', totalBlocks: 1000, maxBatchedTokens: 8192, kvEvents: false });
  const failNext = () => p.core!.kernel<{ coreFailAllocation(after: number, trap: boolean): void }>().coreFailAllocation(0, false);
  const overlap = (worker: string, tokens: number[]) => p.explain(p.prepare(plainFields('x'), tokens)).workers.find((w) => w.worker === worker)!.overlapBlocks;
  return { p, failNext, overlap };
}

describe('ModelFleet when the index cannot apply events', () => {
  it('returns the IndexFailure of a batch the index had no memory for; the worker is cleared, the others keep theirs', () => {
    const { p, failNext, overlap } = setup();
    expect(p.applyEvents({ id: 'a', rank: 0 }, stored(prompt(16), 100n))).toBeNull();
    expect(p.applyEvents({ id: 'b', rank: 0 }, stored(prompt(8, 500), 200n))).toBeNull();
    failNext();
    // a's first block is shared with b: b's first shared member set needs memory.
    const failure = p.applyEvents({ id: 'b', rank: 0 }, stored(prompt(16), 300n));
    expect(failure).toBeInstanceOf(IndexFailure);
    expect(failure!.workers).toEqual([{ id: 'b', rank: 0 }]);
    expect(overlap('a', prompt(16))).toBe(4);
    expect(overlap('b', prompt(8, 500))).toBe(0);
    expect(p.indexStats().allocationFailures).toBe(1);
    // The stream goes on from the cleared state.
    expect(p.applyEvents({ id: 'b', rank: 0 }, stored(prompt(8, 500), 200n))).toBeNull();
    expect(overlap('b', prompt(8, 500))).toBe(2);
  });

  it('answers a batch for a worker no longer registered with an IndexFailure, and takes a stale mark for it quietly', () => {
    const { p } = setup();
    p.removeWorker('a');
    const failure = p.applyEvents({ id: 'a', rank: 0 }, stored(prompt(8), 100n));
    expect(failure).toMatchObject({ kind: 'unknown-worker', workers: [{ id: 'a', rank: 0 }] });
    expect(() => p.markStale({ id: 'a', rank: 0 })).not.toThrow();
    expect(p.indexStats().blocks).toBe(0);
  });

  it('books a request on an approximate-mode worker even when the index has no memory for its routed blocks', () => {
    const { p, failNext } = setup();
    const request = p.prepare(plainFields('q', { pin: { id: 'r', rank: 0 } }), prompt(64));
    failNext();
    const admitted = p.admit(request, null, null, null, []);
    expect(RouterError.is(admitted)).toBe(false);
    expect(p.bookedRequests).toBe(1);
    expect(p.indexStats()).toMatchObject({ allocationFailures: 1, routedBlocks: 0 });
  });
});
