import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvEvent, KvEventBatch } from '../../router/kv-events.js';
import { decodeKvIngestJson, readJsonHash } from '../../router/kv-ingest-json.js';
import { KvDecodeError, decodeKvBatch, encodeKvBatch } from '../../router/kv-wire.js';
import { kvBatch } from './kv-wire.arbitraries.js';

const U64_MAX = (1n << 64n) - 1n;

/** The JSON body an engine would send for a batch, hashes as decimal strings. */
function jsonBody(batch: KvEventBatch, workerId: string, seq?: number): unknown {
  const hash = (h: bigint) => h.toString();
  const event = (e: KvEvent) => {
    switch (e.type) {
      case 'stored':
        return {
          type: 'stored',
          block_hashes: e.blockHashes.map(hash),
          parent_block_hash: e.parentBlockHash === null ? null : hash(e.parentBlockHash),
          token_ids: e.tokenIds,
          block_size: e.blockSize,
          lora_name: e.loraName,
          medium: e.medium,
          extra_keys: e.extraKeys,
          group_idx: e.groupIdx,
          kv_cache_spec_kind: e.specKind,
          kv_cache_spec_sliding_window: e.slidingWindow,
        };
      case 'removed':
        return { type: 'removed', block_hashes: e.blockHashes.map(hash), medium: e.medium, group_idx: e.groupIdx };
      case 'cleared':
        return { type: 'cleared' };
    }
  };
  // JSON.parse(JSON.stringify(...)) so the decoder sees exactly what a server parses.
  return JSON.parse(JSON.stringify({ worker_id: workerId, dp_rank: batch.dpRank, seq, ts: batch.ts, events: batch.events.map(event) }));
}

function fieldOf(body: unknown): string {
  try {
    decodeKvIngestJson(body);
  } catch (error) {
    expect(error).toBeInstanceOf(KvDecodeError);
    return (error as KvDecodeError).field;
  }
  throw new Error('expected a KvDecodeError');
}

describe('decodeKvIngestJson', () => {
  it('decodes the documented body into a worker, a sequence number and a batch', () => {
    const ingest = decodeKvIngestJson({
      worker_id: 'w1',
      dp_rank: 2,
      seq: 17,
      ts: 5.5,
      events: [
        { type: 'stored', block_hashes: ['18446744073709551615', '12'], parent_block_hash: null, token_ids: [1, 2, 3, 4], block_size: 2, lora_name: 'a' },
        { type: 'removed', block_hashes: ['12'] },
        { type: 'cleared' },
      ],
    });
    expect(ingest).toEqual({
      worker: { id: 'w1', rank: 2 },
      seq: 17,
      batch: {
        ts: 5.5,
        dpRank: 2,
        events: [
          { type: 'stored', blockHashes: [U64_MAX, 12n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: 2, loraName: 'a', medium: null },
          { type: 'removed', blockHashes: [12n], medium: null },
          { type: 'cleared' },
        ],
      },
    });
  });

  it('defaults: rank 0, no sequence number, the caller\'s timestamp', () => {
    const ingest = decodeKvIngestJson({ worker_id: 'w', events: [] }, { defaultTs: 123 });
    expect(ingest).toEqual({ worker: { id: 'w', rank: 0 }, seq: null, batch: { ts: 123, dpRank: null, events: [] } });
  });

  it('folds negative decimal strings like signed i64, the same as the wire does', () => {
    expect(readJsonHash('-1', 'h')).toBe(U64_MAX);
    expect(readJsonHash('-9223372036854775808', 'h')).toBe(1n << 63n);
    expect(readJsonHash(-2, 'h')).toBe(U64_MAX - 1n);
    expect(readJsonHash(9007199254740991, 'h')).toBe(9007199254740991n);
  });

  it('rejects unsafe JSON numbers as hashes: the parser already rounded them', () => {
    expect(() => readJsonHash(2 ** 60, 'events[0].block_hashes[0]')).toThrow(/events\[0\]\.block_hashes\[0\].*2\^53/);
  });

  it.each([
    ['a body that is a list', [], 'body'],
    ['a missing worker id', { events: [] }, 'worker_id'],
    ['an empty worker id', { worker_id: '', events: [] }, 'worker_id'],
    ['a negative rank', { worker_id: 'w', dp_rank: -1, events: [] }, 'dp_rank'],
    ['a fractional seq', { worker_id: 'w', seq: 1.5, events: [] }, 'seq'],
    ['a string ts', { worker_id: 'w', ts: 'now', events: [] }, 'ts'],
    ['events missing', { worker_id: 'w' }, 'events'],
    ['an event that is a string', { worker_id: 'w', events: ['stored'] }, 'events[0]'],
    ['an unknown event type', { worker_id: 'w', events: [{ type: 'cleared' }, { type: 'moved' }] }, 'events[1].type'],
    ['a hash with letters', { worker_id: 'w', events: [{ type: 'removed', block_hashes: ['1', '12x'] }] }, 'events[0].block_hashes[1]'],
    ['a hash past u64', { worker_id: 'w', events: [{ type: 'removed', block_hashes: ['18446744073709551616'] }] }, 'events[0].block_hashes[0]'],
    ['a hash below i64', { worker_id: 'w', events: [{ type: 'removed', block_hashes: ['-9223372036854775809'] }] }, 'events[0].block_hashes[0]'],
    ['hashes not a list', { worker_id: 'w', events: [{ type: 'removed', block_hashes: '1' }] }, 'events[0].block_hashes'],
    [
      'a bad parent',
      { worker_id: 'w', events: [{ type: 'stored', block_hashes: ['1'], parent_block_hash: true, token_ids: [1], block_size: 1 }] },
      'events[0].parent_block_hash',
    ],
    [
      'a token count that does not fill the blocks',
      { worker_id: 'w', events: [{ type: 'stored', block_hashes: ['1'], token_ids: [1, 2, 3], block_size: 2 }] },
      'events[0].token_ids',
    ],
    ['a missing block size', { worker_id: 'w', events: [{ type: 'stored', block_hashes: ['1'], token_ids: [1] }] }, 'events[0].block_size'],
    [
      'a numeric lora name',
      { worker_id: 'w', events: [{ type: 'stored', block_hashes: ['1'], token_ids: [1], block_size: 1, lora_name: 4 }] },
      'events[0].lora_name',
    ],
  ])('%s -> %s', (_name, body, field) => {
    expect(fieldOf(body)).toBe(field);
  });

  it('ignores unknown extra fields', () => {
    const ingest = decodeKvIngestJson({ worker_id: 'w', extra: 1, events: [{ type: 'cleared', note: 'x' }] });
    expect(ingest.batch.events).toEqual([{ type: 'cleared' }]);
  });

  it('property: the JSON body of a batch decodes to the same batch as its msgpack payload', () => {
    fc.assert(
      fc.property(kvBatch, fc.option(fc.nat(), { nil: undefined }), (batch, seq) => {
        const ingest = decodeKvIngestJson(jsonBody(batch, 'w', seq));
        expect(ingest.batch).toEqual(decodeKvBatch(encodeKvBatch(batch, 'map')));
        expect(ingest.batch).toEqual(batch);
        expect(ingest.seq).toBe(seq ?? null);
        expect(ingest.worker).toEqual({ id: 'w', rank: batch.dpRank ?? 0 });
      }),
      { numRuns: 200 },
    );
  });
});
