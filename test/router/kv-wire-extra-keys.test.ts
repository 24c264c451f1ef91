// Per-block extra keys of stored events (newer vLLM): read as the engine
// wrote them in both layouts, written by the simulated engine's encoder the
// same way, and refused by field when malformed.
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../router/kv-events.js';
import { decodeKvBatch, encodeKvBatch, KvDecodeError } from '../../router/kv-wire.js';

const pack = (value: unknown): Uint8Array => new Packr({ useRecords: false }).pack(value);

describe('extra_keys', () => {
  it('reads a salted adapter chain: the adapter on every block, the salt on the first, media tuples and bytes kept', () => {
    const keys = [['sql-lora', ['img', 3], 'tenant-a', new Uint8Array([7, 7])], ['sql-lora']];
    const array = pack([1, [['BlockStored', [11, 12], null, [1, 2, 3, 4], 2, null, 'GPU', 'sql-lora', keys]]]);
    const map = pack({ ts: 1, events: [{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: [1, 2, 3, 4], block_size: 2, lora_id: null, medium: 'GPU', lora_name: 'sql-lora', extra_keys: keys }] });
    for (const payload of [array, map]) {
      const stored = decodeKvBatch(payload).events[0]!;
      expect(stored).toMatchObject({ type: 'stored', loraName: 'sql-lora' });
      const extra = stored.type === 'stored' ? stored.extraKeys! : [];
      expect(extra[0]!.slice(0, 3)).toEqual(['sql-lora', ['img', 3], 'tenant-a']);
      // Bytes stay bytes (a Uint8Array, whichever subclass the decoder makes).
      expect(extra[0]![3]).toBeInstanceOf(Uint8Array);
      expect([...(extra[0]![3] as Uint8Array)]).toEqual([7, 7]);
      expect(extra[1]).toEqual(['sql-lora']);
    }
  });

  it('round-trips through the encoder in both layouts, and leaves the field out when there are none', () => {
    const batch: KvEventBatch = {
      ts: 2,
      dpRank: 1,
      events: [
        { type: 'stored', blockHashes: [5n, 6n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: 2, loraName: null, medium: 'GPU', extraKeys: [['tenant-a'], null] },
        { type: 'stored', blockHashes: [7n], parentBlockHash: 6n, tokenIds: [5, 6], blockSize: 2, loraName: null, medium: 'GPU' },
      ],
    };
    for (const form of ['array', 'map'] as const) {
      const decoded = decodeKvBatch(encodeKvBatch(batch, form));
      expect(decoded).toEqual(batch);
      expect('extraKeys' in decoded.events[1]!).toBe(false);
    }
  });

  it('refuses extra keys that are not a list of lists (or nulls), naming the field', () => {
    const bad = (extra: unknown) => () => decodeKvBatch(pack([1, [['BlockStored', [1], null, [1, 2], 2, null, 'GPU', null, extra]]]));
    expect(bad('tenant-a')).toThrow(KvDecodeError);
    expect(bad('tenant-a')).toThrow(/^events\[0\]\.extra_keys: must be a list with one entry per block, got "tenant-a"$/);
    expect(bad(['tenant-a'])).toThrow(/^events\[0\]\.extra_keys\[0\]: must be a list of keys or null, got "tenant-a"$/);
  });
});
