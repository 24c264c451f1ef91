import { give, take } from './prefix-memory';

// Open-addressing table of 16-byte entries, used by the prefix index for the
// tables every worker shares (children of wide nodes, orphan memberships,
// extra references and ids, routed records).
//
// Header (16 bytes, kept wherever the owner likes: static data or a column):
//   +0  entries u32   pointer to the entries; 0 while the table is empty
//   +4  mask    u32   capacity - 1 (capacity: a power of two >= 16)
//   +8  size    u32   live entries
//   +12 spare   u32   not touched here
// Entry:
//   +0  key u64
//   +8  a   u32       TABLE_EMPTY marks a free entry
//   +12 b   u32
//
// Keys may repeat: the children table stores hashed keys and tells entries
// with equal keys apart by what `a` points at, so lookups walk every entry
// with the key (tableFind, then tableFindNext). Linear probing with
// backward-shift deletion, so there are no tombstones and absent keys stay
// cheap however much the table churns. Growing happens only in tableReserve,
// which can fail (no memory) before anything changes, so inserts after it
// cannot; a delete shrinks a table under 1/8 full when memory allows, and
// frees its entries with the last one, so an emptied table holds no memory.
// Any insert or delete may move entries: an entry pointer is valid only until
// the next insert or delete on the same table.

export const TABLE_EMPTY: u32 = 0xffffffff;
export const TABLE_HEADER_BYTES: usize = 16;
const MIN_CAPACITY: u32 = 16;

@inline
function home(key: u64, mask: u32): u32 {
  // Fibonacci hashing, top bits: composite keys (node << 32 | slot) need the
  // high half mixed in as much as the low half.
  return <u32>((key * 0x9e3779b97f4a7c15) >> (64 - <u64>popcnt<u32>(mask)));
}

@inline
export function tableSize(h: usize): u32 {
  return load<u32>(h, 8);
}

@inline
export function tableCapacity(h: usize): u32 {
  return load<u32>(h) == 0 ? 0 : load<u32>(h, 4) + 1;
}

/** The entry at a slot, for iteration (check `a` against TABLE_EMPTY). */
@inline
export function tableEntry(h: usize, slot: u32): usize {
  return <usize>load<u32>(h) + (<usize>slot << 4);
}

/** The first entry with this key, or 0. */
export function tableFind(h: usize, key: u64): usize {
  const entries = <usize>load<u32>(h);
  if (entries == 0) return 0;
  const mask = load<u32>(h, 4);
  let slot = home(key, mask);
  while (true) {
    const e = entries + (<usize>slot << 4);
    if (load<u32>(e, 8) == TABLE_EMPTY) return 0;
    if (load<u64>(e) == key) return e;
    slot = (slot + 1) & mask;
  }
}

/** The next entry after `e` with the same key, or 0. */
export function tableFindNext(h: usize, e: usize, key: u64): usize {
  const entries = <usize>load<u32>(h);
  const mask = load<u32>(h, 4);
  let slot = <u32>((e - entries) >> 4);
  while (true) {
    slot = (slot + 1) & mask;
    const next = entries + (<usize>slot << 4);
    if (load<u32>(next, 8) == TABLE_EMPTY) return 0;
    if (load<u64>(next) == key) return next;
  }
}

/** Makes room for `extra` more entries; false (nothing changed) when there is no memory. */
export function tableReserve(h: usize, extra: u32): bool {
  const need = <u64>load<u32>(h, 8) + <u64>extra;
  const capacity = load<u32>(h) == 0 ? <u64>0 : <u64>load<u32>(h, 4) + 1;
  if (need * 4 <= capacity * 3) return true;
  let next = max<u64>(capacity, <u64>MIN_CAPACITY);
  while (need * 4 > next * 3) next <<= 1;
  if (next > 0x80000000) return false;
  return rehash(h, <u32>next);
}

/**
 * Adds an entry (even when the key is present) and returns it; room must be
 * reserved (tableReserve) and a must not be TABLE_EMPTY.
 */
export function tableInsert(h: usize, key: u64, a: u32, b: u32): usize {
  return place(h, key, a, b);
}

/** Deletes the entry `e` (from tableFind or iteration). */
export function tableDelete(h: usize, e: usize): void {
  const entries = <usize>load<u32>(h);
  const mask = load<u32>(h, 4);
  let hole = <u32>((e - entries) >> 4);
  let probe = hole;
  // Backward shift: pull later members of the probe run into the hole when
  // their home slot does not lie cyclically in (hole, probe].
  while (true) {
    probe = (probe + 1) & mask;
    const p = entries + (<usize>probe << 4);
    if (load<u32>(p, 8) == TABLE_EMPTY) break;
    const want = home(load<u64>(p), mask);
    const stays = hole <= probe ? want > hole && want <= probe : want > hole || want <= probe;
    if (!stays) {
      const q = entries + (<usize>hole << 4);
      store<u64>(q, load<u64>(p));
      store<u64>(q, load<u64>(p, 8), 8);
      hole = probe;
    }
  }
  store<u32>(entries + (<usize>hole << 4), TABLE_EMPTY, 8);
  const size = load<u32>(h, 8) - 1;
  store<u32>(h, size, 8);
  const capacity = mask + 1;
  if (size == 0) {
    tableRelease(h);
  } else if (capacity > MIN_CAPACITY && size * 8 < capacity) {
    rehash(h, capacity >> 1);
  }
}

/** Frees the entries; the header then describes an empty table. */
export function tableRelease(h: usize): void {
  const entries = <usize>load<u32>(h);
  if (entries != 0) give(entries, entryBytes(load<u32>(h, 4) + 1));
  store<u32>(h, 0);
  store<u32>(h, 0, 4);
  store<u32>(h, 0, 8);
}

@inline
function entryBytes(capacity: u32): usize {
  return <usize>capacity << 4;
}

function allocEntries(capacity: u32): usize {
  const bytes = entryBytes(capacity);
  const entries = take(bytes);
  if (entries != 0) memory.fill(entries, 0xff, bytes);
  return entries;
}

function place(h: usize, key: u64, a: u32, b: u32): usize {
  const entries = <usize>load<u32>(h);
  const mask = load<u32>(h, 4);
  let slot = home(key, mask);
  while (true) {
    const e = entries + (<usize>slot << 4);
    if (load<u32>(e, 8) == TABLE_EMPTY) {
      store<u64>(e, key);
      store<u32>(e, a, 8);
      store<u32>(e, b, 12);
      store<u32>(h, load<u32>(h, 8) + 1, 8);
      return e;
    }
    slot = (slot + 1) & mask;
  }
}

function rehash(h: usize, capacity: u32): bool {
  const entries = allocEntries(capacity);
  if (entries == 0) return false;
  const old = <usize>load<u32>(h);
  const oldCapacity: u32 = old == 0 ? 0 : load<u32>(h, 4) + 1;
  store<u32>(h, <u32>entries);
  store<u32>(h, capacity - 1, 4);
  store<u32>(h, 0, 8);
  for (let slot: u32 = 0; slot < oldCapacity; slot++) {
    const e = old + (<usize>slot << 4);
    if (load<u32>(e, 8) != TABLE_EMPTY) place(h, load<u64>(e), load<u32>(e, 8), load<u32>(e, 12));
  }
  if (old != 0) give(old, entryBytes(oldCapacity));
  return true;
}
