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
// Robin Hood open addressing: an entry sits at most as far from its home
// (multiply-shift of the mixed id onto the capacity) as the entries it passed
// sit from theirs, so a lookup of an absent id stops after a couple of probes.
// Deletion shifts the following entries back (no tombstones). The table grows
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

@inline
function home(id: u64, capacity: u32): u32 {
  return <u32>((((id * 0x9e3779b97f4a7c15) >> 32) * <u64>capacity) >> 32);
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

// Where the last idsFind that missed stopped, and how far from its id's home:
// the place idsInsertMissed puts the id, without probing again.
let stopSlot: u32 = 0;
let stopDistance: u32 = 0;

/** The entry of `id`, or 0. */
export function idsFind(h: usize, id: u64): usize {
  const capacity = load<u32>(h, 4);
  if (capacity == 0) return 0;
  const entries = <usize>load<u32>(h);
  let slot = home(id, capacity);
  for (let d: u32 = 0; ; d++) {
    const e = entries + <usize>slot * ID_ENTRY;
    if (load<u32>(e, 8) != ID_EMPTY) {
      const key = load<u64>(e);
      if (key == id) return e;
      if (distance(slot, home(key, capacity), capacity) >= d) {
        slot = slot + 1 == capacity ? 0 : slot + 1;
        continue;
      }
    }
    stopSlot = slot;
    stopDistance = d;
    return 0;
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

/** Adds `id` (absent, room reserved) and returns its entry. */
function idsInsert(h: usize, id: u64, word: u32): usize {
  return place(h, id, word, home(id, load<u32>(h, 4)), 0);
}

/**
 * Adds the id the last idsFind on this table missed, where that search
 * stopped; room was reserved before it, and nothing changed the table since.
 */
export function idsInsertMissed(h: usize, id: u64, word: u32): usize {
  return place(h, id, word, stopSlot, stopDistance);
}

function place(h: usize, id: u64, word: u32, from: u32, fromDistance: u32): usize {
  const entries = <usize>load<u32>(h);
  const capacity = load<u32>(h, 4);
  store<u32>(h, load<u32>(h, 8) + 1, 8);
  let slot = from;
  let key = id;
  let value = word;
  let d = fromDistance;
  let placed: usize = 0;
  while (true) {
    const e = entries + <usize>slot * ID_ENTRY;
    const resident = load<u32>(e, 8);
    if (resident == ID_EMPTY) {
      store<u64>(e, key);
      store<u32>(e, value, 8);
      return placed != 0 ? placed : e;
    }
    const residentKey = load<u64>(e);
    const residentDistance = distance(slot, home(residentKey, capacity), capacity);
    if (residentDistance < d) {
      // Take the richer entry's place and carry it on.
      store<u64>(e, key);
      store<u32>(e, value, 8);
      if (placed == 0) placed = e;
      key = residentKey;
      value = resident;
      d = residentDistance;
    }
    slot = slot + 1 == capacity ? 0 : slot + 1;
    d++;
  }
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
  for (let i: u32 = 0; i < capacity; i++) store<u32>(entries + <usize>i * ID_ENTRY, ID_EMPTY, 8);
  const old = <usize>load<u32>(h);
  const oldCapacity = load<u32>(h, 4);
  store<u32>(h, <u32>entries);
  store<u32>(h, capacity, 4);
  store<u32>(h, 0, 8);
  for (let i: u32 = 0; i < oldCapacity; i++) {
    const e = old + <usize>i * ID_ENTRY;
    const word = load<u32>(e, 8);
    if (word != ID_EMPTY) idsInsert(h, load<u64>(e), word);
  }
  if (oldCapacity != 0) give(old, <usize>oldCapacity * ID_ENTRY);
  return true;
}
