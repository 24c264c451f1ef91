// KV-event batches read straight from their msgpack bytes: the array layout
// vLLM and SGLang publish with msgspec's array_like (router/kv-wire.ts decodes
// every layout in JS). Token ids are hashed and blocks stored into this core's
// prefix index from the message bytes, without a JS value per token. Exports
// are prefixed `wire`; the binding is bindings/kv-wire-reader.ts (scan) and
// PrefixIndex.applyWire (apply).
//
// Two calls over the payload in the wire buffer (wireInput reserves it):
//   wireScan(len)      checks the whole batch against the layout below and the
//                      rules of the JS decoder; 1 when every byte fits (the
//                      summary then holds ts, dp_rank and the event counts),
//                      0 when anything does not: the host decodes it in JS,
//                      which accepts or rejects it as it always has. It never
//                      changes the index.
//   wireApply(slot, len, blockSize, seed)
//                      applies a batch wireScan accepted, event by event,
//                      through the index's own entry points (indexStored,
//                      indexRemoved, indexCleared); tallies go to the summary
//                      as each event completes, so they are right even after
//                      a failure stops the batch.
//
// The layout the scan accepts (anything else is left to the JS decoder):
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
//           floats, strings, bins, and arrays of them (at most 16 deep).
// Token ids, block_size and dp_rank in a 64-bit encoding are not accepted
// (the JS decoder reads those as BigInt and rejects them), nor is a float32 ts
// (msgpackr may round it), nor trailing bytes after the batch.
//
// Summary (wireSummaryPtr, 48 bytes):
//   +0  ts f64            +8  dp_rank i32 (-1: none)
//   +12 stored events     +16 removed events    +20 cleared events     (scan)
//   +24 stores applied    +28 stores skipped (unknown parent)
//   +32 stores of another block size            +36 removals applied
//   +40 clears applied    +44 hashes of the event that found no memory (apply)
//
// Scratch (one block of u32-LE tokens, for XXH3) and the wire buffer come from
// tryAlloc: with no memory for them the host decodes in JS instead.

import { release, tryAlloc } from './alloc';
import { STORED, indexCleared, indexInput, indexRemoved, indexStored } from './prefix-index';
import { xxh3 } from './xxh3';

/** wireApply outcomes. */
const APPLIED: u32 = 0;
const NO_MEMORY_STORING: u32 = 1;
const NO_MEMORY_STAGING: u32 = 2;
/** The payload is not one wireScan accepts (a host bug: it must scan first). */
const NOT_SCANNED: u32 = 3;
/** No memory for the scratch block: nothing was applied (the host decodes in JS). */
const NO_SCRATCH: u32 = 4;

/** indexStored's code for a store it had no memory for (prefix-index.ts). */
const INDEX_NO_MEMORY: u32 = 2;

const MAX_DEPTH: u32 = 16;
/** The longest hash list accepted (the bindings' MAX_BLOCKS). */
const MAX_HASHES: u32 = 1 << 26;

const summary: usize = memory.data(48, 8);
const TAG_STORED: usize = memory.data<u8>([0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x53, 0x74, 0x6f, 0x72, 0x65, 0x64]);
const TAG_REMOVED: usize = memory.data<u8>([0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x52, 0x65, 0x6d, 0x6f, 0x76, 0x65, 0x64]);
const TAG_CLEARED: usize = memory.data<u8>([0x41, 0x6c, 0x6c, 0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x73, 0x43, 0x6c, 0x65, 0x61, 0x72, 0x65, 0x64]);
const MEDIUM_GPU: usize = memory.data<u8>([0x47, 0x50, 0x55]);

let buffer: usize = 0;
let bufferBytes: usize = 0;
let scratch: usize = 0;
let scratchBytes: usize = 0;

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

/** An array header: its length, or -1 (nothing consumed) when the next value is not an array. */
function readArray(): i64 {
  if (pos >= end) return -1;
  const b = <u32>load<u8>(pos);
  if ((b & 0xf0) == 0x90) {
    pos++;
    return <i64>(b & 0x0f);
  }
  if (b == 0xdc && has(3)) {
    const n = be16(pos + 1);
    pos += 3;
    return <i64>n;
  }
  if (b == 0xdd && has(5)) {
    const n = be32(pos + 1);
    pos += 5;
    return <i64>n;
  }
  return -1;
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
  const n = readArray();
  if (n < 0 || depth >= MAX_DEPTH) return false;
  for (let i: i64 = 0; i < n; i++) if (!skipValue(depth + 1)) return false;
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

// ---- the walk --------------------------------------------------------------------
// One walk serves both calls: the scan checks (apply = false); the apply acts
// on a batch the scan accepted, re-checking as it goes so that bytes it was
// not given can never make it read outside the buffer.

let applying = false;
let applySlot: u32 = 0;
let applyBlockSize: u32 = 0;
let applySeed: u64 = 0;
let outcome: u32 = APPLIED;

@inline
function tally(at: usize): void {
  store<u32>(summary + at, load<u32>(summary + at) + 1);
}

function walk(len: usize): bool {
  pos = buffer;
  end = buffer + min(len, bufferBytes);
  memory.fill(summary, 0, 48);
  store<i32>(summary + 8, -1);
  const fields = readArray();
  if (fields < 2) return false;
  if (!readTs()) return false;
  const events = readArray();
  if (events < 0) return false;
  for (let i: i64 = 0; i < events; i++) {
    if (!readEvent()) return false;
    if (outcome != APPLIED) return true;
  }
  if (fields >= 3) {
    if (!readNil()) {
      if (!readSmall(0, 0xffff)) return false;
      store<i32>(summary + 8, <i32>intBits);
    }
  }
  return skipRest(fields, 3) && pos == end;
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

function readEvent(): bool {
  const fields = readArray();
  if (fields < 1 || !readStr()) return false;
  if (strIs(TAG_STORED, 11)) return readStored(fields);
  if (strIs(TAG_REMOVED, 12)) return readRemoved(fields);
  if (strIs(TAG_CLEARED, 16)) {
    if (!skipRest(fields, 1)) return false;
    tally(20);
    if (applying) {
      indexCleared(applySlot);
      tally(40);
    }
    return true;
  }
  return false;
}

/** Reads a hash list, writing it to `out` (u64 each) when out is not 0; its length, or -1 when it is not one. */
function readHashes(out: usize): i64 {
  const n = readArray();
  if (n < 0 || n > <i64>MAX_HASHES) return -1;
  for (let i: i64 = 0; i < n; i++) {
    if (!readHash()) return -1;
    if (out != 0) store<u64>(out + (<usize>i << 3), intBits);
  }
  return n;
}

/** The index's I/O buffer for `count` hashes, as the binding would stage them; 0 (outcome set) when it cannot grow. */
function staging(count: u32): usize {
  const input = indexInput(count);
  if (input == 0) {
    outcome = NO_MEMORY_STAGING;
    store<u32>(summary + 44, count);
  }
  return input;
}

function readStored(fields: i64): bool {
  if (fields < 5) return false;
  tally(12);
  const hashesAt = pos;
  const count = readHashes(0);
  if (count < 1) return false;
  const n = <u32>count;
  let hasParent: u32 = 0;
  let parent: u64 = 0;
  if (!readNil()) {
    if (!readHash()) return false;
    hasParent = 1;
    parent = intBits;
  }
  const tokens = readArray();
  if (tokens < 1) return false;
  // Known before block_size, which follows the tokens: they are whole blocks
  // of the router's size exactly when there are n of them per block.
  const hashed = applying && <u64>tokens == <u64>n * <u64>applyBlockSize;
  if (hashed) {
    const input = staging(1 + 2 * n);
    if (input == 0) return true;
    store<u64>(input, parent);
    if (!readBlocks(input + ((<usize>n + 1) << 3), n)) return false;
    const after = pos;
    pos = hashesAt;
    readHashes(input + 8);
    pos = after;
  } else {
    if (!readTokens(<usize>tokens, 0)) return false;
  }
  if (!readSmall(1, 0xffffffff) || <u64>tokens != <u64>n * intBits) return false;
  if (fields > 5 && !skipValue(1)) return false; // lora_id: deprecated upstream, not read
  if (fields > 6 && !readDeviceMedium()) return false;
  // lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window
  for (let f: i64 = 7; f < min<i64>(fields, 12); f++) if (!readNil()) return false;
  if (!skipRest(fields, 12)) return false;
  if (!applying) return true;
  if (!hashed) {
    tally(32);
    return true;
  }
  const status = indexStored(applySlot, hasParent, n);
  if (status == INDEX_NO_MEMORY) {
    outcome = NO_MEMORY_STORING;
    store<u32>(summary + 44, 1 + 2 * n);
  } else {
    tally(status == STORED ? 24 : 28);
  }
  return true;
}

/** n blocks of the router's block size: each block's tokens as u32 LE in the scratch, hashed, its local hash written at `out`. */
function readBlocks(out: usize, n: u32): bool {
  const blockBytes = <usize>applyBlockSize << 2;
  for (let b: u32 = 0; b < n; b++) {
    if (!readTokens(<usize>applyBlockSize, scratch)) return false;
    store<u64>(out + (<usize>b << 3), xxh3(scratch, blockBytes, applySeed));
  }
  return true;
}

function readRemoved(fields: i64): bool {
  if (fields < 2) return false;
  tally(16);
  const hashesAt = pos;
  const count = readHashes(0);
  if (count < 0) return false;
  if (fields > 2 && !readDeviceMedium()) return false;
  if (fields > 3 && !readNil()) return false; // group_idx
  if (!skipRest(fields, 4)) return false;
  if (!applying) return true;
  const input = staging(<u32>count);
  if (input == 0) return true;
  const after = pos;
  pos = hashesAt;
  readHashes(input);
  pos = after;
  indexRemoved(applySlot, <u32>count);
  tally(36);
  return true;
}

function reserveScratch(bytes: usize): bool {
  if (bytes <= scratchBytes) return true;
  const grown = tryAlloc(bytes);
  if (grown == 0) return false;
  if (scratch != 0) release(scratch, scratchBytes);
  scratch = grown;
  scratchBytes = bytes;
  return true;
}

// ---- exports ---------------------------------------------------------------------

/** The wire buffer for a payload of `bytes`; 0 when there is no memory for it. */
export function wireInput(bytes: u32): usize {
  if (<usize>bytes > bufferBytes) {
    let next = bufferBytes < 4096 ? <usize>4096 : bufferBytes;
    while (next < <usize>bytes) next <<= 1;
    const grown = tryAlloc(next);
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

/** 1 when the first len bytes of the wire buffer are a batch of the layout above; never changes the index. */
export function wireScan(len: u32): u32 {
  applying = false;
  outcome = APPLIED;
  return walk(len) ? 1 : 0;
}

/**
 * Applies a scanned batch to worker `slot` (this core's slot) of the index:
 * stores hashed at blockSize under seed (another block size's are skipped
 * and counted), removals, clears. Returns APPLIED, NO_MEMORY_STORING or
 * NO_MEMORY_STAGING (the batch stopped there; the host clears the worker),
 * NOT_SCANNED, or NO_SCRATCH (nothing applied). Allocates.
 */
export function wireApply(slot: u32, len: u32, blockSize: u32, seed: u64): u32 {
  if (blockSize == 0 || !reserveScratch(<usize>blockSize << 2)) return NO_SCRATCH;
  applying = true;
  applySlot = slot;
  applyBlockSize = blockSize;
  applySeed = seed;
  outcome = APPLIED;
  const read = walk(len);
  applying = false;
  if (!read) return NOT_SCANNED;
  return outcome;
}
