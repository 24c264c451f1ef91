// The fields newer engines added to KV events (vLLM's extra_keys, KV cache
// groups and cache specs, locality, ownership, session_id; the offloading
// connector's placeholder stores), in both encodings the decoder reads.
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeKvIngestJson } from '../../router/kv-ingest-json.js';
import { KvDecodeError, decodeKvBatch, encodeKvBatch } from '../../router/kv-wire.js';

const packr = new Packr({ useRecords: false });
const pack = (value: unknown): Uint8Array => packr.pack(value);

// Two blocks of two tokens; the first holds an image's run from its start, the second its rest.
const extraKeys = [[['img-a', 0], 'adapter'], [['img-a', -2], new Uint8Array([1, 2])]];
const media = [[{ id: 'img-a', offset: 0 }], [{ id: 'img-a', offset: -2 }]];

const storedFields = {
  block_hashes: [11, 12],
  parent_block_hash: null,
  token_ids: [1, 2, 3, 4],
  block_size: 2,
  lora_id: null,
  medium: 'CPU',
  lora_name: 'adapter',
  extra_keys: extraKeys,
  group_idx: 1,
  kv_cache_spec_kind: 'full_attention',
  kv_cache_spec_sliding_window: null,
  locality: 'LOCAL',
  ownership: 'cpu-tier',
  session_id: 'session-9',
};

const expectedStored = {
  type: 'stored',
  blockHashes: [11n, 12n],
  parentBlockHash: null,
  tokenIds: [1, 2, 3, 4],
  blockSize: 2,
  loraName: 'adapter',
  medium: 'CPU',
  media,
  groupIdx: 1,
  specKind: 'full_attention',
};

function fieldOf(payload: Uint8Array): string {
  try {
    decodeKvBatch(payload);
  } catch (error) {
    if (error instanceof KvDecodeError) return error.field;
    throw error;
  }
  throw new Error('decoded without an error');
}

describe('decodeKvBatch: newer optional fields', () => {
  it('array form: reads media keys, group and spec; accepts locality, ownership, session_id and unknown trailing fields', () => {
    const payload = pack([
      5,
      [
        ['BlockStored', ...Object.values(storedFields), 'a-field-from-the-future'],
        ['BlockRemoved', [11], 'CPU', 1, 'LOCAL', 'cpu-tier', 'future'],
      ],
    ]);
    expect(decodeKvBatch(payload).events).toMatchObject([expectedStored, { type: 'removed', blockHashes: [11n], medium: 'CPU', groupIdx: 1 }]);
  });

  it('map form: the same fields by name, with unknown ones ignored', () => {
    const payload = pack({
      ts: 5,
      events: [
        { type: 'BlockStored', ...storedFields, future_field: { nested: true } },
        { type: 'BlockRemoved', block_hashes: [11], medium: 'CPU', group_idx: 1, locality: 'REMOTE', ownership: null },
      ],
    });
    expect(decodeKvBatch(payload).events).toMatchObject([expectedStored, { type: 'removed', blockHashes: [11n], medium: 'CPU', groupIdx: 1 }]);
  });

  it('reads media keys published as typed maps (tagged "mm", hash and block_offset)', () => {
    const typed = [[{ type: 'mm', modality: 'image', hash: 'img-a', block_offset: 0 }, { type: 'lora', name: 'adapter' }], [{ type: 'mm', modality: 'image', hash: 'img-a', block_offset: -2 }]];
    const payload = pack({ ts: 1, events: [{ type: 'BlockStored', ...storedFields, extra_keys: typed }] });
    expect(decodeKvBatch(payload).events[0]).toMatchObject({ media });
  });

  it('extra keys with no media (LoRA name, salt, prompt-embedding bytes) read as no media', () => {
    const payload = pack({ ts: 1, events: [{ type: 'BlockStored', ...storedFields, extra_keys: [['adapter', 'salt'], null] }] });
    expect(decodeKvBatch(payload).events[0]).not.toHaveProperty('media');
  });

  it('a sliding-window group decodes with its kind and window', () => {
    const payload = pack({ ts: 1, events: [{ type: 'BlockStored', ...storedFields, kv_cache_spec_kind: 'sliding_window', kv_cache_spec_sliding_window: 4096 }] });
    expect(decodeKvBatch(payload).events[0]).toMatchObject({ specKind: 'sliding_window', slidingWindow: 4096 });
  });

  it("accepts the offloading connector's placeholder store: one hash, no tokens, block_size 0", () => {
    const payload = pack({ ts: 1, events: [{ type: 'BlockStored', block_hashes: [77], parent_block_hash: null, token_ids: [], block_size: 0, lora_id: null, medium: 'CPU', lora_name: null, group_idx: 0, locality: 'LOCAL', ownership: null }] });
    expect(decodeKvBatch(payload).events[0]).toEqual({ type: 'stored', blockHashes: [77n], parentBlockHash: null, tokenIds: [], blockSize: 0, loraName: null, medium: 'CPU', groupIdx: 0 });
  });

  it.each([
    ['extra_keys not one per block', { extra_keys: [null] }, 'events[0].extra_keys'],
    ['extra_keys not a list', { extra_keys: 'x' }, 'events[0].extra_keys'],
    ['a block entry that is not a list', { extra_keys: [5, null] }, 'events[0].extra_keys[0]'],
    ['a negative group', { group_idx: -1 }, 'events[0].group_idx'],
    ['a numeric spec kind', { kv_cache_spec_kind: 3 }, 'events[0].kv_cache_spec_kind'],
    ['a fractional window', { kv_cache_spec_sliding_window: 1.5 }, 'events[0].kv_cache_spec_sliding_window'],
  ])('%s -> %s', (_name, override, field) => {
    expect(fieldOf(pack({ ts: 1, events: [{ type: 'BlockStored', ...storedFields, ...override }] }))).toBe(field);
  });

  it('encodes media, group and spec in both forms and reads them back', () => {
    const batch = { ts: 2, dpRank: null, events: [expectedStored as never, { type: 'removed' as const, blockHashes: [11n], medium: 'CPU', groupIdx: 1 }] };
    // Media alone are published as their extra keys, and read back as both.
    const extraKeys = [[['img-a', 0]], [['img-a', -2]]];
    for (const form of ['array', 'map'] as const) expect(decodeKvBatch(encodeKvBatch(batch, form))).toEqual({ ...batch, events: [{ ...expectedStored, extraKeys }, batch.events[1]] });
  });

  it('the array form leaves the newer fields out when they are at their defaults, as msgspec does', () => {
    const plain = { ts: 2, dpRank: null, events: [{ type: 'stored' as const, blockHashes: [1n], parentBlockHash: null, tokenIds: [4, 5], blockSize: 2, loraName: null, medium: 'GPU' }, { type: 'removed' as const, blockHashes: [1n], medium: 'GPU' }] };
    const unpacked = new Packr({ useRecords: false }).unpack(encodeKvBatch(plain, 'array')) as unknown[][];
    expect(unpacked[1]).toEqual([['BlockStored', [1], null, [4, 5], 2, null, 'GPU', null], ['BlockRemoved', [1], 'GPU']]);
  });

  it('the JSON ingest reads the same fields', () => {
    const body = JSON.parse(JSON.stringify({ worker_id: 'w', events: [{ type: 'stored', ...storedFields, extra_keys: [[['img-a', 0]], [['img-a', -2]]] }] }));
    expect(decodeKvIngestJson(body).batch.events[0]).toMatchObject(expectedStored);
  });
});
