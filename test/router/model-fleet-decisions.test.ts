// The decision pipeline's bookkeeping: a busy class's capacity check and its
// admission share one selection while nothing changed in between; a soft
// target is tried alone first; the kinds of constraints reach the core as the
// same decisions the twins make.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Decider } from '../../bindings/decider.js';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { ModelFleet, plainFields, type RequestFields } from '../../router/model-fleet.js';

const BS = 4;
const BUSY = { prefillTokens: 100 };
let n = 0;
const fields = (over: Partial<RequestFields> = {}) => plainFields(`q${n++}`, over);
const prompt = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function stored(tokens: number[], tag: bigint): KvEventBatch {
  const blocks = Math.floor(tokens.length / BS);
  return { ts: 0, dpRank: 0, events: [{ type: 'stored', blockHashes: Array.from({ length: blocks }, (_, i) => tag + BigInt(i)), parentBlockHash: null, tokenIds: tokens.slice(0, blocks * BS), blockSize: BS, loraName: null, medium: 'GPU' }] };
}

function setup(workers = ['a', 'b', 'c']) {
  const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 11, fastPathBusy: BUSY });
  for (const id of workers) p.addWorker({ id, totalBlocks: 1000, maxBatchedTokens: 8192 });
  return p;
}

afterEach(() => vi.restoreAllMocks());

describe('ModelFleet: one selection for a busy class', () => {
  it('the capacity check decides once, and the admission that follows books that decision', () => {
    const p = setup();
    p.applyEvents({ id: 'b', rank: 0 }, stored(prompt(16), 100n));
    const decide = vi.spyOn(Decider.prototype, 'decide');
    const r = p.prepare(fields(), prompt(16));
    expect(p.capacity(r, null, BUSY)).toBe('free');
    expect(decide).toHaveBeenCalledTimes(1);
    const admission = p.admit(r, null, BUSY, null, []);
    expect(decide).toHaveBeenCalledTimes(1);
    expect(!RouterError.is(admission) && admission.worker.id).toBe('b');
    expect(p.bookedRequests).toBe(1);
    expect(p.load().find((l) => l.worker === 'b')!.activeRequests).toBe(1);
  });

  it('decides again when the ledger, the index or the workers changed since the check', () => {
    const changes: [string, (p: ModelFleet) => void][] = [
      ['ledger', (p) => p.admit(p.prepare(fields(), prompt(8, 500)), null, BUSY, null, [])],
      ['index', (p) => p.applyEvents({ id: 'c', rank: 0 }, stored(prompt(16), 200n))],
      ['workers', (p) => p.setDraining('a', true)],
    ];
    for (const [, change] of changes) {
      const p = setup();
      const r = p.prepare(fields(), prompt(16));
      p.capacity(r, null, BUSY);
      const decide = vi.spyOn(Decider.prototype, 'decide');
      change(p);
      decide.mockClear();
      p.admit(r, null, BUSY, null, []);
      expect(decide).toHaveBeenCalledTimes(1);
      decide.mockRestore();
    }
  });

  it('a soft target is asked alone first; when it is busy the kept decision is booked', () => {
    const p = setup(['a', 'b']);
    p.applyEvents({ id: 'a', rank: 0 }, stored(prompt(16), 100n));
    // b is busy for the class: its prefill is over the threshold.
    p.admit(p.prepare(fields({ pin: { id: 'b', rank: 0 } }), prompt(200, 900)), null, null, null, []);
    const r = p.prepare(fields(), prompt(16));
    expect(p.capacity(r, null, BUSY)).toBe('free');
    const decide = vi.spyOn(Decider.prototype, 'decide');
    const admission = p.admit(r, null, BUSY, { id: 'b', rank: 0 }, []);
    expect(decide).toHaveBeenCalledTimes(1);
    expect(!RouterError.is(admission) && admission.worker.id).toBe('a');
  });

  it('another request, allowed set or class does not reuse the kept decision', () => {
    const p = setup();
    const r = p.prepare(fields(), prompt(16));
    p.capacity(r, null, BUSY);
    const decide = vi.spyOn(Decider.prototype, 'decide');
    p.admit(p.prepare(fields(), prompt(16)), null, BUSY, null, []);
    p.admit(r, [{ id: 'a', rank: 0 }], BUSY, null, []);
    expect(decide).toHaveBeenCalledTimes(2);
  });
});
