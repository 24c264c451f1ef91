import { alloc, release } from './alloc';

// Open-addressing hash map from u64 keys to u32 values, in memory the core
// allocates and frees itself (alloc.ts), so it never touches the garbage
// collector and gives its memory back when it shrinks.
//
// Layout: a power-of-two table of 16-byte entries
//   +0  key   u64
//   +8  value u32   (MAP_EMPTY marks a free slot, so every key, 0 included, is storable)
//   +12 pad   u32
// Linear probing with backward-shift deletion: no tombstones, so lookups of
// absent keys stay short however much the map churns.
//
// Iterating callers must not insert or delete while they walk the slots: both
// may resize the table.

export const MAP_EMPTY: u32 = 0xffffffff;
const MIN_CAPACITY: u32 = 16;

@unmanaged
export class U64Map {
  table: usize;
  mask: u32;
  size: u32;
}

// Multiplicative (Fibonacci) hashing: keys are often already hashes, but
// composite keys (node << 32 | worker) are not, so always mix.
@inline
function home(key: u64, mask: u32): u32 {
  return (<u32>((key * 0x9e3779b97f4a7c15) >> 32)) & mask;
}

@inline
function entry(table: usize, slot: u32): usize {
  return table + (<usize>slot << 4);
}

@inline
function tableBytes(capacity: u32): usize {
  return <usize>capacity << 4;
}

function allocTable(capacity: u32): usize {
  const bytes = tableBytes(capacity);
  const table = alloc(bytes);
  memory.fill(table, 0xff, bytes);
  return table;
}

export function mapCreate(capacity: u32): U64Map {
  const cap = capacityFor(capacity);
  const m = changetype<U64Map>(alloc(offsetof<U64Map>()));
  m.table = allocTable(cap);
  m.mask = cap - 1;
  m.size = 0;
  return m;
}

export function mapDestroy(m: U64Map): void {
  release(m.table, tableBytes(m.mask + 1));
  release(changetype<usize>(m), offsetof<U64Map>());
}

/** Removes every entry and returns the table to its minimum size. */
export function mapClear(m: U64Map): void {
  release(m.table, tableBytes(m.mask + 1));
  m.table = allocTable(MIN_CAPACITY);
  m.mask = MIN_CAPACITY - 1;
  m.size = 0;
}

/**
 * The slot holding key, or the free slot that ends its probe run (where an
 * insert would put it). Valid until the next insert, delete or resize.
 */
@inline
export function mapProbe(m: U64Map, key: u64): u32 {
  const table = m.table;
  const mask = m.mask;
  let slot = home(key, mask);
  while (true) {
    const e = entry(table, slot);
    if (load<u32>(e, 8) == MAP_EMPTY || load<u64>(e) == key) return slot;
    slot = (slot + 1) & mask;
  }
}

export function mapGet(m: U64Map, key: u64): u32 {
  return mapSlotValue(m, mapProbe(m, key));
}

/** The slot of key, as mapProbe, after making room for one more key if it is absent: a caller that finds the slot free may mapFill it. */
export function mapProbeForInsert(m: U64Map, key: u64): u32 {
  const slot = mapProbe(m, key);
  if (mapSlotValue(m, slot) != MAP_EMPTY || (m.size + 1) * 4 <= (m.mask + 1) * 3) return slot;
  rehash(m, (m.mask + 1) << 1);
  return mapProbe(m, key);
}

/** Stores key in the free slot that mapProbeForInsert just returned for it; value must not be MAP_EMPTY. */
@inline
export function mapFill(m: U64Map, slot: u32, key: u64, value: u32): void {
  const e = entry(m.table, slot);
  store<u64>(e, key);
  store<u32>(e, value, 8);
  m.size++;
}

/** Inserts or overwrites; value must not be MAP_EMPTY. */
export function mapSet(m: U64Map, key: u64, value: u32): void {
  const slot = mapProbeForInsert(m, key);
  if (mapSlotValue(m, slot) == MAP_EMPTY) mapFill(m, slot, key, value);
  else store<u32>(entry(m.table, slot), value, 8);
}

/** Removes key; returns its value, or MAP_EMPTY when absent. The table shrinks when it is mostly empty. */
export function mapDelete(m: U64Map, key: u64): u32 {
  const slot = mapProbe(m, key);
  const removed = mapSlotValue(m, slot);
  if (removed == MAP_EMPTY) return MAP_EMPTY;
  mapDeleteAt(m, slot);
  mapShrink(m);
  return removed;
}

/**
 * Removes the entry in an occupied slot (from mapProbe) without shrinking
 * the table: a caller removing many keys at once shrinks once at the end
 * (mapShrink) instead of rehashing on the way down.
 */
function mapDeleteAt(m: U64Map, slot: u32): void {
  const table = m.table;
  const mask = m.mask;
  let hole = slot;
  // Backward shift: pull later members of the probe run into the hole when
  // their home slot does not lie cyclically in (hole, probe].
  let probe = hole;
  while (true) {
    probe = (probe + 1) & mask;
    const p = entry(table, probe);
    if (load<u32>(p, 8) == MAP_EMPTY) break;
    const h = home(load<u64>(p), mask);
    const stays = hole <= probe ? (h > hole && h <= probe) : (h > hole || h <= probe);
    if (!stays) {
      const q = entry(table, hole);
      store<u64>(q, load<u64>(p));
      store<u32>(q, load<u32>(p, 8), 8);
      hole = probe;
    }
  }
  store<u32>(entry(table, hole), MAP_EMPTY, 8);
  m.size--;
}

/** Shrinks a mostly empty table straight to one half full (so a map emptied key by key is rehashed a few times, not once per halving). */
function mapShrink(m: U64Map): void {
  const capacity = m.mask + 1;
  if (capacity > MIN_CAPACITY && m.size * 8 < capacity) rehash(m, capacityFor(m.size * 2));
}

/** The smallest power-of-two capacity (at least MIN_CAPACITY) of `slots` or more. */
function capacityFor(slots: u32): u32 {
  let cap = MIN_CAPACITY;
  while (cap < slots) cap <<= 1;
  return cap;
}

export function mapCapacity(m: U64Map): u32 {
  return m.mask + 1;
}

/** The value in a slot (MAP_EMPTY when free); for iteration by slot. */
export function mapSlotValue(m: U64Map, slot: u32): u32 {
  return load<u32>(entry(m.table, slot), 8);
}

export function mapSlotKey(m: U64Map, slot: u32): u64 {
  return load<u64>(entry(m.table, slot));
}

function keepAll(_value: u32): bool {
  return true;
}

function rehash(m: U64Map, capacity: u32): void {
  rebuild(m, capacity, keepAll);
}

/**
 * Drops every entry whose value `keep` refuses, in one pass that moves the
 * rest to a table sized for `count` entries (the caller knows how many it
 * keeps), as full as a shrink leaves it.
 */
export function mapRetain(m: U64Map, count: u32, keep: (value: u32) => bool): void {
  rebuild(m, capacityFor(count * 2), keep);
}

function rebuild(m: U64Map, capacity: u32, keep: (value: u32) => bool): void {
  const old = m.table;
  const oldCapacity = m.mask + 1;
  m.table = allocTable(capacity);
  m.mask = capacity - 1;
  m.size = 0;
  for (let slot: u32 = 0; slot < oldCapacity; slot++) {
    const e = entry(old, slot);
    const value = load<u32>(e, 8);
    if (value != MAP_EMPTY && keep(value)) mapSet(m, load<u64>(e), value);
  }
  release(old, tableBytes(oldCapacity));
}
