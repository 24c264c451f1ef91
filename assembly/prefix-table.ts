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
// with the key (tableFind, then tableFindNext). Robin Hood linear probing: an
// entry sits at most as far from its home slot as the entries it passed sit
// from theirs, so the entries of a home are together and in home order, and a
// lookup stops at the first entry closer to its home than the key would be.
// A miss then costs about what a hit does; under plain linear probing it
// walks the whole run it lands in, and at 3/4 load a table of millions holds
// runs of hundreds. Deletion shifts the run after the entry back by one (no
// tombstones), so absent keys stay cheap however much the table churns.
// Growing happens only in tableReserve,
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

@inline
function distance(slot: u32, from: u32, mask: u32): u32 {
  return (slot - from) & mask;
}

/** The first entry with this key, or 0. */
export function tableFind(h: usize, key: u64): usize {
  const entries = <usize>load<u32>(h);
  if (entries == 0) return 0;
  const mask = load<u32>(h, 4);
  return probe(entries, mask, key, home(key, mask), 0);
}

/** The next entry after `e` with the same key, or 0. */
export function tableFindNext(h: usize, e: usize, key: u64): usize {
  const entries = <usize>load<u32>(h);
  const mask = load<u32>(h, 4);
  const slot = <u32>((e - entries) >> 4);
  const next = (slot + 1) & mask;
  return probe(entries, mask, key, next, distance(next, home(key, mask), mask));
}

// The first entry with the key from `slot` on, `d` slots past the key's home;
// 0 at a free entry or one nearer its own home than d (the key would sit before it).
function probe(entries: usize, mask: u32, key: u64, slot: u32, d: u32): usize {
  while (true) {
    const e = entries + (<usize>slot << 4);
    if (load<u32>(e, 8) == TABLE_EMPTY) return 0;
    const resident = load<u64>(e);
    if (resident == key) return e;
    if (distance(slot, home(resident, mask), mask) < d) return 0;
    slot = (slot + 1) & mask;
    d++;
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
  // Backward shift: the run after the hole moves back one slot, up to a free
  // entry or one at its home.
  while (true) {
    const next = (hole + 1) & mask;
    const p = entries + (<usize>next << 4);
    if (load<u32>(p, 8) == TABLE_EMPTY || home(load<u64>(p), mask) == next) break;
    const q = entries + (<usize>hole << 4);
    store<u64>(q, load<u64>(p));
    store<u64>(q, load<u64>(p, 8), 8);
    hole = next;
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

// Robin Hood insertion: the new entry takes the place of the first resident
// nearer its home than the entry being carried, which is carried on from there.
function place(h: usize, key: u64, a: u32, b: u32): usize {
  const entries = <usize>load<u32>(h);
  const mask = load<u32>(h, 4);
  store<u32>(h, load<u32>(h, 8) + 1, 8);
  let slot = home(key, mask);
  let carried = key;
  let value = (<u64>b << 32) | <u64>a;
  let d: u32 = 0;
  let placed: usize = 0;
  while (true) {
    const e = entries + (<usize>slot << 4);
    if (load<u32>(e, 8) == TABLE_EMPTY) {
      store<u64>(e, carried);
      store<u64>(e, value, 8);
      return placed != 0 ? placed : e;
    }
    const resident = load<u64>(e);
    const residentDistance = distance(slot, home(resident, mask), mask);
    if (residentDistance < d) {
      const residentValue = load<u64>(e, 8);
      store<u64>(e, carried);
      store<u64>(e, value, 8);
      if (placed == 0) placed = e;
      carried = resident;
      value = residentValue;
      d = residentDistance;
    }
    slot = (slot + 1) & mask;
    d++;
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
