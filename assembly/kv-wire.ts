// KV-event batches read straight from their msgpack bytes, in the layouts
// vLLM and SGLang publish (router/kv-wire.ts decodes every layout in JS).
// Token ids are hashed from the message bytes, without a JS value per token,
// and the blocks stored into this core's prefix index. Exports are prefixed
// `wire`; the binding is bindings/kv-wire-reader.ts (scan) and
// PrefixIndex.applyWire (apply).
//
// The payload is read once, when it arrives; the index applies what that
// read wrote, after the listener has put the batch in sequence:
//   wireScan(len, seed) checks the payload in the wire buffer (wireInput
//                      reserves it) against the layout below and the rules of
//                      the JS decoder, and parses it: hashes as u64, each
//                      stored block's tokens hashed (XXH3 of u32 LE, under
//                      seed) at the event's block size. It returns the parsed
//                      batch's length (at wireParsedPtr) when every byte fits,
//                      the summary then holding ts, dp_rank and the event
//                      counts, or 0 when anything does not: the host decodes
//                      it in JS, which accepts or rejects it as it always has.
//                      It never changes the index.
//   wireApply(slot, len, blockSize, seed)
//                      applies a parsed batch, copied into the wire buffer of
//                      the index's core, event by event, through the index's
//                      own entry points (indexStored, indexRemoved,
//                      indexCleared); tallies go to the summary as each event
//                      completes, so they are right even after a failure
//                      stops the batch.
//
// The layouts the scan accepts (anything else is left to the JS decoder):
// positional (msgspec array_like: SGLang, older vLLM), below, or named
// (newest vLLM): the same fields as maps keyed by their names, the event's
// tag under `type`, the batch's dp_rank under `data_parallel_rank`.
//   batch   [ts, events] or [ts, events, dp_rank, ...]: ts an integer or a
//           finite float64; dp_rank nil or an integer in [0, 65535]
//   events  "BlockStored": [tag, hashes (>= 1), parent (nil or a hash),
//                           token_ids (hashes x block_size integers in
//                           [0, 2^32)), block_size (>= 1), lora_id (any),
//                           medium (nil or "GPU"), lora_name nil, extra_keys
//                           nil, group_idx nil, kv_cache_spec_kind nil,
//                           sliding_window nil, ...]
//           "BlockRemoved": [tag, hashes, medium (nil or "GPU"), group_idx nil, ...]
//           "AllBlocksCleared": [tag, ...]
//   a hash  an integer of any width (a negative one is its two's complement)
//           or a non-empty bin whose last 8 bytes, big-endian, are the u64
//   "any"   and the fields past the known ones: nil, booleans, integers,
//           floats, strings, bins, and arrays and maps (string keys) of
//           them, at most 16 deep.
// Token ids, block_size and dp_rank in a 64-bit encoding are not accepted
// (the JS decoder reads those as BigInt and rejects them), nor is a float32 ts
// (msgpackr may round it), nor trailing bytes after the batch, nor a block of
// more than 2^28 tokens or a batch whose parse would pass 2 GiB.
//
// Parsed batch: the seed u64, then one record per event, in order, each a
// multiple of 8 bytes:
//   stored   kind u32 (1), n u32, has_parent u32, block_size u32, parent u64,
//            external hashes u64[n], local hashes u64[n]   (the tail, from
//            parent on, is indexStored's input as it stands)
//   removed  kind u32 (2), n u32, external hashes u64[n]
//   cleared  kind u32 (3), 0 u32
//
// Summary (wireSummaryPtr, 72 bytes):
//   +0  ts f64            +8  dp_rank i32 (-1: none)
//   +12 stored events     +16 removed events    +20 cleared events     (scan)
//   +24 stores applied    +28 stores skipped (unknown parent)
//   +32 stores of another block size            +36 removals applied
//   +40 clears applied    +44 hashes of the event that found no memory (apply)
//   +48 held floor u32    +52 held delta i32                           (scan)
//   +56 block size of the last store (0: none)
//   +60 stores whose block size is not the first store's
//   +64 blocks stored u32                                              (scan)
// The held pair is what the batch does to a count of device blocks held (its
// stores add their blocks, its removals take theirs away but never below 0,
// a clear empties it): h blocks before the batch are max(floor, h + delta)
// after it, or floor alone when the batch has a clear. Every event the scan
// accepts is of the device tier, so the host keeps that count and the block
// sizes it checks without decoding the events.
//
// The wire buffer, the parsed batch and the scratch (one block of u32-LE
// tokens, for XXH3) are the host's, not the index's: from allocIfRoom (the
// fallible allocator without its test hook, so a test failing the index's
// next allocation fails the index's); with no memory for them the host
// decodes in JS instead.

import { allocIfRoom, release } from './alloc';
import { grownCapacity } from './grow';
import { STORED, indexCleared, indexInput, indexRemoved, indexStored } from './prefix-index';
import { xxh3 } from './xxh3';

/** wireApply outcomes. */
const APPLIED: u32 = 0;
const NO_MEMORY_STORING: u32 = 1;
const NO_MEMORY_STAGING: u32 = 2;
/** The bytes are not a parsed batch (a host bug: it must apply what wireScan wrote). */
const NOT_PARSED: u32 = 3;
/** The batch was hashed under another seed than the index's: nothing was applied (the host decodes in JS). */
const OTHER_SEED: u32 = 4;

/** indexStored's code for a store it had no memory for (prefix-index.ts). */
const INDEX_NO_MEMORY: u32 = 2;

const MAX_DEPTH: u32 = 16;
/** The longest hash list accepted (the bindings' MAX_BLOCKS). */
const MAX_HASHES: u32 = 1 << 26;

/** The most tokens a block may have here (its scratch stays under 4 GiB); a batch with more is left to the JS decoder. */
const MAX_BLOCK_TOKENS: u64 = 1 << 28;
/** The largest parsed batch (its buffer doubles up to it); a batch that needs more is left to the JS decoder. */
const MAX_PARSED: usize = 1 << 31;
/** The smallest wire buffer or parsed batch buffer (both double from it). */
const BUFFER_LEAST: u32 = 4096;

/** Parsed records (see the header). */
const RECORD_STORED: u32 = 1;
const RECORD_REMOVED: u32 = 2;
const RECORD_CLEARED: u32 = 3;
const STORED_HEAD: usize = 24;
const REMOVED_HEAD: usize = 8;

const SUMMARY_BYTES: i32 = 72;

const summary: usize = memory.data(SUMMARY_BYTES, 8);
const TAG_STORED: usize = memory.data<u8>([0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x53, 0x74, 0x6f, 0x72, 0x65, 0x64]);
const TAG_REMOVED: usize = memory.data<u8>([0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x52, 0x65, 0x6d, 0x6f, 0x76, 0x65, 0x64]);
const TAG_CLEARED: usize = memory.data<u8>([0x41, 0x6c, 0x6c, 0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x73, 0x43, 0x6c, 0x65, 0x61, 0x72, 0x65, 0x64]);
const MEDIUM_GPU: usize = memory.data<u8>([0x47, 0x50, 0x55]);

let buffer: usize = 0;
let bufferBytes: usize = 0;
let scratch: usize = 0;
let scratchBytes: usize = 0;
// The parsed batch: its buffer, and how much of it the scan has written.
let out: usize = 0;
let outBytes: usize = 0;
let outAt: usize = 0;
let scanSeed: u64 = 0;

// ---- reader ----------------------------------------------------------------------
// One cursor over the payload; every read checks the bytes are there.

let pos: usize = 0;
let end: usize = 0;

// The last integer read: its 64 bits, and whether msgpackr would give a
// number (an encoding of up to 32 bits) or a BigInt (a 64-bit one).
let intBits: u64 = 0;
let intWide = false;
let intSigned = false;

// The last string read.
let strAt: usize = 0;
let strLen: usize = 0;

const NOT_INT: i32 = 0;
const IS_INT: i32 = 1;

@inline
function has(n: usize): bool {
  return end - pos >= n;
}

@inline
function be16(at: usize): u32 {
  return <u32>bswap<u16>(load<u16>(at));
}

@inline
function be32(at: usize): u32 {
  return bswap<u32>(load<u32>(at));
}

@inline
function be64(at: usize): u64 {
  return bswap<u64>(load<u64>(at));
}

/** Reads an integer of any msgpack encoding into intBits; NOT_INT (nothing consumed) when the next value is not one. */
function readInt(): i32 {
  if (pos >= end) return NOT_INT;
  const b = <u32>load<u8>(pos);
  intWide = false;
  intSigned = false;
  if (b < 0x80) {
    intBits = <u64>b;
    pos++;
    return IS_INT;
  }
  if (b >= 0xe0) {
    intBits = <u64>(<i64>(<i8>b));
    intSigned = true;
    pos++;
    return IS_INT;
  }
  switch (b) {
    case 0xcc:
      if (!has(2)) return NOT_INT;
      intBits = <u64>load<u8>(pos + 1);
      pos += 2;
      return IS_INT;
    case 0xcd:
      if (!has(3)) return NOT_INT;
      intBits = <u64>be16(pos + 1);
      pos += 3;
      return IS_INT;
    case 0xce:
      if (!has(5)) return NOT_INT;
      intBits = <u64>be32(pos + 1);
      pos += 5;
      return IS_INT;
    case 0xcf:
      if (!has(9)) return NOT_INT;
      intBits = be64(pos + 1);
      intWide = true;
      pos += 9;
      return IS_INT;
    case 0xd0:
      if (!has(2)) return NOT_INT;
      intBits = <u64>(<i64>load<i8>(pos + 1));
      intSigned = true;
      pos += 2;
      return IS_INT;
    case 0xd1:
      if (!has(3)) return NOT_INT;
      intBits = <u64>(<i64>(<i16>be16(pos + 1)));
      intSigned = true;
      pos += 3;
      return IS_INT;
    case 0xd2:
      if (!has(5)) return NOT_INT;
      intBits = <u64>(<i64>(<i32>be32(pos + 1)));
      intSigned = true;
      pos += 5;
      return IS_INT;
    case 0xd3:
      if (!has(9)) return NOT_INT;
      intBits = be64(pos + 1);
      intWide = true;
      intSigned = true;
      pos += 9;
      return IS_INT;
  }
  return NOT_INT;
}

/** An integer msgpackr reads as a number, in [lo, hi]; false (the cursor anywhere) otherwise. */
function readSmall(lo: i64, hi: i64): bool {
  if (readInt() != IS_INT || intWide) return false;
  const v = <i64>intBits;
  return v >= lo && v <= hi;
}

/**
 * Reads `count` token ids (integers msgpackr reads as numbers, in [0, 2^32)),
 * writing them as u32 LE from `out` when out is not 0. The encodings engines
 * use are read inline on a local cursor; the rest go through readSmall.
 */
function readTokens(count: usize, out: usize): bool {
  let p = pos;
  const e = end;
  for (let i: usize = 0; i < count; i++) {
    let v: u32;
    const b = e - p >= 5 ? <u32>load<u8>(p) : 0xc1;
    if (b < 0x80) {
      v = b;
      p++;
    } else if (b == 0xce) {
      v = bswap<u32>(load<u32>(p, 1));
      p += 5;
    } else if (b == 0xcd) {
      v = <u32>bswap<u16>(load<u16>(p, 1));
      p += 3;
    } else {
      pos = p;
      if (!readSmall(0, 0xffffffff)) return false;
      v = <u32>intBits;
      p = pos;
    }
    if (out != 0) store<u32>(out + (i << 2), v);
  }
  pos = p;
  return true;
}

/** A block hash folded to u64 (see the header) into intBits. */
function readHash(): bool {
  if (readInt() == IS_INT) return true;
  if (pos >= end) return false;
  const b = <u32>load<u8>(pos);
  let len: usize;
  let at: usize;
  if (b == 0xc4) {
    if (!has(2)) return false;
    len = <usize>load<u8>(pos + 1);
    at = pos + 2;
  } else if (b == 0xc5) {
    if (!has(3)) return false;
    len = <usize>be16(pos + 1);
    at = pos + 3;
  } else if (b == 0xc6) {
    if (!has(5)) return false;
    len = <usize>be32(pos + 1);
    at = pos + 5;
  } else {
    return false;
  }
  if (len == 0 || end - at < len) return false;
  let v: u64 = 0;
  for (let i = len > 8 ? len - 8 : 0; i < len; i++) v = (v << 8) | <u64>load<u8>(at + i);
  intBits = v;
  pos = at + len;
  return true;
}

/**
 * A container header whose fix form is `fix` (0x90 array, 0x80 map) and whose
 * 16- and 32-bit forms are `wide` and wide + 1: its count, or -1 (nothing
 * consumed) when the next value is not one.
 */
@inline
function readHeader(fix: u32, wide: u32): i64 {
  if (pos >= end) return -1;
  const b = <u32>load<u8>(pos);
  if ((b & 0xf0) == fix) {
    pos++;
    return <i64>(b & 0x0f);
  }
  if (b == wide && has(3)) {
    const n = be16(pos + 1);
    pos += 3;
    return <i64>n;
  }
  if (b == wide + 1 && has(5)) {
    const n = be32(pos + 1);
    pos += 5;
    return <i64>n;
  }
  return -1;
}

/** An array header: its length, or -1 (nothing consumed) when the next value is not an array. */
function readArray(): i64 {
  return readHeader(0x90, 0xdc);
}

/** A string into strAt/strLen; false when the next value is not one. */
function readStr(): bool {
  if (pos >= end) return false;
  const b = <u32>load<u8>(pos);
  let len: usize;
  let at: usize;
  if ((b & 0xe0) == 0xa0) {
    len = <usize>(b & 0x1f);
    at = pos + 1;
  } else if (b == 0xd9 && has(2)) {
    len = <usize>load<u8>(pos + 1);
    at = pos + 2;
  } else if (b == 0xda && has(3)) {
    len = <usize>be16(pos + 1);
    at = pos + 3;
  } else if (b == 0xdb && has(5)) {
    len = <usize>be32(pos + 1);
    at = pos + 5;
  } else {
    return false;
  }
  if (end - at < len) return false;
  strAt = at;
  strLen = len;
  pos = at + len;
  return true;
}

function strIs(bytes: usize, len: usize): bool {
  return strLen == len && memory.compare(strAt, bytes, len) == 0;
}

/** Consumes a nil when one is next. */
@inline
function readNil(): bool {
  if (pos < end && load<u8>(pos) == 0xc0) {
    pos++;
    return true;
  }
  return false;
}

/** Medium: nil or "GPU" (the device tier; other tiers are left to the JS path). */
function readDeviceMedium(): bool {
  return readNil() || (readStr() && strIs(MEDIUM_GPU, 3));
}

/** Skips one value of the kinds a field the router does not read may hold (see the header). */
function skipValue(depth: u32): bool {
  if (pos >= end) return false;
  const b = <u32>load<u8>(pos);
  if (b < 0x80 || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
    pos++;
    return true;
  }
  if (readInt() == IS_INT) return true;
  if ((b & 0xe0) == 0xa0 || b == 0xd9 || b == 0xda || b == 0xdb) return readStr();
  if (b == 0xc4) return has(2) && skipBytes(2 + <usize>load<u8>(pos + 1));
  if (b == 0xc5) return has(3) && skipBytes(3 + <usize>be16(pos + 1));
  if (b == 0xc6) return has(5) && skipBytes(5 + <usize>be32(pos + 1));
  if (b == 0xca) return skipBytes(5);
  if (b == 0xcb) return skipBytes(9);
  if (depth >= MAX_DEPTH) return false;
  const n = readArray();
  if (n >= 0) {
    for (let i: i64 = 0; i < n; i++) if (!skipValue(depth + 1)) return false;
    return true;
  }
  // A map only with string keys, none of them "__proto__" (see the named fields below).
  const entries = readMap();
  if (entries < 0) return false;
  for (let i: i64 = 0; i < entries; i++) {
    if (!readStr() || strIs(KEY_PROTO, 9) || !skipValue(depth + 1)) return false;
  }
  return true;
}

function skipBytes(n: usize): bool {
  if (!has(n)) return false;
  pos += n;
  return true;
}

/** Skips the fields of an event or batch past the ones read. */
function skipRest(fields: i64, read: i64): bool {
  for (let i = read; i < fields; i++) if (!skipValue(1)) return false;
  return true;
}

// ---- named fields ----------------------------------------------------------------
// The named layout (newest vLLM: msgspec structs without array_like) is a map
// per batch and per event. A map is read in two steps: where each known key's
// value starts (any key order), then the values in the order the positional
// layout has them. A key given twice, a key that is not a string, and
// "__proto__" (which would change what the JS decoder's object reads) are
// left to the JS decoder.

const KEY_TYPE: usize = memory.data<u8>([0x74, 0x79, 0x70, 0x65]);
const KEY_BLOCK_HASHES: usize = memory.data<u8>([0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x68, 0x61, 0x73, 0x68, 0x65, 0x73]);
const KEY_PARENT_BLOCK_HASH: usize = memory.data<u8>([0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x5f, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x68, 0x61, 0x73, 0x68]);
const KEY_TOKEN_IDS: usize = memory.data<u8>([0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x5f, 0x69, 0x64, 0x73]);
const KEY_BLOCK_SIZE: usize = memory.data<u8>([0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x73, 0x69, 0x7a, 0x65]);
const KEY_LORA_ID: usize = memory.data<u8>([0x6c, 0x6f, 0x72, 0x61, 0x5f, 0x69, 0x64]);
const KEY_MEDIUM: usize = memory.data<u8>([0x6d, 0x65, 0x64, 0x69, 0x75, 0x6d]);
const KEY_LORA_NAME: usize = memory.data<u8>([0x6c, 0x6f, 0x72, 0x61, 0x5f, 0x6e, 0x61, 0x6d, 0x65]);
const KEY_EXTRA_KEYS: usize = memory.data<u8>([0x65, 0x78, 0x74, 0x72, 0x61, 0x5f, 0x6b, 0x65, 0x79, 0x73]);
const KEY_GROUP_IDX: usize = memory.data<u8>([0x67, 0x72, 0x6f, 0x75, 0x70, 0x5f, 0x69, 0x64, 0x78]);
const KEY_KV_CACHE_SPEC_KIND: usize = memory.data<u8>([0x6b, 0x76, 0x5f, 0x63, 0x61, 0x63, 0x68, 0x65, 0x5f, 0x73, 0x70, 0x65, 0x63, 0x5f, 0x6b, 0x69, 0x6e, 0x64]);
const KEY_KV_CACHE_SPEC_SLIDING_WINDOW: usize = memory.data<u8>([0x6b, 0x76, 0x5f, 0x63, 0x61, 0x63, 0x68, 0x65, 0x5f, 0x73, 0x70, 0x65, 0x63, 0x5f, 0x73, 0x6c, 0x69, 0x64, 0x69, 0x6e, 0x67, 0x5f, 0x77, 0x69, 0x6e, 0x64, 0x6f, 0x77]);
const KEY_PROTO: usize = memory.data<u8>([0x5f, 0x5f, 0x70, 0x72, 0x6f, 0x74, 0x6f, 0x5f, 0x5f]);
const KEY_TS: usize = memory.data<u8>([0x74, 0x73]);
const KEY_EVENTS: usize = memory.data<u8>([0x65, 0x76, 0x65, 0x6e, 0x74, 0x73]);
const KEY_DATA_PARALLEL_RANK: usize = memory.data<u8>([0x64, 0x61, 0x74, 0x61, 0x5f, 0x70, 0x61, 0x72, 0x61, 0x6c, 0x6c, 0x65, 0x6c, 0x5f, 0x72, 0x61, 0x6e, 0x6b]);

/** Field ids: an event's in positional order after the tag (0 is `type`), a batch's ts, events, data_parallel_rank. */
const EVENT_KEYS: i32 = 12;
const UNKNOWN_KEY: i32 = -1;
const REFUSED_KEY: i32 = -2;

/** Where each known field's value starts (0: absent), for the map being read. */
const fieldAt: usize = memory.data(EVENT_KEYS * 4, 4);

function eventKey(): i32 {
  if (strIs(KEY_TYPE, 4)) return 0;
  if (strIs(KEY_BLOCK_HASHES, 12)) return 1;
  if (strIs(KEY_PARENT_BLOCK_HASH, 17)) return 2;
  if (strIs(KEY_TOKEN_IDS, 9)) return 3;
  if (strIs(KEY_BLOCK_SIZE, 10)) return 4;
  if (strIs(KEY_LORA_ID, 7)) return 5;
  if (strIs(KEY_MEDIUM, 6)) return 6;
  if (strIs(KEY_LORA_NAME, 9)) return 7;
  if (strIs(KEY_EXTRA_KEYS, 10)) return 8;
  if (strIs(KEY_GROUP_IDX, 9)) return 9;
  if (strIs(KEY_KV_CACHE_SPEC_KIND, 18)) return 10;
  if (strIs(KEY_KV_CACHE_SPEC_SLIDING_WINDOW, 28)) return 11;
  return strIs(KEY_PROTO, 9) ? REFUSED_KEY : UNKNOWN_KEY;
}

function batchKey(): i32 {
  if (strIs(KEY_TS, 2)) return 0;
  if (strIs(KEY_EVENTS, 6)) return 1;
  if (strIs(KEY_DATA_PARALLEL_RANK, 18)) return 2;
  return strIs(KEY_PROTO, 9) ? REFUSED_KEY : UNKNOWN_KEY;
}

@inline
function isMapHead(b: u32): bool {
  return (b & 0xf0) == 0x80 || b == 0xde || b == 0xdf;
}

/** A map header: its entry count, or -1 (nothing consumed) when the next value is not a map. */
function readMap(): i64 {
  return readHeader(0x80, 0xde);
}

/** Reads a map's entries, recording where each known key's value starts in fieldAt; the cursor ends after the map. */
function readFields(entries: i64, batch: bool): bool {
  memory.fill(fieldAt, 0, EVENT_KEYS * 4);
  for (let i: i64 = 0; i < entries; i++) {
    if (!readStr()) return false;
    const id = batch ? batchKey() : eventKey();
    if (id == REFUSED_KEY) return false;
    if (id >= 0) {
      const at = fieldAt + (<usize>id << 2);
      if (load<u32>(at) != 0) return false;
      store<u32>(at, <u32>pos);
    }
    if (!skipValue(1)) return false;
  }
  return true;
}

@inline
function fieldStart(id: i32): usize {
  return <usize>load<u32>(fieldAt + (<usize>id << 2));
}


// ---- the scan --------------------------------------------------------------------
// One walk over the payload checks it and writes the parsed batch (see the
// header) as it goes; a payload it refuses leaves a parsed batch nobody reads.

@inline
function tally(at: usize): void {
  store<u32>(summary + at, load<u32>(summary + at) + 1);
}

// The block size of the batch's first store.
let firstBlockSize: u32 = 0;

/** A store of n device blocks of blockSize tokens: the held pair and the block sizes (see the header). */
function heldStored(n: u32, blockSize: u32): void {
  store<u32>(summary + 48, load<u32>(summary + 48) + n);
  store<i32>(summary + 52, load<i32>(summary + 52) + <i32>n);
  if (load<u32>(summary + 56) == 0) firstBlockSize = blockSize;
  else if (blockSize != firstBlockSize) tally(60);
  store<u32>(summary + 56, blockSize);
  store<u32>(summary + 64, load<u32>(summary + 64) + n);
}

/** A removal of n device blocks. */
function heldRemoved(n: u32): void {
  const floor = load<u32>(summary + 48);
  store<u32>(summary + 48, floor > n ? floor - n : 0);
  store<i32>(summary + 52, load<i32>(summary + 52) - <i32>n);
}

/** A clear: nothing held before it counts. */
function heldCleared(): void {
  store<u32>(summary + 48, 0);
  store<i32>(summary + 52, 0);
}

function walk(len: usize): bool {
  pos = buffer;
  end = buffer + min(len, bufferBytes);
  memory.fill(summary, 0, <usize>SUMMARY_BYTES);
  store<i32>(summary + 8, -1);
  outAt = 0;
  const head = reserveOut(8);
  if (head == 0) return false;
  store<u64>(head, scanSeed);
  if (pos < end && isMapHead(<u32>load<u8>(pos))) return walkNamed();
  const fields = readArray();
  if (fields < 2) return false;
  if (!readTs()) return false;
  if (!readEvents()) return false;
  if (fields >= 3 && !readRank()) return false;
  return skipRest(fields, 3) && pos == end;
}

// {ts, events, data_parallel_rank?, ...}
function walkNamed(): bool {
  const entries = readMap();
  if (entries < 0 || !readFields(entries, true)) return false;
  const after = pos;
  const ts = fieldStart(0);
  const events = fieldStart(1);
  const rank = fieldStart(2);
  if (ts == 0 || events == 0) return false;
  pos = ts;
  if (!readTs()) return false;
  pos = events;
  if (!readEvents()) return false;
  if (rank != 0) {
    pos = rank;
    if (!readRank()) return false;
  }
  return after == end;
}

function readEvents(): bool {
  const events = readArray();
  if (events < 0) return false;
  for (let i: i64 = 0; i < events; i++) {
    if (!readEvent()) return false;
  }
  return true;
}

function readRank(): bool {
  if (readNil()) return true;
  if (!readSmall(0, 0xffff)) return false;
  store<i32>(summary + 8, <i32>intBits);
  return true;
}

function readTs(): bool {
  if (readInt() == IS_INT) {
    store<f64>(summary, intSigned ? <f64>(<i64>intBits) : <f64>intBits);
    return true;
  }
  if (pos < end && load<u8>(pos) == 0xcb && has(9)) {
    const ts = reinterpret<f64>(be64(pos + 1));
    pos += 9;
    store<f64>(summary, ts);
    return isFinite(ts);
  }
  return false;
}

// The event being read: its layout, and its field count (positional) or where it ends (named).
let named = false;
let eventFields: i64 = 0;
let eventEnd: usize = 0;

/**
 * Moves to field `id` of the event (positional index `index`); false when the
 * event does not have it. Positional fields are read in order, so the cursor
 * is already there.
 */
function field(index: i64, id: i32): bool {
  if (!named) return index < eventFields;
  const at = fieldStart(id);
  if (at == 0) return false;
  pos = at;
  return true;
}

/** Past the event's fields from positional index `read` on. */
function finishEvent(read: i64): bool {
  if (!named) return skipRest(eventFields, read);
  pos = eventEnd;
  return true;
}

function readEvent(): bool {
  const entries = readMap();
  if (entries >= 0) {
    if (!readFields(entries, false)) return false;
    named = true;
    eventEnd = pos;
    const tag = fieldStart(0);
    if (tag == 0) return false;
    pos = tag;
  } else {
    named = false;
    eventFields = readArray();
    if (eventFields < 1) return false;
  }
  if (!readStr()) return false;
  if (strIs(TAG_STORED, 11)) return readStored();
  if (strIs(TAG_REMOVED, 12)) return readRemoved();
  if (strIs(TAG_CLEARED, 16)) {
    if (!finishEvent(1)) return false;
    tally(20);
    heldCleared();
    const record = reserveOut(8);
    if (record == 0) return false;
    store<u32>(record, RECORD_CLEARED);
    store<u32>(record, 0, 4);
    return true;
  }
  return false;
}

/**
 * A hash list's header: its length, or -1 when the next value is not one or
 * is longer than the bytes left could hold (a hash takes at least one).
 */
function readHashCount(): i64 {
  const n = readArray();
  if (n < 0 || n > <i64>MAX_HASHES || <u64>n > <u64>(end - pos)) return -1;
  return n;
}

/** n hashes, each written as u64 from `out`. */
function readHashes(n: u32, out: usize): bool {
  for (let i: u32 = 0; i < n; i++) {
    if (!readHash()) return false;
    store<u64>(out + (<usize>i << 3), intBits);
  }
  return true;
}

function readStored(): bool {
  tally(12);
  if (!field(1, 1)) return false;
  const count = readHashCount();
  if (count < 1) return false;
  const n = <u32>count;
  const record = reserveOut(STORED_HEAD + (<usize>n << 4));
  if (record == 0 || !readHashes(n, record + STORED_HEAD)) return false;
  let hasParent: u32 = 0;
  let parent: u64 = 0;
  if (field(2, 2) && !readNil()) {
    if (!readHash()) return false;
    hasParent = 1;
    parent = intBits;
  }
  if (!field(3, 3)) return false;
  const tokens = readArray();
  // A token takes at least a byte, so the scratch block below is at most four
  // times the payload.
  if (tokens < 1 || <u64>tokens > <u64>(end - pos)) return false;
  // block_size follows the tokens and must be tokens / n: the blocks are
  // hashed at that size here (a batch where it is not is refused below).
  if (<u64>tokens % <u64>n != 0) return false;
  const blockSize = <u64>tokens / <u64>n;
  if (blockSize > MAX_BLOCK_TOKENS || !readBlocks(record + STORED_HEAD + (<usize>n << 3), n, <u32>blockSize)) return false;
  if (!field(4, 4) || !readSmall(1, 0xffffffff) || intBits != blockSize) return false;
  if (field(5, 5) && !skipValue(1)) return false; // lora_id: deprecated upstream, not read
  if (field(6, 6) && !readDeviceMedium()) return false;
  // lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window
  for (let f: i32 = 7; f < 12; f++) if (field(f, f) && !readNil()) return false;
  if (!finishEvent(12)) return false;
  heldStored(n, <u32>blockSize);
  store<u32>(record, RECORD_STORED);
  store<u32>(record, n, 4);
  store<u32>(record, hasParent, 8);
  store<u32>(record, <u32>blockSize, 12);
  store<u64>(record, parent, 16);
  return true;
}

/** n blocks of blockSize tokens: each block's tokens as u32 LE in the scratch, hashed, its local hash written at `out`. */
function readBlocks(out: usize, n: u32, blockSize: u32): bool {
  const blockBytes = <usize>blockSize << 2;
  if (!reserveScratch(blockBytes)) return false;
  for (let b: u32 = 0; b < n; b++) {
    if (!readTokens(<usize>blockSize, scratch)) return false;
    store<u64>(out + (<usize>b << 3), xxh3(scratch, blockBytes, scanSeed));
  }
  return true;
}

function readRemoved(): bool {
  tally(16);
  if (!field(1, 1)) return false;
  const count = readHashCount();
  if (count < 0) return false;
  const n = <u32>count;
  const record = reserveOut(REMOVED_HEAD + (<usize>n << 3));
  if (record == 0 || !readHashes(n, record + REMOVED_HEAD)) return false;
  if (field(2, 6) && !readDeviceMedium()) return false;
  if (field(3, 9) && !readNil()) return false; // group_idx
  if (!finishEvent(4)) return false;
  heldRemoved(n);
  store<u32>(record, RECORD_REMOVED);
  store<u32>(record, n, 4);
  return true;
}

function reserveScratch(bytes: usize): bool {
  if (bytes <= scratchBytes) return true;
  const grown = allocIfRoom(bytes);
  if (grown == 0) return false;
  if (scratch != 0) release(scratch, scratchBytes);
  scratch = grown;
  scratchBytes = bytes;
  return true;
}

/** The next `bytes` of the parsed batch (the buffer grows, keeping what is written); 0 when there is no memory. */
function reserveOut(bytes: usize): usize {
  if (<u64>outAt + <u64>bytes > <u64>MAX_PARSED) return 0;
  const need = outAt + bytes;
  if (need > outBytes) {
    const next = <usize>grownCapacity(<u32>outBytes, <u32>need, BUFFER_LEAST);
    const grown = allocIfRoom(next);
    if (grown == 0) return 0;
    if (out != 0) {
      memory.copy(grown, out, outAt);
      release(out, outBytes);
    }
    out = grown;
    outBytes = next;
  }
  const at = out + outAt;
  outAt = need;
  return at;
}

// ---- the apply -------------------------------------------------------------------

/** The index's I/O buffer for `count` hashes, as the binding would stage them; 0 (outcome set) when it cannot grow. */
function staging(count: u32): usize {
  const input = indexInput(count);
  if (input == 0) {
    outcome = NO_MEMORY_STAGING;
    store<u32>(summary + 44, count);
  }
  return input;
}

let outcome: u32 = APPLIED;

/** Applies the records in [at, stop) one by one; false at a record that does not fit. */
function applyRecords(at: usize, stop: usize, slot: u32, blockSize: u32): bool {
  while (at < stop) {
    if (stop - at < 8) return false;
    const kind = load<u32>(at);
    const n = load<u32>(at, 4);
    if (kind == RECORD_STORED) {
      const bytes = STORED_HEAD + (<usize>n << 4);
      if (n == 0 || <u64>(stop - at) < <u64>bytes) return false;
      if (load<u32>(at, 12) != blockSize) {
        // Hashes over other block boundaries would never match.
        tally(32);
      } else {
        const input = staging(1 + 2 * n);
        if (input == 0) return true;
        memory.copy(input, at + 16, (<usize>n << 4) + 8);
        const status = indexStored(slot, load<u32>(at, 8), n);
        if (status == INDEX_NO_MEMORY) {
          outcome = NO_MEMORY_STORING;
          store<u32>(summary + 44, 1 + 2 * n);
          return true;
        }
        tally(status == STORED ? 24 : 28);
      }
      at += bytes;
    } else if (kind == RECORD_REMOVED) {
      const bytes = REMOVED_HEAD + (<usize>n << 3);
      if (<u64>(stop - at) < <u64>bytes) return false;
      const input = staging(n);
      if (input == 0) return true;
      memory.copy(input, at + REMOVED_HEAD, <usize>n << 3);
      indexRemoved(slot, n);
      tally(36);
      at += bytes;
    } else if (kind == RECORD_CLEARED) {
      indexCleared(slot);
      tally(40);
      at += 8;
    } else {
      return false;
    }
  }
  return true;
}

// ---- exports ---------------------------------------------------------------------

/** The wire buffer for a payload (or a parsed batch) of `bytes`; 0 when there is no memory for it. */
export function wireInput(bytes: u32): usize {
  if (<usize>bytes > bufferBytes) {
    const next = <usize>grownCapacity(<u32>bufferBytes, bytes, BUFFER_LEAST);
    const grown = allocIfRoom(next);
    if (grown == 0) return 0;
    if (buffer != 0) release(buffer, bufferBytes);
    buffer = grown;
    bufferBytes = next;
  }
  return buffer;
}

export function wireSummaryPtr(): usize {
  return summary;
}

/**
 * Checks the first len bytes of the wire buffer against the layout above and
 * parses them, hashing the stores' tokens under seed: the parsed batch's
 * length (at wireParsedPtr()), or 0 when the payload is not of the layout
 * (or there was no memory to parse it). Never changes the index.
 */
export function wireScan(len: u32, seed: u64): u32 {
  scanSeed = seed;
  return walk(len) ? <u32>outAt : 0;
}

/** Where the last scan wrote its parsed batch: valid until the next scan. */
export function wireParsedPtr(): usize {
  return out;
}

/**
 * Applies a parsed batch (first len bytes of the wire buffer) to worker
 * `slot` (this core's slot) of the index: stores of blockSize (another block
 * size's are skipped and counted), removals, clears. Returns APPLIED,
 * NO_MEMORY_STORING or NO_MEMORY_STAGING (the batch stopped there; the host
 * clears the worker), NOT_PARSED, or OTHER_SEED (nothing applied: the batch
 * was hashed under another seed). Allocates.
 */
export function wireApply(slot: u32, len: u32, blockSize: u32, seed: u64): u32 {
  memory.fill(summary + 24, 0, 24);
  if (len < 8 || <usize>len > bufferBytes) return NOT_PARSED;
  if (load<u64>(buffer) != seed) return OTHER_SEED;
  outcome = APPLIED;
  if (!applyRecords(buffer + 8, buffer + <usize>len, slot, blockSize)) return NOT_PARSED;
  return outcome;
}
