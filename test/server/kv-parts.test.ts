// Splitting a relayed KV batch into messages under a byte budget, and joining
// the parts back on the router side.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BlockStored, KvEventBatch } from '../../router/kv-events.js';
import { decodeKvBatch, encodeKvBatch } from '../../router/kv-wire.js';
import { PartAssembler, parsePartHeader, splitKvBatch } from '../../server/nats/kv-parts.js';

function stored(first: number, tokens: number): BlockStored {
  return {
    type: 'stored',
    blockHashes: Array.from({ length: tokens / 16 }, (_, i) => BigInt(first * 1000 + i + 1)),
    parentBlockHash: null,
    tokenIds: Array.from({ length: tokens }, (_, i) => first + i),
    blockSize: 16,
    loraName: null,
    medium: 'GPU',
  };
}

const batchOf = (sizes: number[]): KvEventBatch => ({ ts: 7.5, events: sizes.map((blocks, i) => stored(i * 100, blocks * 16)), dpRank: 0 });

describe('splitKvBatch', () => {
  it('keeps a batch that fits as one message, byte for byte', () => {
    const batch = batchOf([1, 2, 3]);
    const split = splitKvBatch(batch, 1 << 20);
    expect(split).toEqual({ kind: 'parts', parts: [encodeKvBatch(batch, 'array')] });
  });

  it('every part fits the budget and the parts carry the events in order', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 40 }), fc.integer({ min: 600, max: 4000 }), (sizes, budget) => {
        const batch = batchOf(sizes);
        const split = splitKvBatch(batch, budget);
        if (split.kind === 'oversized') {
          // Only when that event alone, in a batch of its own, is over the budget (less the array header room).
          expect(encodeKvBatch({ ...batch, events: [batch.events[split.eventIndex]!] }, 'array').length).toBeGreaterThan(budget - 5);
          return;
        }
        for (const part of split.parts) expect(part.length).toBeLessThanOrEqual(budget);
        const decoded = split.parts.map((part) => decodeKvBatch(part));
        for (const part of decoded) expect(part.ts).toBe(7.5);
        expect(decoded.flatMap((part) => part.events)).toEqual(decodeKvBatch(encodeKvBatch(batch, 'array')).events);
      }),
    );
  });

  it('names the event that cannot fit in any message', () => {
    const split = splitKvBatch(batchOf([1, 64, 1]), 1000);
    expect(split.kind).toBe('oversized');
    expect(split.kind === 'oversized' && split.eventIndex).toBe(1);
  });
});

describe('PartAssembler', () => {
  const part = (first: number): KvEventBatch => ({ ts: 1, events: [stored(first, 16)], dpRank: 0 });

  it('gives the batch once its last part is in', () => {
    const a = new PartAssembler();
    expect(a.offer(5, 0, 3, part(1)).batch).toBeNull();
    expect(a.offer(5, 1, 3, part(2)).batch).toBeNull();
    const joined = a.offer(5, 2, 3, part(3));
    expect(joined.batch?.events.map((e) => (e as BlockStored).tokenIds[0])).toEqual([1, 2, 3]);
    expect(joined.discarded).toBe(0);
  });

  it('discards a batch whose parts do not follow one another', () => {
    const a = new PartAssembler();
    a.offer(5, 0, 3, part(1));
    // Part 1 is missing: the batch is incomplete, and part 2 alone is no batch either.
    expect(a.offer(5, 2, 3, part(3))).toEqual({ batch: null, discarded: 2 });
    // The next batch starts afresh.
    a.offer(6, 0, 2, part(4));
    expect(a.offer(6, 1, 2, part(5)).batch?.events).toHaveLength(2);
    a.offer(7, 0, 2, part(6));
    expect(a.reset()).toBe(1);
  });

  it('reads only well-formed part headers', () => {
    expect(parsePartHeader('0/2')).toEqual({ index: 0, count: 2 });
    for (const bad of ['2/2', '0/0', '-1/2', '1', 'a/b', '1/2/3']) expect(parsePartHeader(bad)).toBeNull();
  });
});
