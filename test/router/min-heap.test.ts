import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MinHeap } from '../../router/min-heap.js';

describe('MinHeap', () => {
  it('pops every pushed value in order, whatever the interleaving of pushes and pops', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.integer({ min: -50, max: 50 }), fc.constant(null)), { maxLength: 300 }), (ops) => {
        const heap = new MinHeap<number>((a, b) => a < b);
        const model: number[] = [];
        for (const op of ops) {
          if (op === null) {
            model.sort((a, b) => a - b);
            expect(heap.pop()).toBe(model.shift());
          } else {
            heap.push(op);
            model.push(op);
          }
          expect(heap.size).toBe(model.length);
          expect(heap.peek()).toBe(model.length ? Math.min(...model) : undefined);
        }
      }),
    );
  });
});
