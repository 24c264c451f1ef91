import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Core } from '../../bindings/core.js';
import { LaneHeap, type LaneHeapApi } from '../../bindings/lane-heap.js';
import type { LaneOrder } from '../../bindings/lane-order.js';
import { ReferenceLaneHeap } from '../../bindings/reference/lane-heap.js';

const order = (tier: number, deadline: number, key: number, seq: number): LaneOrder => ({ tier, deadline, key, seq });

type Op =
  | { op: 'push'; heap: number; item: number; order: LaneOrder }
  | { op: 'update'; item: number; order: LaneOrder }
  | { op: 'remove'; item: number }
  | { op: 'pop'; heap: number };

const orderArb = fc.record({
  tier: fc.integer({ min: -2, max: 2 }),
  deadline: fc.oneof(fc.constant(Infinity), fc.integer({ min: 0, max: 5 })),
  key: fc.integer({ min: -3, max: 3 }),
  seq: fc.nat(1000),
});
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('push' as const), heap: fc.nat(2), item: fc.nat(40), order: orderArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('update' as const), item: fc.nat(40), order: orderArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('remove' as const), item: fc.nat(40) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('pop' as const), heap: fc.nat(2) }) },
);

function apply(heap: LaneHeapApi, ids: number[], op: Op): unknown {
  switch (op.op) {
    case 'push':
      if (heap.heapOf(op.item) >= 0) return 'skip';
      heap.push(ids[op.heap]!, op.item, op.order);
      return heap.peek(ids[op.heap]!);
    case 'update':
      if (heap.heapOf(op.item) < 0) return 'skip';
      heap.update(op.item, op.order);
      return heap.peek(heap.heapOf(op.item));
    case 'remove':
      return heap.remove(op.item);
    case 'pop':
      return heap.pop(ids[op.heap]!);
  }
}

describe('LaneHeap (wasm) against its twin', () => {
  it('gives the same head after every operation on random sequences', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (drawn) => {
        // Arrival sequences are unique in the scheduler, which makes the order
        // total; two equal orders would leave either heap free to serve either.
        const ops = drawn.map((op, i) => ('order' in op ? { ...op, order: { ...op.order, seq: op.order.seq * 256 + i } } : op));
        const wasm = new LaneHeap();
        const twin = new ReferenceLaneHeap();
        const wIds = [wasm.createHeap(), wasm.createHeap(), wasm.createHeap()];
        const tIds = [twin.createHeap(), twin.createHeap(), twin.createHeap()];
        for (const op of ops) {
          expect(apply(wasm, wIds, op)).toEqual(apply(twin, tIds, op));
          for (let h = 0; h < 3; h++) expect(wasm.size(wIds[h]!)).toBe(twin.size(tIds[h]!));
        }
        // Draining yields the same total order.
        for (let h = 0; h < 3; h++) {
          const a: number[] = [];
          const b: number[] = [];
          for (let x = wasm.pop(wIds[h]!); x >= 0; x = wasm.pop(wIds[h]!)) a.push(x);
          for (let x = twin.pop(tIds[h]!); x >= 0; x = twin.pop(tIds[h]!)) b.push(x);
          expect(a).toEqual(b);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('LaneHeap order', () => {
  it('serves a higher strict-priority tier first, then deadlines, then the policy key, then arrival', () => {
    const heap = new LaneHeap();
    const h = heap.createHeap();
    heap.push(h, 1, order(0, Infinity, 1, 1));
    heap.push(h, 2, order(0, Infinity, 1, 0));
    heap.push(h, 3, order(0, Infinity, 0, 9));
    heap.push(h, 4, order(0, 500, 9, 9));
    heap.push(h, 5, order(0, 100, 9, 9));
    heap.push(h, 6, order(1, Infinity, 9, 9));
    const drained: number[] = [];
    for (let x = heap.pop(h); x >= 0; x = heap.pop(h)) drained.push(x);
    expect(drained).toEqual([6, 5, 4, 3, 2, 1]);
  });

  it('re-keys an item in place and removes from the middle', () => {
    const heap = new LaneHeap();
    const h = heap.createHeap();
    for (let i = 0; i < 10; i++) heap.push(h, i, order(0, Infinity, i, i));
    heap.update(9, order(0, Infinity, -1, 9));
    expect(heap.peek(h)).toBe(9);
    expect(heap.remove(0)).toBe(true);
    expect(heap.remove(0)).toBe(false);
    heap.pop(h);
    expect(heap.peek(h)).toBe(1);
    expect(heap.size(h)).toBe(8);
  });

  it('rejects an item that is already queued and a non-finite key', () => {
    const heap = new LaneHeap();
    const a = heap.createHeap();
    const b = heap.createHeap();
    heap.push(a, 7, order(0, Infinity, 0, 0));
    expect(() => heap.push(b, 7, order(0, Infinity, 0, 0))).toThrow(/already in a heap/);
    expect(() => heap.push(b, 8, order(0, Infinity, NaN, 0))).toThrow(RangeError);
    expect(() => heap.push(b, -1, order(0, Infinity, 0, 0))).toThrow(RangeError);
    expect(() => heap.peek(99)).toThrow(/no heap/);
  });

  it('gives its memory back when heaps are destroyed', () => {
    const core = new Core();
    const heap = new LaneHeap({ core });
    const base = core.liveBytes;
    const ids = Array.from({ length: 50 }, () => heap.createHeap());
    let item = 0;
    for (const h of ids) for (let i = 0; i < 100; i++) heap.push(h, item++, order(0, Infinity, i, i));
    for (const h of ids) for (let i = 0; i < 100; i++) heap.pop(h);
    for (const h of ids) heap.destroyHeap(h);
    // What stays is the item column (sized to the highest id) and the heap tables.
    const grown = core.liveBytes - base;
    const again = Array.from({ length: 50 }, () => heap.createHeap());
    item = 0;
    for (const h of again) for (let i = 0; i < 100; i++) heap.push(h, item++, order(0, Infinity, i, i));
    for (const h of again) heap.destroyHeap(h);
    expect(core.liveBytes - base).toBe(grown);
  });
});
