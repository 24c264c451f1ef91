import { give, pooledChange, take } from './prefix-memory';

// Approximate mode's bookkeeping: one record per routed block (a block the
// router assumes a worker caches because it sent it the prompt), and a
// min-heap over their expiries for expire() and size pruning. A routed
// block's external-id entry holds ROUTED | its record; the record holds the node.
//
// Heap order: expiry ascending, then depth descending (a chain's suffix goes
// before its prefix), then slot, then external id, so the order is total and
// the pure-TS twin can reproduce exactly which blocks a prune drops.
// A refresh pushes a new entry rather than moving the old one; an entry is
// live only while it still matches its record (same slot, id, expiry and
// depth), and the heap is compacted when stale entries outnumber live ones.
// Growth happens only in routedReserve, which can fail before anything changes.

const FREE_SLOT: u32 = 0xffffffff;
// 32-byte records: expiry f64, ext u64, slot u32 (FREE_SLOT while free),
// depth u32 (next free while free), node u32, pad.
const REC_SHIFT: usize = 5;
const REC_BYTES: usize = 1 << REC_SHIFT;
// 32-byte heap entries: expiry f64, ext u64, slot u32, depth u32, rec u32, pad.
const ENTRY_SHIFT: usize = 5;
/** Record numbers fit the 30 bits an external-id entry has for them. */
const RECORD_LIMIT: u32 = 0x3fffff00;

let recs: usize = 0;
let recCapacity: u32 = 0;
let recTop: u32 = 0;
let recFree: u32 = FREE_SLOT;
let live: u32 = 0;

let heap: usize = 0;
let heapCapacity: u32 = 0;
let heapLength: u32 = 0;

export function routedCount(): u32 {
  return live;
}

@inline
function rec(r: u32): usize {
  return recs + (<usize>r << REC_SHIFT);
}

@inline
function entry(i: u32): usize {
  return heap + (<usize>i << ENTRY_SHIFT);
}

@inline
export function routedNode(r: u32): u32 {
  return load<u32>(rec(r), 24);
}

/** Makes room for `count` more routed blocks or refreshes; false (nothing changed) when there is no memory. */
export function routedReserve(count: u32): bool {
  const freeRecords = recCapacity - recTop + (live < recTop ? recTop - live : 0);
  if (freeRecords < count) {
    const need = recTop + count;
    if (need > RECORD_LIMIT) return false;
    let next: u32 = recCapacity == 0 ? 256 : recCapacity;
    while (next < need) next <<= 1;
    const grown = take(<usize>next << REC_SHIFT);
    if (grown == 0) return false;
    if (recs != 0) {
      memory.copy(grown, recs, <usize>recTop << REC_SHIFT);
      give(recs, <usize>recCapacity << REC_SHIFT);
    }
    pooledChange(<isize>(<usize>(next - recCapacity) << REC_SHIFT));
    recs = grown;
    recCapacity = next;
  }
  if (heapLength + count > heapCapacity && heapLength >= live + (live >> 1)) compact();
  if (heapLength + count > heapCapacity) {
    let next: u32 = heapCapacity == 0 ? 256 : heapCapacity;
    while (next < heapLength + count) next <<= 1;
    const grown = take(<usize>next << ENTRY_SHIFT);
    if (grown == 0) return false;
    if (heap != 0) {
      memory.copy(grown, heap, <usize>heapLength << ENTRY_SHIFT);
      give(heap, <usize>heapCapacity << ENTRY_SHIFT);
    }
    heap = grown;
    heapCapacity = next;
  }
  return true;
}

/** A new routed record (room reserved). */
export function routedAlloc(slot: u32, ext: u64, depth: u32, expiry: f64, node: u32): u32 {
  let r = recFree;
  if (r != FREE_SLOT) {
    recFree = load<u32>(rec(r), 20);
  } else {
    r = recTop++;
  }
  pooledChange(-<isize>REC_BYTES);
  const p = rec(r);
  store<f64>(p, expiry);
  store<u64>(p, ext, 8);
  store<u32>(p, slot, 16);
  store<u32>(p, depth, 20);
  store<u32>(p, node, 24);
  live++;
  push(expiry, ext, slot, depth, r);
  return r;
}

export function routedFree(r: u32): void {
  const p = rec(r);
  store<u32>(p, FREE_SLOT, 16);
  store<u32>(p, recFree, 20);
  recFree = r;
  live--;
  pooledChange(<isize>REC_BYTES);
}

/** A refresh (room reserved). */
export function routedRefresh(r: u32, expiry: f64): void {
  const p = rec(r);
  if (load<f64>(p) == expiry) return;
  store<f64>(p, expiry);
  push(expiry, load<u64>(p, 8), load<u32>(p, 16), load<u32>(p, 20), r);
}

/** Frees the records and the heap; only when no routed block is left. */
export function releaseRouted(): void {
  if (recs != 0) {
    give(recs, <usize>recCapacity << REC_SHIFT);
    pooledChange(-<isize>(<usize>recCapacity << REC_SHIFT));
  }
  if (heap != 0) give(heap, <usize>heapCapacity << ENTRY_SHIFT);
  forgetRouted();
}

/** Drops the records and the heap without freeing them (the state is abandoned after a trap). */
export function forgetRouted(): void {
  recs = heap = 0;
  recCapacity = recTop = live = heapCapacity = heapLength = 0;
  recFree = FREE_SLOT;
}

// ---- heap -------------------------------------------------------------------

export function heapEmpty(): bool {
  return heapLength == 0;
}

export function topExpiry(): f64 {
  return load<f64>(entry(0));
}

export function topSlot(): u32 {
  return load<u32>(entry(0), 16);
}

export function topExt(): u64 {
  return load<u64>(entry(0), 8);
}

export function topDepth(): u32 {
  return load<u32>(entry(0), 20);
}

/** Whether the top entry still describes its record (else it is stale). */
export function topIsLive(): bool {
  return isLive(entry(0));
}

function isLive(e: usize): bool {
  const r = load<u32>(e, 24);
  if (r >= recTop) return false;
  const p = rec(r);
  return (
    load<u32>(p, 16) == load<u32>(e, 16) &&
    load<u64>(p, 8) == load<u64>(e, 8) &&
    load<f64>(p) == load<f64>(e) &&
    load<u32>(p, 20) == load<u32>(e, 20)
  );
}

export function heapPop(): void {
  heapLength--;
  if (heapLength == 0) return;
  const last = entry(heapLength);
  siftDown(0, load<f64>(last), load<u64>(last, 8), load<u32>(last, 16), load<u32>(last, 20), load<u32>(last, 24));
}

/** Pops stale entries off the top, so the top (if any) is a live routed block. */
export function dropStaleTop(): void {
  while (heapLength > 0 && !isLive(entry(0))) heapPop();
}

@inline
function before(ax: f64, ae: u64, as: u32, ad: u32, e: usize): bool {
  const bx = load<f64>(e);
  if (ax != bx) return ax < bx;
  const bd = load<u32>(e, 20);
  if (ad != bd) return ad > bd;
  const bs = load<u32>(e, 16);
  if (as != bs) return as < bs;
  return ae < load<u64>(e, 8);
}

@inline
function put(i: u32, x: f64, ext: u64, slot: u32, depth: u32, r: u32): void {
  const e = entry(i);
  store<f64>(e, x);
  store<u64>(e, ext, 8);
  store<u32>(e, slot, 16);
  store<u32>(e, depth, 20);
  store<u32>(e, r, 24);
}

function push(x: f64, ext: u64, slot: u32, depth: u32, r: u32): void {
  let i = heapLength++;
  while (i > 0) {
    const up = (i - 1) >> 1;
    const pe = entry(up);
    if (!before(x, ext, slot, depth, pe)) break;
    memory.copy(entry(i), pe, 1 << ENTRY_SHIFT);
    i = up;
  }
  put(i, x, ext, slot, depth, r);
}

function siftDown(i: u32, x: f64, ext: u64, slot: u32, depth: u32, r: u32): void {
  while (true) {
    let child = (i << 1) + 1;
    if (child >= heapLength) break;
    if (child + 1 < heapLength) {
      const right = entry(child + 1);
      const left = entry(child);
      if (before(load<f64>(right), load<u64>(right, 8), load<u32>(right, 16), load<u32>(right, 20), left)) child++;
    }
    const ce = entry(child);
    if (!childFirst(ce, x, ext, slot, depth)) break;
    memory.copy(entry(i), ce, 1 << ENTRY_SHIFT);
    i = child;
  }
  put(i, x, ext, slot, depth, r);
}

// Whether the entry at e orders strictly before the sifted value.
@inline
function childFirst(e: usize, x: f64, ext: u64, slot: u32, depth: u32): bool {
  const cx = load<f64>(e);
  if (cx != x) return cx < x;
  const cd = load<u32>(e, 20);
  if (cd != depth) return cd > depth;
  const cs = load<u32>(e, 16);
  if (cs != slot) return cs < slot;
  return load<u64>(e, 8) < ext;
}

// Drops stale entries and restores the heap order.
function compact(): void {
  let kept: u32 = 0;
  for (let i: u32 = 0; i < heapLength; i++) {
    const e = entry(i);
    if (isLive(e)) {
      if (kept != i) memory.copy(entry(kept), e, 1 << ENTRY_SHIFT);
      kept++;
    }
  }
  heapLength = kept;
  for (let i = <i32>(kept >> 1) - 1; i >= 0; i--) {
    const e = entry(<u32>i);
    siftDown(<u32>i, load<f64>(e), load<u64>(e, 8), load<u32>(e, 16), load<u32>(e, 20), load<u32>(e, 24));
  }
}
