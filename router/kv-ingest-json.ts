// KV events over HTTP, for engines that cannot publish on ZeroMQ. The body is
// JSON (already parsed by the server):
//
//   {
//     "worker_id": "w1",            required, non-empty string
//     "dp_rank": 0,                 optional integer in [0, 65535], default 0
//     "seq": 17,                    optional per-(worker, rank) batch number from 0
//     "ts": 1712345678.5,           optional engine time, seconds
//     "events": [
//       { "type": "stored", "block_hashes": ["1234..."], "parent_block_hash": null,
//         "token_ids": [...], "block_size": 64, "lora_name": null, "medium": "GPU",
//         "extra_keys": [null, [["<image id>", -3]]],       optional, one per block
//         "group_idx": 0, "kv_cache_spec_kind": "full_attention",
//         "kv_cache_spec_sliding_window": null },          optional
//       { "type": "removed", "block_hashes": [...], "medium": "GPU", "group_idx": 0 },
//       { "type": "cleared" }
//     ]
//   }
//
// Hashes are u64 as decimal strings. A JSON number is accepted only when it is
// a safe integer (larger ones were already rounded by the JSON parser). A
// negative value is a signed i64 and folds to its two's complement, as on the
// ZeroMQ path. Unknown extra fields are ignored; an unknown event type is an
// error here because this schema is ours. Errors are KvDecodeError naming the
// field.

import type { WorkerKey } from '../bindings/workers.js';
import type { KvEvent, KvEventBatch } from './kv-events.js';
import { KvDecodeError, describeValue, foldU64, readDpRank, readRemovedFields, readStoredFields } from './kv-wire.js';

export interface KvIngest {
  worker: WorkerKey;
  /** The batch's sequence number, or null when the engine does not number its batches. */
  seq: number | null;
  batch: KvEventBatch;
}

export interface IngestOptions {
  /** Timestamp for a body without `ts` (the server's clock, seconds); default 0. */
  defaultTs?: number;
}

const DECIMAL = /^-?[0-9]{1,20}$/;

/** Validates a parsed JSON ingest body and converts it to a batch for its worker. */
export function decodeKvIngestJson(body: unknown, options: IngestOptions = {}): KvIngest {
  const root = asObject(body, 'body');
  const id = root.worker_id;
  if (typeof id !== 'string' || id.length === 0) {
    throw new KvDecodeError('worker_id', `must be a non-empty string, got ${describeValue(id)}`);
  }
  const dpRank = readDpRank(root.dp_rank, 'dp_rank');
  const seq = root.seq;
  if (seq !== undefined && seq !== null && (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0)) {
    throw new KvDecodeError('seq', `must be a non-negative integer, got ${describeValue(seq)}`);
  }
  const ts = root.ts ?? options.defaultTs ?? 0;
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new KvDecodeError('ts', `must be a number, got ${describeValue(ts)}`);
  if (!Array.isArray(root.events)) throw new KvDecodeError('events', `must be a list, got ${describeValue(root.events)}`);
  const events = root.events.map((event, i) => decodeEvent(event, `events[${i}]`));
  return {
    worker: { id, rank: dpRank ?? 0 },
    seq: typeof seq === 'number' ? seq : null,
    batch: { ts, events, dpRank },
  };
}

/** Parses one JSON hash: a decimal string, or a number that is a safe integer. */
export function readJsonHash(value: unknown, field: string): bigint {
  if (typeof value === 'number') return foldU64(value, field);
  if (typeof value === 'string' && DECIMAL.test(value)) return foldU64(BigInt(value), field);
  throw new KvDecodeError(field, `hash must be a decimal string (or a safe integer), got ${describeValue(value)}`);
}

function decodeEvent(raw: unknown, path: string): KvEvent {
  const f = asObject(raw, path);
  switch (f.type) {
    case 'stored':
      return readStoredFields(f, path, readJsonHash);
    case 'removed':
      return readRemovedFields(f, path, readJsonHash);
    case 'cleared':
      return { type: 'cleared' };
    default:
      throw new KvDecodeError(`${path}.type`, `must be "stored", "removed" or "cleared", got ${describeValue(f.type)}`);
  }
}

function asObject(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new KvDecodeError(field, `must be an object, got ${describeValue(value)}`);
  }
  return value as Record<string, unknown>;
}
