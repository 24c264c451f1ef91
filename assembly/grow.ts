import { alloc, resize } from './alloc';

// Growable flat arrays for kernel state (per-slot columns, staging buffers)
// and pools of fixed-size records with a free list. New elements are zeroed so
// a grown column reads as "nothing booked yet" without a separate pass.

/** Marks "no record" in free lists and record links. */
export const NIL: u32 = 0xffffffff;

/** Grows (or first allocates) an array of `width`-byte elements; returns its new address. */
export function regrow(ptr: usize, oldCount: u32, newCount: u32, width: usize): usize {
  const oldBytes = <usize>oldCount * width;
  const newBytes = <usize>newCount * width;
  const p = ptr == 0 ? alloc(newBytes) : resize(ptr, oldBytes, newBytes);
  if (newBytes > oldBytes) memory.fill(p + oldBytes, 0, newBytes - oldBytes);
  return p;
}

/** The next capacity at least `needed`, doubling from `current` (minimum `least`). */
export function grownCapacity(current: u32, needed: u32, least: u32 = 16): u32 {
  let cap = current < least ? least : current;
  while (cap < needed) cap <<= 1;
  return cap;
}

/**
 * Records of `bytes` bytes addressed by a u32 index. Given-back indices are
 * handed out again first, chained through the u32 at offset `link` of each
 * free record, so the table never holds more records than were live at once.
 * The table moves when it grows: re-derive addresses after poolTake.
 */
@unmanaged
export class RecordPool {
  table: usize;
  capacity: u32;
  /** Indices below this have been handed out at least once. */
  high: u32;
  free: u32;
  bytes: u32;
  link: u32;
}

export function poolCreate(bytes: u32, link: u32): RecordPool {
  const p = changetype<RecordPool>(alloc(offsetof<RecordPool>()));
  p.table = 0;
  p.capacity = 0;
  p.high = 0;
  p.free = NIL;
  p.bytes = bytes;
  p.link = link;
  return p;
}

@inline
export function poolRecord(p: RecordPool, index: u32): usize {
  return p.table + <usize>index * <usize>p.bytes;
}

export function poolTake(p: RecordPool): u32 {
  if (p.free != NIL) {
    const index = p.free;
    p.free = load<u32>(poolRecord(p, index) + p.link);
    return index;
  }
  if (p.high == p.capacity) {
    const cap = grownCapacity(p.capacity, p.high + 1);
    p.table = regrow(p.table, p.capacity, cap, p.bytes);
    p.capacity = cap;
  }
  return p.high++;
}

export function poolGive(p: RecordPool, index: u32): void {
  store<u32>(poolRecord(p, index) + p.link, p.free);
  p.free = index;
}
