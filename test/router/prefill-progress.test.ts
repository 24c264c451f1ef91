// A worker's queued prefill under the ttft policy counts only what is left of
// it: the blocks its KV events show computed come off its oldest booking
// still in prefill, down to one engine step of it, until its first token
// (router/model-fleet/prefill-progress.ts). The kv policy, and ttft with
// prefill_progress=false, keep every booking whole until its first token.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import type { BlockStored, KvEvent, KvEventBatch } from '../../router/kv-events.js';
import { decodeKvBatch, encodeKvBatch } from '../../router/kv-wire.js';
import { WireKvBatch, readKvBatch } from '../../router/kv-wire-batch.js';
import { ModelFleet, plainFields } from '../../router/model-fleet.js';
import { computedTokens } from '../../router/model-fleet/prefill-progress.js';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';

const BS = 4;
const W = { id: 'a', rank: 0 };

function store(blocks: number, over: Partial<BlockStored> = {}): BlockStored {
  return {
    type: 'stored',
    blockHashes: Array.from({ length: blocks }, (_, i) => 9000n + BigInt(i)),
    parentBlockHash: null,
    tokenIds: Array.from({ length: blocks * BS }, (_, i) => 7000 + i),
    blockSize: BS,
    loraName: null,
    medium: 'GPU',
    ...over,
  };
}
const batch = (...events: KvEventBatch['events']): KvEventBatch => ({ ts: 0, dpRank: 0, events });

describe('computedTokens', () => {
  it('counts the GPU blocks a batch stored, at their block size', () => {
    expect(computedTokens(batch(store(3)))).toBe(12);
    expect(computedTokens(batch(store(3), store(2, { medium: null }), { type: 'removed', blockHashes: [1n], medium: 'GPU' }))).toBe(20);
    expect(computedTokens(batch(store(2, { medium: 'gpu', groupIdx: 0 })))).toBe(8);
  });

  it('not an offload tier writing through, a placeholder store, or a hybrid model other cache group', () => {
    expect(computedTokens(batch(store(3, { medium: 'CPU' })))).toBe(0);
    expect(computedTokens(batch(store(3, { blockSize: 0, tokenIds: [] })))).toBe(0);
    expect(computedTokens(batch(store(3, { groupIdx: 1 })))).toBe(0);
  });

  it('counts a batch the core scanned from its summary, decoding its events only when its stores mix block sizes', () => {
    // Device-tier events (the layout the core reads): stores of 1-3 blocks of 4 or 8 tokens, removals, clears.
    const event: fc.Arbitrary<KvEvent> = fc.oneof(
      { weight: 4, arbitrary: fc.record({ blocks: fc.integer({ min: 1, max: 3 }), size: fc.constantFrom(4, 4, 4, 8), medium: fc.constantFrom(null, 'GPU') }).map(({ blocks, size, medium }) => store(blocks, { blockSize: size, tokenIds: Array.from({ length: blocks * size }, (_, i) => 7000 + i), medium })) },
      { weight: 2, arbitrary: fc.nat(3).map((n): KvEvent => ({ type: 'removed', blockHashes: Array.from({ length: n }, (_, i) => BigInt(i + 1)), medium: 'GPU' })) },
      { weight: 1, arbitrary: fc.constant<KvEvent>({ type: 'cleared' }) },
    );
    let summarized = 0;
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), fc.constantFrom<'array' | 'map'>('array', 'map'), (events, form) => {
        const payload = encodeKvBatch({ ts: 1, dpRank: 0, events }, form);
        const wire = readKvBatch(payload);
        expect(wire).toBeInstanceOf(WireKvBatch);
        let read = false;
        Object.defineProperty(wire, 'events', { get: () => ((read = true), decodeKvBatch(payload).events) });
        const stores = events.filter((e): e is BlockStored => e.type === 'stored');
        expect(computedTokens(wire)).toBe(stores.reduce((sum, e) => sum + e.blockHashes.length * e.blockSize, 0));
        expect(read).toBe(stores.some((e) => e.blockSize !== stores[0]!.blockSize));
        if (!read) summarized++;
      }),
      { numRuns: 200 },
    );
    // Batches of 200 runs read from their summary alone: 138-171 over 50 fc.sample seeds.
    expect(summarized).toBeGreaterThan(40);
  });
});

/** Workers of a 16-token step: a 40-token prompt takes three. */
const STEP = 16;
function fleet(policy: string, params?: Record<string, unknown>) {
  const f = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 1, policy: createSelectionPolicy(policy, params) });
  f.addWorker({ id: 'a', totalBlocks: 1000, maxBatchedTokens: STEP });
  f.addWorker({ id: 'b', totalBlocks: 1000, maxBatchedTokens: STEP });
  return f;
}
let n = 0;
function admitOn(f: ModelFleet, tokens: number, worker = 'a'): string {
  const id = `q${n++}`;
  const r = f.prepare(plainFields(id), Array.from({ length: tokens }, (_, i) => 100 * n + i));
  const admission = f.admit(r, [{ id: worker, rank: 0 }], null, null, []);
  if (RouterError.is(admission)) throw admission;
  return id;
}
const prefillOn = (f: ModelFleet, worker = 'a') => f.load().find((l) => l.worker === worker)!.prefillTokens;

describe('queued prefill under the ttft policy', () => {
  it('stored blocks come off the oldest booking, down to one step of it; the next is drained once the first has its first token', () => {
    const f = fleet('ttft');
    const first = admitOn(f, 40);
    const second = admitOn(f, 20);
    admitOn(f, 30, 'b');
    expect(prefillOn(f)).toBe(60);
    f.applyEvents(W, batch(store(4)));
    expect(prefillOn(f)).toBe(44);
    // the first keeps a step (16) of its 24: 8 are taken, the rest of the blocks are no one's yet
    f.applyEvents(W, batch(store(4)));
    expect(prefillOn(f)).toBe(36);
    f.applyEvents(W, batch(store(4)));
    expect(prefillOn(f)).toBe(36);
    expect(prefillOn(f, 'b')).toBe(30);
    f.firstToken(first);
    expect(prefillOn(f)).toBe(20);
    // now the second is the oldest in prefill: down to its one step
    f.applyEvents(W, batch(store(2)));
    expect(prefillOn(f)).toBe(16);
    f.firstToken(second);
    expect(prefillOn(f)).toBe(0);
    // nobody left in prefill: a later store takes nothing
    f.applyEvents(W, batch(store(6)));
    expect(prefillOn(f)).toBe(0);
  });

  it('a prompt of one step is never drained: it counts whole until its first token', () => {
    const f = fleet('ttft');
    admitOn(f, 16);
    admitOn(f, 12);
    f.applyEvents(W, batch(store(4)));
    expect(prefillOn(f)).toBe(28);
  });

  it('a booking that ended before its first token (released) passes its place to the next', () => {
    const f = fleet('ttft');
    const first = admitOn(f, 40);
    admitOn(f, 30);
    f.release(first);
    expect(prefillOn(f)).toBe(30);
    f.applyEvents(W, batch(store(2)));
    expect(prefillOn(f)).toBe(22);
  });

  it('the kv policy, and ttft with prefill_progress=false, count each booking whole until its first token', () => {
    for (const f of [fleet('kv'), fleet('ttft', { prefill_progress: false })]) {
      admitOn(f, 40);
      f.applyEvents(W, batch(store(6)));
      expect(prefillOn(f)).toBe(40);
    }
  });

  it('a removed worker takes its line along: its old bookings are not drained on a worker added later', () => {
    const f = fleet('ttft');
    admitOn(f, 40);
    f.removeWorker('a');
    f.addWorker({ id: 'a', totalBlocks: 1000, maxBatchedTokens: STEP });
    admitOn(f, 30);
    f.applyEvents(W, batch(store(2)));
    expect(prefillOn(f)).toBe(22);
  });
});
