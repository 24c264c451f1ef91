import fc from 'fast-check';
import { Packr, Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../router/kv-events.js';
import {
  KvDecodeError,
  REPLAY_END_SEQ,
  decodeKvBatch,
  decodeSeq,
  encodeKvBatch,
  encodeSeq,
  foldHashBytes,
  foldU64,
} from '../../router/kv-wire.js';
import { kvBatch } from './kv-wire.arbitraries.js';

// Fixtures are built with a separate msgpackr instance (or by hand, byte by
// byte), never with the encoder under test.
const packr = new Packr({ useRecords: false });
const pack = (value: unknown): Uint8Array => packr.pack(value);
const U64_MAX = (1n << 64n) - 1n;

function decodeError(payload: Uint8Array): KvDecodeError {
  try {
    decodeKvBatch(payload);
  } catch (error) {
    expect(error).toBeInstanceOf(KvDecodeError);
    return error as KvDecodeError;
  }
  throw new Error('expected a KvDecodeError');
}

describe('decodeKvBatch: engine layouts', () => {
  it('reads a hand-assembled msgspec array_like batch byte for byte (vLLM/SGLang array layout)', () => {
    const f64 = (x: number) => {
      const b = new Uint8Array(9);
      b[0] = 0xcb;
      new DataView(b.buffer).setFloat64(1, x);
      return [...b];
    };
    const str = (s: string) => [0xa0 + s.length, ...new TextEncoder().encode(s)];
    const bytes = new Uint8Array([
      0x93, // batch: [ts, events, dp_rank]
      ...f64(1712345678.5),
      0x91, // one event
      0x98, // ["BlockStored", hashes, parent, tokens, block_size, lora_id, medium, lora_name]
      ...str('BlockStored'),
      0x92,
      0xcf, ...[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // uint64 max
      0xd3, ...[0xc0, 0, 0, 0, 0, 0, 0, 0], // int64 -2^62
      0xc0, // parent: nil
      0x94, 1, 2, 3, 4, // token ids
      0x02, // block size
      0xc0, // lora_id
      ...str('GPU'),
      0xc0, // lora_name
      0x05, // dp rank
    ]);
    expect(decodeKvBatch(bytes)).toEqual({
      ts: 1712345678.5,
      dpRank: 5,
      events: [
        {
          type: 'stored',
          blockHashes: [U64_MAX, (1n << 64n) - (1n << 62n)],
          parentBlockHash: null,
          tokenIds: [1, 2, 3, 4],
          blockSize: 2,
          loraName: null,
          medium: 'GPU',
        },
      ],
    });
  });

  it('reads the tagged-array events: stored, removed and cleared in order', () => {
    const payload = pack([
      17.25,
      [
        ['BlockStored', [11, 12], 10, [1, 2, 3, 4, 5, 6], 3, null, 'GPU', 'adapter-a'],
        ['BlockRemoved', [11], 'CPU'],
        ['AllBlocksCleared'],
      ],
      0,
    ]);
    expect(decodeKvBatch(payload)).toEqual({
      ts: 17.25,
      dpRank: 0,
      events: [
        {
          type: 'stored',
          blockHashes: [11n, 12n],
          parentBlockHash: 10n,
          tokenIds: [1, 2, 3, 4, 5, 6],
          blockSize: 3,
          loraName: 'adapter-a',
          medium: 'GPU',
        },
        { type: 'removed', blockHashes: [11n], medium: 'CPU' },
        { type: 'cleared' },
      ],
    });
  });

  it('reads the map layout of newest vLLM: a batch map and events with a type key', () => {
    const payload = pack({
      ts: 99.5,
      events: [
        {
          type: 'BlockStored',
          block_hashes: [1n << 63n],
          parent_block_hash: -1n,
          token_ids: [7, 8],
          block_size: 2,
          lora_id: null,
          medium: 'GPU',
          lora_name: null,
          extra_keys: [null],
          group_idx: 0,
          kv_cache_spec_kind: 'full_attention',
          kv_cache_spec_sliding_window: null,
        },
        { type: 'BlockRemoved', block_hashes: [1n << 63n], medium: 'GPU', group_idx: 0 },
        { type: 'AllBlocksCleared' },
      ],
      data_parallel_rank: 3,
    });
    expect(decodeKvBatch(payload)).toEqual({
      ts: 99.5,
      dpRank: 3,
      events: [
        {
          type: 'stored',
          blockHashes: [1n << 63n],
          parentBlockHash: U64_MAX,
          tokenIds: [7, 8],
          blockSize: 2,
          loraName: null,
          medium: 'GPU',
          extraKeys: [null],
          groupIdx: 0,
          specKind: 'full_attention',
        },
        { type: 'removed', blockHashes: [1n << 63n], medium: 'GPU', groupIdx: 0 },
        { type: 'cleared' },
      ],
    });
  });

  it('accepts an array batch holding map events (mixed msgspec settings)', () => {
    const payload = pack([1, [{ type: 'BlockRemoved', block_hashes: [5], medium: null }]]);
    expect(decodeKvBatch(payload)).toEqual({ ts: 1, dpRank: null, events: [{ type: 'removed', blockHashes: [5n], medium: null }] });
  });

  it('reads missing trailing optional fields as null (omit_defaults) and ignores extra ones', () => {
    const payload = pack([
      2,
      [
        ['BlockStored', [1], null, [9], 1],
        ['BlockStored', [2], 1, [9], 1, 7, 'GPU', 'lora', [[1, 'mm']], 0, 'full', null, 'future-field'],
        ['BlockRemoved', [1]],
      ],
      0,
      'extra batch field',
    ]);
    const batch = decodeKvBatch(payload);
    expect(batch.events[0]).toMatchObject({ type: 'stored', medium: null, loraName: null, parentBlockHash: null });
    expect(batch.events[1]).toMatchObject({ type: 'stored', medium: 'GPU', loraName: 'lora', parentBlockHash: 1n });
    expect(batch.events[2]).toEqual({ type: 'removed', blockHashes: [1n], medium: null });
    expect(decodeKvBatch(pack([3, []])).dpRank).toBeNull();
    expect(decodeKvBatch(pack({ ts: 3, events: [] })).dpRank).toBeNull();
  });

  it('counts and skips events with unknown tags without failing the batch', () => {
    const unknown: string[] = [];
    const payload = pack([
      4,
      [['BlockMoved', [1], 'CPU'], ['AllBlocksCleared'], { type: 'TierChanged', block_hashes: [1] }],
    ]);
    const batch = decodeKvBatch(payload, { onUnknownEvent: (tag) => unknown.push(tag) });
    expect(batch.events).toEqual([{ type: 'cleared' }]);
    expect(unknown).toEqual(['BlockMoved', 'TierChanged']);
  });
});

describe('hash folding', () => {
  it('folds a negative i64 to its two\'s complement and leaves u64 values alone', () => {
    expect(foldU64(-1n)).toBe(U64_MAX);
    expect(foldU64(-(1n << 63n))).toBe(1n << 63n);
    expect(foldU64(-5)).toBe(U64_MAX - 4n);
    expect(foldU64(U64_MAX)).toBe(U64_MAX);
    expect(foldU64(42)).toBe(42n);
  });

  it('signed and unsigned encodings of the same 64 bits name the same block', () => {
    const signed = decodeKvBatch(pack([0, [['BlockRemoved', [-(1n << 62n) - 7n]]]]));
    const unsigned = decodeKvBatch(pack([0, [['BlockRemoved', [(1n << 64n) - (1n << 62n) - 7n]]]]));
    expect(signed).toEqual(unsigned);
  });

  it('rejects integers outside both 64-bit ranges and non-integral numbers', () => {
    expect(() => foldU64(1n << 64n)).toThrow(KvDecodeError);
    expect(() => foldU64(-(1n << 63n) - 1n)).toThrow(KvDecodeError);
    expect(() => foldU64(1.5)).toThrow(/integer/);
    expect(() => foldU64(2 ** 60)).toThrow(/2\^53/);
  });

  it('folds hash bytes to the big-endian value of their last eight bytes (vLLM int-hash reduction)', () => {
    const digest = Uint8Array.from({ length: 32 }, (_, i) => i);
    // bytes 24..31 = 0x18..0x1f
    expect(foldHashBytes(digest)).toBe(0x18191a1b1c1d1e1fn);
    expect(foldHashBytes(Uint8Array.of(0x01, 0x02))).toBe(0x0102n);
    expect(foldHashBytes(Uint8Array.of(...digest))).toBe(foldHashBytes(digest));
    expect(() => foldHashBytes(new Uint8Array(0))).toThrow(/empty/);
  });

  it('bytes hashes keep parent links and removals matching across events', () => {
    const a = Uint8Array.from({ length: 32 }, (_, i) => 200 - i);
    const b = Uint8Array.from({ length: 32 }, (_, i) => i * 3);
    const batch = decodeKvBatch(
      pack({
        ts: 1,
        events: [
          { type: 'BlockStored', block_hashes: [a], parent_block_hash: null, token_ids: [1], block_size: 1, lora_id: null, medium: null, lora_name: null },
          { type: 'BlockStored', block_hashes: [b], parent_block_hash: Uint8Array.from(a), token_ids: [2], block_size: 1, lora_id: null, medium: null, lora_name: null },
          { type: 'BlockRemoved', block_hashes: [Uint8Array.from(b)], medium: null },
        ],
      }),
    );
    const [first, second, removed] = batch.events as [any, any, any];
    expect(second.parentBlockHash).toBe(first.blockHashes[0]);
    expect(removed.blockHashes[0]).toBe(second.blockHashes[0]);
    expect(first.blockHashes[0]).not.toBe(second.blockHashes[0]);
  });
});

describe('decodeKvBatch: bad input names the field', () => {
  it.each([
    ['garbage bytes', Uint8Array.of(0xc1, 0xff, 0x00), 'payload'],
    ['truncated msgpack', Uint8Array.of(0x93, 0x01), 'payload'],
    ['a string batch', pack('hello'), 'batch'],
    ['events not a list', pack([1, 'nope']), 'events'],
    ['ts missing from a map', pack({ events: [] }), 'ts'],
    ['dp rank out of range', pack([1, [], 70000]), 'data_parallel_rank'],
    ['an event that is a number', pack([1, [5]]), 'events[0]'],
    ['a numeric tag', pack([1, [[3, [1]]]]), 'events[0].type'],
    ['a string hash', pack([1, [['BlockRemoved', [1, 'x']]]]), 'events[0].block_hashes[1]'],
    ['a fractional hash', pack([1, [['BlockRemoved', [1.5]]]]), 'events[0].block_hashes[0]'],
    ['empty hash bytes', pack([1, [['BlockRemoved', [new Uint8Array(0)]]]]), 'events[0].block_hashes[0]'],
    ['a bad parent', pack([1, [['BlockStored', [1], 'p', [1], 1]]]), 'events[0].parent_block_hash'],
    ['a negative token', pack([1, [['BlockStored', [1], null, [-1], 1]]]), 'events[0].token_ids[0]'],
    ['block size 0 with tokens', pack([1, [['BlockStored', [1], null, [1], 0]]]), 'events[0].block_size'],
    ['too few tokens for the blocks', pack([1, [['BlockStored', [1, 2], null, [1, 2, 3], 2]]]), 'events[0].token_ids'],
    ['a numeric medium', pack([1, [['BlockRemoved', [1], 3]]]), 'events[0].medium'],
  ])('%s -> %s', (_name, payload, field) => {
    expect(decodeError(payload).field).toBe(field);
  });
});

describe('encodeKvBatch', () => {
  const sample: KvEventBatch = {
    ts: 12.5,
    dpRank: 1,
    events: [
      { type: 'stored', blockHashes: [3n, 1n << 63n], parentBlockHash: 2n, tokenIds: [1, 2, 3, 4], blockSize: 2, loraName: null, medium: 'GPU' },
      { type: 'removed', blockHashes: [3n], medium: 'GPU' },
      { type: 'cleared' },
    ],
  };
  const plain = new Unpackr({ int64AsType: 'bigint', useRecords: false, mapsAsObjects: true });

  it('array form is msgspec array_like: [ts, [tagged event lists], dp_rank]', () => {
    expect(plain.unpack(encodeKvBatch(sample, 'array'))).toEqual([
      12.5,
      [['BlockStored', [3, 1n << 63n], 2, [1, 2, 3, 4], 2, null, 'GPU', null], ['BlockRemoved', [3], 'GPU'], ['AllBlocksCleared']],
      1,
    ]);
  });

  it('map form uses named fields with a type tag and data_parallel_rank', () => {
    expect(plain.unpack(encodeKvBatch(sample, 'map'))).toEqual({
      ts: 12.5,
      events: [
        { type: 'BlockStored', block_hashes: [3, 1n << 63n], parent_block_hash: 2, token_ids: [1, 2, 3, 4], block_size: 2, lora_id: null, medium: 'GPU', lora_name: null },
        { type: 'BlockRemoved', block_hashes: [3], medium: 'GPU' },
        { type: 'AllBlocksCleared' },
      ],
      data_parallel_rank: 1,
    });
  });

  it('writes typed-array token ids (the simulated engine sends them) as the plain msgpack array an engine sends', () => {
    const stored = sample.events[0]!;
    const typed: KvEventBatch = { ...sample, events: [{ ...stored, tokenIds: new Uint32Array([1, 2, 3, 4]) } as typeof stored, ...sample.events.slice(1)] };
    for (const form of ['array', 'map'] as const) expect(encodeKvBatch(typed, form)).toEqual(encodeKvBatch(sample, form));
  });

  it('omits a null dp_rank as msgspec omits defaults', () => {
    const batch = { ...sample, dpRank: null };
    expect(plain.unpack(encodeKvBatch(batch, 'array'))).toHaveLength(2);
    expect(plain.unpack(encodeKvBatch(batch, 'map'))).not.toHaveProperty('data_parallel_rank');
  });

  it('writes hashes of 2^63 and above as uint64, not as lossy floats', () => {
    const bytes = encodeKvBatch({ ts: 0, dpRank: null, events: [{ type: 'removed', blockHashes: [U64_MAX], medium: null }] }, 'array');
    const at = bytes.indexOf(0xcf);
    expect(at).toBeGreaterThan(0);
    expect([...bytes.slice(at + 1, at + 9)]).toEqual(new Array(8).fill(0xff));
  });

  it('rejects a hash that is not u64', () => {
    const bad: KvEventBatch = { ts: 0, dpRank: null, events: [{ type: 'removed', blockHashes: [-1n], medium: null }] };
    expect(() => encodeKvBatch(bad, 'map')).toThrow(RangeError);
  });

  it('property: decode(encode(batch)) == batch in both forms', () => {
    fc.assert(
      fc.property(kvBatch, fc.constantFrom<'array' | 'map'>('array', 'map'), (batch, form) => {
        expect(decodeKvBatch(encodeKvBatch(batch, form))).toEqual(batch);
      }),
      { numRuns: 300 },
    );
  });
});

describe('sequence frames', () => {
  it('are 8-byte big-endian and round-trip', () => {
    expect([...encodeSeq(258)]).toEqual([0, 0, 0, 0, 0, 0, 1, 2]);
    for (const seq of [0, 1, 255, 2 ** 32, Number.MAX_SAFE_INTEGER]) expect(decodeSeq(encodeSeq(seq))).toBe(seq);
  });

  it('the replay end marker is -1 as a signed 8-byte integer', () => {
    expect([...encodeSeq(REPLAY_END_SEQ)]).toEqual(new Array(8).fill(0xff));
    expect(decodeSeq(new Uint8Array(8).fill(0xff))).toBe(REPLAY_END_SEQ);
  });

  it('a frame that is not 8 bytes, or past 2^53, is not a sequence number', () => {
    expect(decodeSeq(new Uint8Array(7))).toBeNull();
    expect(decodeSeq(new Uint8Array(9))).toBeNull();
    expect(decodeSeq(Uint8Array.of(0x7f, 0, 0, 0, 0, 0, 0, 0))).toBeNull();
    expect(() => encodeSeq(-2)).toThrow(RangeError);
  });

  it('reads a frame that is a view into a larger buffer', () => {
    const backing = Uint8Array.of(9, 9, 0, 0, 0, 0, 0, 0, 0, 7, 9);
    expect(decodeSeq(backing.subarray(2, 10))).toBe(7);
  });
});
