// Random KV-event batches for the wire and JSON-ingest property tests.

import fc from 'fast-check';
import type { KvEvent, KvEventBatch } from '../../router/kv-events.js';

const U64_MAX = (1n << 64n) - 1n;

/** u64 hashes across the ranges that take different msgpack encodings. */
export const u64Hash = fc.oneof(
  fc.bigInt({ min: 0n, max: 0xffffffffn }),
  fc.bigInt({ min: 0x100000000n, max: (1n << 63n) - 1n }),
  fc.bigInt({ min: 1n << 63n, max: U64_MAX }),
);

const label = fc.option(fc.string({ maxLength: 12 }), { nil: null });

const mediaKey = fc.record({ id: fc.string({ minLength: 1, maxLength: 8 }), offset: fc.integer({ min: -64, max: 64 }) });
const group = fc.option(fc.nat({ max: 4 }), { nil: undefined });

// The newer optional fields, each present only sometimes (absent: as an engine that predates them).
const storedEvent: fc.Arbitrary<KvEvent> = fc
  .record({
    blockSize: fc.integer({ min: 1, max: 8 }),
    blockHashes: fc.array(u64Hash, { minLength: 1, maxLength: 4 }),
    parentBlockHash: fc.option(u64Hash, { nil: null }),
    loraName: label,
    medium: label,
    tokenSeed: fc.array(fc.nat(0xffffffff), { minLength: 32, maxLength: 32 }),
    media: fc.option(fc.array(fc.option(fc.array(mediaKey, { minLength: 1, maxLength: 2 }), { nil: null }), { minLength: 4, maxLength: 4 }), { nil: undefined }),
    groupIdx: group,
    specKind: fc.option(fc.constantFrom('full_attention', 'sliding_window', 'mamba'), { nil: undefined }),
    slidingWindow: fc.option(fc.integer({ min: 1, max: 4096 }), { nil: undefined }),
  })
  .map(({ blockSize, blockHashes, parentBlockHash, loraName, medium, tokenSeed, media, groupIdx, specKind, slidingWindow }) => {
    const event: KvEvent = {
      type: 'stored' as const,
      blockHashes,
      parentBlockHash,
      tokenIds: tokenSeed.slice(0, blockHashes.length * blockSize),
      blockSize,
      loraName,
      medium,
    };
    const perBlock = media?.slice(0, blockHashes.length);
    if (perBlock?.some((m) => m !== null)) {
      // Published among the block's extra keys, as the engine lists them.
      event.media = perBlock;
      event.extraKeys = perBlock.map((keys) => keys?.map((k) => [k.id, k.offset]) ?? null);
    }
    if (groupIdx !== undefined) event.groupIdx = groupIdx;
    if (specKind !== undefined) event.specKind = specKind;
    if (slidingWindow !== undefined) event.slidingWindow = slidingWindow;
    return event;
  });

const removedEvent: fc.Arbitrary<KvEvent> = fc
  .record({ blockHashes: fc.array(u64Hash, { maxLength: 4 }), medium: label, groupIdx: group })
  .map(({ blockHashes, medium, groupIdx }) => (groupIdx === undefined ? { type: 'removed' as const, blockHashes, medium } : { type: 'removed' as const, blockHashes, medium, groupIdx }));

const clearedEvent: fc.Arbitrary<KvEvent> = fc.constant({ type: 'cleared' as const });

export const kvBatch: fc.Arbitrary<KvEventBatch> = fc.record({
  // Engine timestamps are positive seconds; -0 would not survive as a distinct value.
  ts: fc.double({ min: 0, max: 4e9, noNaN: true }).map((ts) => (ts === 0 ? 0 : ts)),
  events: fc.array(fc.oneof(storedEvent, removedEvent, clearedEvent), { maxLength: 6 }),
  dpRank: fc.option(fc.integer({ min: 0, max: 0xffff }), { nil: null }),
});
