import { give, take } from './prefix-memory';

// A worker's external-id table: the engine's block hash -> what the worker's
// id points at. One per worker slot; its header is the worker's 16 bytes in
// the ids column (prefix-slots.ts):
//   +0  entries  u32  address of the entries; 0 while the table is empty
//   +4  capacity u32  entries (any number >= 8, not only powers of two)
//   +8  size     u32  live entries
//   +12 spare    u32  not touched here (the worker's orphan total)
// Entry, 12 bytes, packed:
//   +0  id    u64   the engine's block hash
//   +8  word  u32   ID_EMPTY for a free entry, else node id (bits 0-29),
//                   EXTRA_REFS (bit 30: stored more than once, count in the
//                   refs table), ROUTED (bit 31: an approximate-mode block)
//
// Robin Hood open addressing, ordered: an id's home is its 32-bit mix scaled
// onto the capacity, and every run holds its entries in the order of their
// mixes (so of their homes), which makes an entry sit at most as far from its
// home as the entries it passed sit from theirs, and a lookup of an absent id
// stop where it would be, after a couple of probes. An insert moves the rest
// of its run up one entry; deletion shifts the following entries back (no
// tombstones). Since scaling keeps the order, a resize places the entries in
// one pass, in order, each at its new home or just past the one before. The table grows
// past 4/5 full, a step of 5/4 (load 0.65 to 0.8: at 7/8 the runs an
// insert or delete moves cost ingest a fifth more) and may shrink under 7/20;
// an emptied table frees its entries. Any insert, delete or resize may move
// entries.

export const ID_EMPTY: u32 = 0xffffffff;
export const NODE_BITS: u32 = 0x3fffffff;
export const EXTRA_REFS: u32 = 0x40000000;
export const ROUTED: u32 = 0x80000000;
const ID_ENTRY: usize = 12;
const MIN_CAPACITY: u32 = 8;

/** The id's 32-bit mix: the order entries keep within a run. */
@inline
function mix(id: u64): u32 {
  return <u32>((id * 0x9e3779b97f4a7c15) >> 32);
}

@inline
function scaled(m: u32, capacity: u32): u32 {
  return <u32>((<u64>m * <u64>capacity) >> 32);
}

@inline
function home(id: u64, capacity: u32): u32 {
  return scaled(mix(id), capacity);
}

@inline
function distance(slot: u32, from: u32, capacity: u32): u32 {
  return slot >= from ? slot - from : slot + capacity - from;
}

@inline
export function idsSize(h: usize): u32 {
  return load<u32>(h, 8);
}

@inline
export function idsCapacity(h: usize): u32 {
  return load<u32>(h, 4);
}

/** The entry at a position, for iteration (free when its word is ID_EMPTY). */
@inline
export function idsEntry(h: usize, slot: u32): usize {
  return <usize>load<u32>(h) + <usize>slot * ID_ENTRY;
}

/** Reads an id's home entry: many such reads in a row overlap their cache misses. */
@inline
export function idsTouch(h: usize, id: u64): u64 {
  const capacity = load<u32>(h, 4);
  return capacity == 0 ? 0 : load<u64>(<usize>load<u32>(h) + <usize>home(id, capacity) * ID_ENTRY);
}

// Where the last idsFind that missed stopped: the place idsInsertMissed puts
// the id, without probing again.
let stopSlot: u32 = 0;

/** The entry of `id`, or 0. */
export function idsFind(h: usize, id: u64): usize {
  const capacity = load<u32>(h, 4);
  if (capacity == 0) return 0;
  stopSlot = seek(<usize>load<u32>(h), capacity, id);
  const e = <usize>load<u32>(h) + <usize>stopSlot * ID_ENTRY;
  return load<u32>(e, 8) != ID_EMPTY && load<u64>(e) == id ? e : 0;
}

// The position of `id` in its run: its entry, or the first entry past where
// it would be (a free one, or one that comes after it in the run's order).
function seek(entries: usize, capacity: u32, id: u64): u32 {
  const m = mix(id);
  let slot = scaled(m, capacity);
  for (let d: u32 = 0; ; d++) {
    const e = entries + <usize>slot * ID_ENTRY;
    if (load<u32>(e, 8) == ID_EMPTY) return slot;
    const key = load<u64>(e);
    if (key == id) return slot;
    const residentMix = mix(key);
    const residentDistance = distance(slot, scaled(residentMix, capacity), capacity);
    if (residentDistance < d || (residentDistance == d && residentMix > m)) return slot;
    slot = slot + 1 == capacity ? 0 : slot + 1;
  }
  return 0;
}

/**
 * Makes room for `extra` more entries; false (nothing changed) when there is
 * no memory. Inserts after it cannot fail.
 */
export function idsReserve(h: usize, extra: u32): bool {
  const need = <u64>load<u32>(h, 8) + <u64>extra;
  const capacity = <u64>load<u32>(h, 4);
  if (need * 5 <= capacity * 4) return true;
  const next = capacityFor(need);
  return next != 0 && rehash(h, next);
}

// Capacities come from one ladder (8, then x5/4, rounded), so a table that
// holds at most n ids ends at the same size however its churn went.
function capacityFor(need: u64): u32 {
  let capacity: u64 = MIN_CAPACITY;
  while (need * 20 > capacity * 13) {
    capacity = (capacity * 5 + 3) >> 2;
    if (capacity > 0xfffffff) return 0;
  }
  return <u32>capacity;
}

/** Shrinks a sparse table when memory allows (no change otherwise). */
export function idsShrink(h: usize): void {
  const size = load<u32>(h, 8);
  const capacity = load<u32>(h, 4);
  if (size == 0) {
    idsRelease(h);
  } else if (capacity > MIN_CAPACITY && <u64>size * 20 < <u64>capacity * 7) {
    rehash(h, capacityFor(size));
  }
}

/**
 * Adds the id the last idsFind on this table missed, where that search
 * stopped; room was reserved before it, and nothing changed the table since.
 */
export function idsInsertMissed(h: usize, id: u64, word: u32): void {
  insertAt(h, id, word, stopSlot);
}

// Puts the id at `at`, its place in its run (seek), and moves the entries
// from there to the next free one up one entry: every run stays in order.
// Runs are a few entries long, so they move entry by entry, from the free end.
function insertAt(h: usize, id: u64, word: u32, at: u32): void {
  const entries = <usize>load<u32>(h);
  const capacity = load<u32>(h, 4);
  store<u32>(h, load<u32>(h, 8) + 1, 8);
  let free = at;
  while (load<u32>(entries + <usize>free * ID_ENTRY, 8) != ID_EMPTY) free = free + 1 == capacity ? 0 : free + 1;
  while (free != at) {
    const below = free == 0 ? capacity - 1 : free - 1;
    const to = entries + <usize>free * ID_ENTRY;
    const from = entries + <usize>below * ID_ENTRY;
    store<u64>(to, load<u64>(from));
    store<u32>(to, load<u32>(from, 8), 8);
    free = below;
  }
  const e = entries + <usize>at * ID_ENTRY;
  store<u64>(e, id);
  store<u32>(e, word, 8);
}

/** Deletes an entry (from idsFind or iteration); the following entries shift back. */
export function idsDelete(h: usize, e: usize): void {
  const entries = <usize>load<u32>(h);
  const capacity = load<u32>(h, 4);
  let hole = <u32>((e - entries) / ID_ENTRY);
  while (true) {
    const next = hole + 1 == capacity ? 0 : hole + 1;
    const n = entries + <usize>next * ID_ENTRY;
    const word = load<u32>(n, 8);
    if (word == ID_EMPTY) break;
    const key = load<u64>(n);
    if (home(key, capacity) == next) break;
    const q = entries + <usize>hole * ID_ENTRY;
    store<u64>(q, key);
    store<u32>(q, word, 8);
    hole = next;
  }
  store<u32>(entries + <usize>hole * ID_ENTRY, ID_EMPTY, 8);
  store<u32>(h, load<u32>(h, 8) - 1, 8);
}

/** Frees the entries; the header then describes an empty table. */
export function idsRelease(h: usize): void {
  const capacity = load<u32>(h, 4);
  if (capacity != 0) give(<usize>load<u32>(h), <usize>capacity * ID_ENTRY);
  store<u32>(h, 0);
  store<u32>(h, 0, 4);
  store<u32>(h, 0, 8);
}

function rehash(h: usize, capacity: u32): bool {
  const bytes = <usize>capacity * ID_ENTRY;
  const entries = take(bytes);
  if (entries == 0) return false;
  // Every byte 0xff: every word ID_EMPTY.
  memory.fill(entries, 0xff, bytes);
  const old = <usize>load<u32>(h);
  const oldCapacity = load<u32>(h, 4);
  store<u32>(h, <u32>entries);
  store<u32>(h, capacity, 4);
  store<u32>(h, 0, 8);
  if (oldCapacity != 0) place(h, old, oldCapacity);
  if (oldCapacity != 0) give(old, <usize>oldCapacity * ID_ENTRY);
  return true;
}

// Moves the entries of the old table into the empty new one. From just past
// a free entry the old entries come in the order of their mixes, wrapping
// once (runs are in order and never cross a free entry), and the new homes
// keep that order: each entry goes at its new home or just past the one
// before (positions counted on past the end once the order wraps). Should
// the last ones reach the first one placed, they are inserted as usual.
function place(h: usize, old: usize, oldCapacity: u32): void {
  const entries = <usize>load<u32>(h);
  const capacity = load<u32>(h, 4);
  let start: u32 = 0;
  while (load<u32>(old + <usize>start * ID_ENTRY, 8) != ID_EMPTY) start++;
  let first: u64 = 0;
  let next: u64 = 0; // the first position the next entry may take, counted on past the end
  let lastMix: u32 = 0;
  let wrapped: u64 = 0;
  let placed: u32 = 0;
  let spilled = false;
  for (let k: u32 = 0, i = start; k < oldCapacity; k++) {
    i = i + 1 >= oldCapacity ? 0 : i + 1;
    const from = old + <usize>i * ID_ENTRY;
    const word = load<u32>(from, 8);
    if (word == ID_EMPTY) continue;
    const id = load<u64>(from);
    if (spilled) {
      insertAt(h, id, word, seek(entries, capacity, id));
      continue;
    }
    const m = mix(id);
    if (placed != 0 && m < lastMix) wrapped = <u64>capacity;
    lastMix = m;
    let pos = <u64>scaled(m, capacity) + wrapped;
    if (placed == 0) first = pos;
    if (pos < next) pos = next;
    if (pos >= first + <u64>capacity) {
      spilled = true;
      insertAt(h, id, word, seek(entries, capacity, id));
      continue;
    }
    const e = entries + <usize>(pos >= <u64>capacity ? pos - <u64>capacity : pos) * ID_ENTRY;
    store<u64>(e, id);
    store<u32>(e, word, 8);
    store<u32>(h, load<u32>(h, 8) + 1, 8);
    next = pos + 1;
    placed++;
  }
}
