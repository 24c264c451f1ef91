// A model fleet's headroom for a class (live workers not busy under its
// thresholds) and busyFor (this worker serves and is busy under them), which
// the scheduler's wake rule reads on capacity changes: they agree with the
// capacity check of a request pinned to each worker, on the
// wasm core (a running count per view, views opened and evicted as thresholds
// come and go) and on the twins, through joins, leaves, drains, ejections,
// bookings, first tokens and frees.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BusyThresholds } from '../../bindings/selection-contract.js';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelFleet, plainFields } from '../../router/model-fleet.js';

const IDS = ['a', 'b', 'c', 'd', 'e'];
/** More threshold sets than the core keeps views open (8), so views are evicted and opened again. */
const THRESHOLDS: BusyThresholds[] = [
  { prefillTokens: 100 },
  { prefillTokens: 300 },
  { prefillTokens: 600, decodeFraction: 0.5 },
  { decodeFraction: 0.2 },
  { decodeFraction: 0.05 },
  { prefillFraction: 0.25 },
  { prefillFraction: 0.5, decodeFraction: 0.3 },
  { prefillTokens: 50, prefillFraction: 0.1 },
  { prefillTokens: 1000 },
  { decodeFraction: 0.9, prefillTokens: 200 },
];

type Op =
  | { kind: 'add'; id: number; ranks: number; blocks: number; batch: number }
  | { kind: 'remove' | 'drain' | 'undrain' | 'eject' | 'readmit'; id: number }
  | { kind: 'book'; tokens: number; worker: number | null }
  | { kind: 'first' | 'free'; pick: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('add' as const), id: fc.nat(IDS.length - 1), ranks: fc.integer({ min: 1, max: 2 }), blocks: fc.integer({ min: 8, max: 64 }), batch: fc.integer({ min: 128, max: 2048 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('remove' as const, 'drain' as const, 'undrain' as const, 'eject' as const, 'readmit' as const), id: fc.nat(IDS.length - 1) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('book' as const), tokens: fc.integer({ min: 1, max: 500 }), worker: fc.option(fc.nat(9), { freq: 3 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constantFrom('first' as const, 'free' as const), pick: fc.nat() }) },
);

/** One model fleet fed the operations; `live` holds the requests booked on it. */
class Fleet {
  readonly p: ModelFleet;
  readonly live: string[] = [];
  private n = 0;

  constructor(kernels: 'wasm' | 'reference') {
    this.p = new ModelFleet({ model: 'm', blockSize: 16, clock: new VirtualClock(0), seed: 5, kernels, fastPathBusy: THRESHOLDS[0] });
  }

  apply(o: Op): void {
    const p = this.p;
    const id = 'id' in o ? IDS[o.id]! : '';
    switch (o.kind) {
      case 'add':
        if (!p.hasWorker(id)) p.addWorker({ id, dataParallelSize: o.ranks, totalBlocks: o.blocks, maxBatchedTokens: o.batch, kvEvents: false });
        return;
      case 'remove':
        for (const gone of p.removeWorker(id)) {
          const at = this.live.indexOf(gone);
          if (at >= 0) this.live.splice(at, 1);
        }
        return;
      case 'drain':
      case 'undrain':
        if (p.hasWorker(id)) p.setDraining(id, o.kind === 'drain');
        return;
      case 'eject':
      case 'readmit':
        if (p.hasWorker(id)) p.setEjected(id, o.kind === 'eject');
        return;
      case 'book': {
        const keys = [...p.workers.entries()].map(([, k]) => k);
        if (keys.length === 0) return;
        const requestId = `r${this.n++}`;
        const request = p.prepare(plainFields(requestId), Array.from({ length: o.tokens }, (_, i) => (this.n * 97 + i) % 30_000));
        if (o.worker !== null) p.book(request, keys[o.worker % keys.length]!, 0);
        else if (RouterError.is(p.admit(request, null, null, null, []))) return;
        this.live.push(requestId);
        return;
      }
      case 'first':
      case 'free': {
        if (this.live.length === 0) return;
        const at = o.pick % this.live.length;
        if (o.kind === 'first') p.firstToken(this.live[at]!);
        else p.release(this.live.splice(at, 1)[0]!);
        return;
      }
    }
  }

  /** What a request pinned to each worker finds (free, busy or none), in slot order. */
  pinned(busy: BusyThresholds): string[] {
    return [...this.p.workers.entries()].map(([, key]) => this.p.capacity(this.p.prepare(plainFields(`probe${this.n++}`, { pin: key }), [1, 2, 3]), null, busy));
  }

  /** headroom and busyFor in the same terms. */
  read(busy: BusyThresholds): { headroom: number; busy: boolean[] } {
    return { headroom: this.p.headroom(busy), busy: [...this.p.workers.entries()].map(([, key]) => this.p.busyFor(key, busy)) };
  }
}

describe('ModelFleet.headroom and busyFor', () => {
  it('agree with what a request pinned to each worker finds, for every class thresholds, on the core and on the twins', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 10, maxLength: 120 }), fc.array(fc.nat(THRESHOLDS.length - 1), { minLength: 1, maxLength: 6 }), (ops, asked) => {
        const wasm = new Fleet('wasm');
        const twin = new Fleet('reference');
        for (const [i, o] of ops.entries()) {
          wasm.apply(o);
          twin.apply(o);
          // Ask a few thresholds each step, in a changing order, so views open and close between changes.
          const busy = THRESHOLDS[asked[i % asked.length]!]!;
          const pinned = wasm.pinned(busy);
          const expected = { headroom: pinned.filter((v) => v === 'free').length, busy: pinned.map((v) => v === 'busy') };
          expect(wasm.read(busy)).toEqual(expected);
          expect(twin.read(busy)).toEqual(expected);
        }
        for (const busy of THRESHOLDS) expect(wasm.read(busy).headroom).toBe(wasm.pinned(busy).filter((v) => v === 'free').length);
      }),
      { numRuns: 60 },
    );
  });

  it('counts a worker that is busy, draining or ejected as no headroom', () => {
    const p = new ModelFleet({ model: 'm', blockSize: 16, clock: new VirtualClock(0), seed: 1, fastPathBusy: { prefillTokens: 100 } });
    for (const id of ['a', 'b', 'c', 'd']) p.addWorker({ id, totalBlocks: 64, maxBatchedTokens: 1024 });
    const busy = { prefillTokens: 100 };
    expect(p.headroom(busy)).toBe(4);
    p.book(p.prepare(plainFields('big'), Array.from({ length: 200 }, (_, i) => i)), { id: 'a', rank: 0 }, 0);
    p.setDraining('b', true);
    p.setEjected('c', true);
    expect(p.headroom(busy)).toBe(1);
    expect(p.headroom({ prefillTokens: 500 })).toBe(2);
    // Only a serving worker over the thresholds is busy; a draining, ejected or unknown one is not.
    expect(['a', 'b', 'c', 'd', 'x'].map((id) => p.busyFor({ id, rank: 0 }, busy))).toEqual([true, false, false, false, false]);
    p.firstToken('big');
    expect(p.headroom(busy)).toBe(2);
    expect(p.busyFor({ id: 'a', rank: 0 }, busy)).toBe(false);
  });
});
