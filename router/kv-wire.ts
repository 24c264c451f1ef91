// The KV-event wire format vLLM and SGLang publish over ZeroMQ: msgpack batches
// and the 8-byte sequence frames around them. Pure: bytes in, events out.
//
// Engines disagree on the encoding (msgspec structs with or without
// array_like), so decoding is liberal about shape and strict about values:
//   batch  [ts, events, dp_rank?]  or  {ts, events, data_parallel_rank?}
//   event  ["BlockStored", block_hashes, parent_block_hash, token_ids,
//           block_size, lora_id, medium, lora_name, extra_keys, group_idx,
//           kv_cache_spec_kind, kv_cache_spec_sliding_window, locality,
//           ownership, session_id, ...]
//          ["BlockRemoved", block_hashes, medium, group_idx, locality, ownership, ...]
//          ["AllBlocksCleared"]
//          or a map with a `type` key and the same names.
// Missing trailing optional fields read as null, extra fields are ignored, an
// unknown event tag is reported and skipped. locality, ownership and
// session_id are accepted and not read (the router's tiers come from
// `medium`, its sessions from requests). From extra_keys only the media items
// are read (an [identifier, offset] pair, or a map tagged "mm" with `hash` and
// `block_offset`); the LoRA name and cache salt reach the hash through the
// seed, and other keys have no token-side twin. A placeholder store (no token
// ids, block_size 0: an offloading tier naming a block only by hash) decodes
// with empty tokens. Anything else wrong throws a KvDecodeError naming the
// field.

import { Packr, Unpackr } from 'msgpackr';
import type { BlockRemoved, BlockStored, KvEvent, KvEventBatch, MediaKey } from './kv-events.js';

/** A KV-event input that does not fit the format; `field` is the path of the bad value. */
export class KvDecodeError extends TypeError {
  readonly code = 'KV_DECODE';

  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`${field}: ${detail}`);
    this.name = 'KvDecodeError';
  }
}

export interface DecodeOptions {
  /** Called for each event whose tag this decoder does not know; the event is skipped. */
  onUnknownEvent?: (tag: string, index: number) => void;
}

export type BatchForm = 'array' | 'map';

const TAG_STORED = 'BlockStored';
const TAG_REMOVED = 'BlockRemoved';
const TAG_CLEARED = 'AllBlocksCleared';

// Positional field names after the tag, in msgspec declaration order.
const STORED_FIELDS = [
  'block_hashes',
  'parent_block_hash',
  'token_ids',
  'block_size',
  'lora_id',
  'medium',
  'lora_name',
  'extra_keys',
  'group_idx',
  'kv_cache_spec_kind',
  'kv_cache_spec_sliding_window',
];
const REMOVED_FIELDS = ['block_hashes', 'medium', 'group_idx'];

const U64_MASK = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const MAX_RANK = 0xffff;
const MAX_TOKEN_ID = 0xffffffff;

// int64AsType 'bigint': 64-bit integers keep every bit; smaller encodings stay numbers.
const unpackr = new Unpackr({ int64AsType: 'bigint', useRecords: false, mapsAsObjects: true });
const packr = new Packr({ useRecords: false });

// ---------------------------------------------------------------------------
// Hash folding

/**
 * Folds an engine block hash given as an integer to u64. A negative value is a
 * signed i64 and becomes its two's complement, so an engine that writes signed
 * hashes and one that writes unsigned ones name a block the same way.
 */
export function foldU64(value: bigint | number, field = 'hash'): bigint {
  let big: bigint;
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) {
      throw new KvDecodeError(field, `hash must be an integer within 2^53 when sent as a number, got ${value}`);
    }
    big = BigInt(value);
  } else {
    big = value;
  }
  if (big < I64_MIN || big > U64_MASK) {
    throw new KvDecodeError(field, `hash ${big} is outside the signed and unsigned 64-bit ranges`);
  }
  return big & U64_MASK;
}

/**
 * Folds a byte-string block hash (newest vLLM sends the raw digest) to u64: the
 * bytes read as one big-endian unsigned integer, keeping its low 64 bits, i.e.
 * the last eight bytes (fewer bytes are zero-extended). This is the same
 * reduction vLLM applies when told to publish integer hashes, so one block gets
 * one u64 whichever mode the engine runs in, and parent links and removals
 * still match.
 */
export function foldHashBytes(bytes: Uint8Array, field = 'hash'): bigint {
  if (bytes.length === 0) throw new KvDecodeError(field, 'hash bytes must not be empty');
  let out = 0n;
  for (let i = Math.max(0, bytes.length - 8); i < bytes.length; i++) out = (out << 8n) | BigInt(bytes[i]!);
  return out;
}

function foldWireHash(value: unknown, field: string): bigint {
  if (typeof value === 'bigint' || typeof value === 'number') return foldU64(value, field);
  if (value instanceof Uint8Array) return foldHashBytes(value, field);
  throw new KvDecodeError(field, `hash must be an integer or bytes, got ${describeValue(value)}`);
}

// ---------------------------------------------------------------------------
// Field readers (the event builders below are shared with the JSON ingest decoder)

/** Token ids: a list of integers in [0, 2^32). */
function readTokenIds(value: unknown, field: string): number[] {
  if (!Array.isArray(value)) throw new KvDecodeError(field, `must be a list of token ids, got ${describeValue(value)}`);
  const out = new Array<number>(value.length);
  for (let i = 0; i < value.length; i++) {
    const token = value[i];
    if (typeof token !== 'number' || !Number.isInteger(token) || token < 0 || token > MAX_TOKEN_ID) {
      throw new KvDecodeError(`${field}[${i}]`, `token id must be an integer in [0, 2^32), got ${describeValue(token)}`);
    }
    out[i] = token;
  }
  return out;
}

function readBlockSize(value: unknown, field: string, placeholder: boolean): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (placeholder ? 0 : 1)) {
    throw new KvDecodeError(field, `must be a positive integer, got ${describeValue(value)}`);
  }
  return value;
}

function readOptionalCount(value: unknown, field: string): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new KvDecodeError(field, `must be a non-negative integer or null, got ${describeValue(value)}`);
  }
  return value;
}

/** One block's extra keys: the media items among them (null when there are none). */
function readBlockMedia(value: unknown, field: string): MediaKey[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw new KvDecodeError(field, `must be a list of extra keys or null, got ${describeValue(value)}`);
  let media: MediaKey[] | null = null;
  for (const key of value) {
    const item = mediaKeyOf(key);
    if (item) (media ??= []).push(item);
  }
  return media;
}

function mediaKeyOf(key: unknown): MediaKey | null {
  if (Array.isArray(key) && key.length === 2 && typeof key[0] === 'string' && isOffset(key[1])) return { id: key[0], offset: Number(key[1]) };
  if (isMap(key) && key.type === 'mm' && typeof key.hash === 'string' && isOffset(key.block_offset)) return { id: key.hash, offset: Number(key.block_offset) };
  return null;
}

function isOffset(value: unknown): boolean {
  return (typeof value === 'number' && Number.isSafeInteger(value)) || (typeof value === 'bigint' && value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER));
}

function readMedia(value: readonly (readonly unknown[] | null)[] | null, blocks: number, field: string): (MediaKey[] | null)[] | null {
  if (value === null) return null;
  if (value.length !== blocks) throw new KvDecodeError(field, `must have one entry per block (${blocks}), got ${value.length}`);
  const media = value.map((entry, i) => readBlockMedia(entry, `${field}[${i}]`));
  return media.some((entry) => entry !== null) ? media : null;
}

function readOptionalString(value: unknown, field: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new KvDecodeError(field, `must be a string or null, got ${describeValue(value)}`);
  return value;
}

export function readDpRank(value: unknown, field: string): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_RANK) {
    throw new KvDecodeError(field, `must be an integer in [0, ${MAX_RANK}] or null, got ${describeValue(value)}`);
  }
  return value;
}

export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (value instanceof Uint8Array) return `${value.length} bytes`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === 'object') return 'a map';
  return `${typeof value} ${String(value)}`;
}

// ---------------------------------------------------------------------------
// Decoding

/** Decodes one msgpack batch payload; throws KvDecodeError on anything it cannot read. */
export function decodeKvBatch(payload: Uint8Array, options: DecodeOptions = {}): KvEventBatch {
  let root: unknown;
  try {
    root = unpackr.unpack(payload);
  } catch (err) {
    throw new KvDecodeError('payload', `not valid msgpack (${(err as Error).message})`);
  }
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(root)) {
    [ts, events, rank] = root;
  } else if (isMap(root)) {
    ({ ts, events, data_parallel_rank: rank } = root);
  } else {
    throw new KvDecodeError('batch', `must be a list [ts, events, dp_rank] or a map, got ${describeValue(root)}`);
  }
  if (!Array.isArray(events)) throw new KvDecodeError('events', `must be a list, got ${describeValue(events)}`);
  const out: KvEvent[] = [];
  for (let i = 0; i < events.length; i++) {
    const event = decodeEvent(events[i], `events[${i}]`, i, options);
    if (event) out.push(event);
  }
  return { ts: readTimestamp(ts), events: out, dpRank: readDpRank(rank, 'data_parallel_rank') };
}

function readTimestamp(value: unknown): number {
  const ts = typeof value === 'bigint' ? Number(value) : value;
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new KvDecodeError('ts', `must be a number, got ${describeValue(value)}`);
  return ts;
}

function decodeEvent(raw: unknown, path: string, index: number, options: DecodeOptions): KvEvent | null {
  let tag: unknown;
  let fieldsOf: (names: string[]) => Record<string, unknown>;
  if (Array.isArray(raw)) {
    tag = raw[0];
    fieldsOf = (names) => Object.fromEntries(names.map((name, i) => [name, raw[i + 1]]));
  } else if (isMap(raw)) {
    tag = raw.type;
    fieldsOf = () => raw;
  } else {
    throw new KvDecodeError(path, `event must be a tagged list or a map, got ${describeValue(raw)}`);
  }
  if (typeof tag !== 'string') throw new KvDecodeError(`${path}.type`, `event tag must be a string, got ${describeValue(tag)}`);
  switch (tag) {
    case TAG_STORED:
      return readStoredFields(fieldsOf(STORED_FIELDS), path, foldWireHash);
    case TAG_REMOVED:
      return readRemovedFields(fieldsOf(REMOVED_FIELDS), path, foldWireHash);
    case TAG_CLEARED:
      return { type: 'cleared' };
    default:
      options.onUnknownEvent?.(tag, index);
      return null;
  }
}

/** Reads one hash from its format's representation and folds it to u64. */
export type HashReader = (value: unknown, field: string) => bigint;

/** A BlockStored from its named fields (shared by the msgpack and JSON decoders). */
export function readStoredFields(f: Record<string, unknown>, path: string, readHash: HashReader): BlockStored {
  const parent = f.parent_block_hash;
  const blockHashes = readHashList(f.block_hashes, `${path}.block_hashes`, readHash);
  const tokenIds = readTokenIds(f.token_ids, `${path}.token_ids`);
  const stored: BlockStored = {
    type: 'stored',
    blockHashes,
    parentBlockHash: parent === undefined || parent === null ? null : readHash(parent, `${path}.parent_block_hash`),
    tokenIds,
    blockSize: readBlockSize(f.block_size, `${path}.block_size`, tokenIds.length === 0),
    // lora_id is deprecated upstream in favour of lora_name and is not read.
    loraName: readOptionalString(f.lora_name, `${path}.lora_name`),
    medium: readOptionalString(f.medium, `${path}.medium`),
  };
  const extraKeys = readExtraKeys(f.extra_keys, `${path}.extra_keys`);
  if (extraKeys !== null) stored.extraKeys = extraKeys;
  // The newer fields are set only when the engine sent them: an event from an engine that predates them reads as before.
  const media = readMedia(extraKeys, blockHashes.length, `${path}.extra_keys`);
  if (media) stored.media = media;
  const groupIdx = readOptionalCount(f.group_idx, `${path}.group_idx`);
  if (groupIdx !== null) stored.groupIdx = groupIdx;
  const specKind = readOptionalString(f.kv_cache_spec_kind, `${path}.kv_cache_spec_kind`);
  if (specKind !== null) stored.specKind = specKind;
  const slidingWindow = readOptionalCount(f.kv_cache_spec_sliding_window, `${path}.kv_cache_spec_sliding_window`);
  if (slidingWindow !== null) stored.slidingWindow = slidingWindow;
  // A placeholder names blocks without their tokens.
  if (tokenIds.length === 0) return stored;
  // Stored events carry every block's tokens; a partial block is never published.
  const want = stored.blockHashes.length * stored.blockSize;
  if (stored.tokenIds.length !== want) {
    throw new KvDecodeError(
      `${path}.token_ids`,
      `expected ${want} token ids (${stored.blockHashes.length} blocks of ${stored.blockSize}), got ${stored.tokenIds.length}`,
    );
  }
  return stored;
}

/** Per-block extra keys: a list whose entries are a tuple (a list) or null; null when absent. */
function readExtraKeys(value: unknown, field: string): (unknown[] | null)[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw new KvDecodeError(field, `must be a list with one entry per block, got ${describeValue(value)}`);
  return value.map((entry, i) => {
    if (entry === null || entry === undefined) return null;
    if (!Array.isArray(entry)) throw new KvDecodeError(`${field}[${i}]`, `must be a list of keys or null, got ${describeValue(entry)}`);
    return entry;
  });
}

/** A BlockRemoved from its named fields. */
export function readRemovedFields(f: Record<string, unknown>, path: string, readHash: HashReader): BlockRemoved {
  const removed: BlockRemoved = {
    type: 'removed',
    blockHashes: readHashList(f.block_hashes, `${path}.block_hashes`, readHash),
    medium: readOptionalString(f.medium, `${path}.medium`),
  };
  const groupIdx = readOptionalCount(f.group_idx, `${path}.group_idx`);
  if (groupIdx !== null) removed.groupIdx = groupIdx;
  return removed;
}

function readHashList(value: unknown, field: string, readHash: HashReader): bigint[] {
  if (!Array.isArray(value)) throw new KvDecodeError(field, `must be a list of hashes, got ${describeValue(value)}`);
  return value.map((hash, i) => readHash(hash, `${field}[${i}]`));
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

// ---------------------------------------------------------------------------
// Encoding (the simulated engine's publisher, and tests)

/**
 * Encodes a batch as an engine would. 'array' is msgspec's array_like layout
 * (SGLang, older vLLM): positional batch and tag-first event lists. 'map' is
 * newest vLLM's layout: named fields with a `type` tag. lora_id is written as
 * null in both. Hashes must already be u64.
 */
export function encodeKvBatch(batch: KvEventBatch, form: BatchForm): Uint8Array {
  const events = batch.events.map((event) => (form === 'array' ? eventAsArray(event) : eventAsMap(event)));
  if (form === 'array') {
    // msgspec omits a trailing field left at its default (dp_rank None).
    return packr.pack(batch.dpRank === null ? [batch.ts, events] : [batch.ts, events, batch.dpRank]);
  }
  const map: Record<string, unknown> = { ts: batch.ts, events };
  if (batch.dpRank !== null) map.data_parallel_rank = batch.dpRank;
  return packr.pack(map);
}

function eventAsArray(event: KvEvent): unknown[] {
  switch (event.type) {
    case 'stored':
      // The engine's extra keys as it sent them, else the media keys alone.
      return withoutTrailingDefaults(
        [
          TAG_STORED,
          event.blockHashes.map(wireHash),
          event.parentBlockHash === null ? null : wireHash(event.parentBlockHash),
          // A plain array: msgpack would encode a typed array as an extension no engine sends.
          Array.isArray(event.tokenIds) ? event.tokenIds : Array.from(event.tokenIds),
          event.blockSize,
          null,
          event.medium,
          event.loraName,
          event.extraKeys ?? (event.media ? event.media.map((items) => (items ? items.map((item) => [item.id, item.offset]) : null)) : null),
          event.groupIdx ?? null,
          event.specKind ?? null,
          event.slidingWindow ?? null,
        ],
        8,
      );
    case 'removed':
      return withoutTrailingDefaults([TAG_REMOVED, event.blockHashes.map(wireHash), event.medium, event.groupIdx ?? null], 3);
    case 'cleared':
      return [TAG_CLEARED];
  }
}

// msgspec omits trailing fields left at their defaults (None), past the required ones.
function withoutTrailingDefaults(fields: unknown[], required: number): unknown[] {
  let end = fields.length;
  while (end > required && fields[end - 1] === null) end--;
  return fields.slice(0, end);
}

function eventAsMap(event: KvEvent): Record<string, unknown> {
  const fields = eventAsArray(event);
  const names = event.type === 'stored' ? STORED_FIELDS : event.type === 'removed' ? REMOVED_FIELDS : [];
  return Object.fromEntries([['type', fields[0]], ...names.slice(0, fields.length - 1).map((name, i) => [name, fields[i + 1]])]);
}

// msgpackr writes integral numbers past 32 bits as float64, so larger hashes go
// as bigint (an int64 or uint64 on the wire, as msgspec writes them).
function wireHash(hash: bigint): number | bigint {
  if (hash < 0n || hash > U64_MASK) throw new RangeError(`block hash ${hash} is not an unsigned 64-bit value`);
  return hash <= 0xffffffffn ? Number(hash) : hash;
}

// ---------------------------------------------------------------------------
// Sequence frames

/** The replay stream's end marker: sequence -1 as a signed 8-byte integer. */
export const REPLAY_END_SEQ = -1;

/** An 8-byte big-endian sequence frame; -1 gives the replay end marker. */
export function encodeSeq(seq: number): Uint8Array {
  if (!Number.isSafeInteger(seq) || seq < REPLAY_END_SEQ) throw new RangeError(`sequence must be a safe integer >= -1, got ${seq}`);
  const frame = new Uint8Array(8);
  new DataView(frame.buffer).setBigInt64(0, BigInt(seq));
  return frame;
}

/**
 * Reads an 8-byte big-endian sequence frame: -1 for the replay end marker,
 * otherwise the unsigned value. Null when the frame is not 8 bytes or the
 * value is past 2^53 (no real publisher gets there; such a frame is garbage).
 */
export function decodeSeq(frame: Uint8Array): number | null {
  if (frame.length !== 8) return null;
  const view = new DataView(frame.buffer, frame.byteOffset, 8);
  if (view.getBigInt64(0) === -1n) return REPLAY_END_SEQ;
  const seq = view.getBigUint64(0);
  return seq <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(seq) : null;
}
