import { release } from './alloc';
import { grownCapacity, regrow } from './grow';
import { TABLE_HEADER_BYTES } from './prefix-table';

// Per-worker-slot columns of the prefix index. All grow together, to a power
// of two above the highest slot an event names, and only in ensureSlot (so
// findMatches never allocates and its output stays put until the next event):
//   tables    16 B/slot  header of the worker's external-id table (prefix-table.ts);
//                        its spare word (+12) is the worker's orphan total:
//                        how many of its memberships lack the parent block
//   marks      4 B/slot  findMatches stamps ("this worker holds the child")
//   active     4 B/slot  findMatches explicit list of still-matching slots
//   outSlots   4 B/slot  findMatches output: worker slots
//   outDepths  4 B/slot  findMatches output: matched blocks, same order
// A slot at or past the capacity has never stored anything, so reads treat
// it as empty rather than growing.

let capacity: u32 = 0;
let tables: usize = 0;
let marks: usize = 0;
let active: usize = 0;
let outSlots: usize = 0;
let outDepths: usize = 0;
let stamp: u32 = 0;

export function slotCapacity(): u32 {
  return capacity;
}

export function ensureSlot(slot: u32): void {
  if (slot < capacity) return;
  const next = grownCapacity(capacity, slot + 1);
  tables = regrow(tables, capacity, next, TABLE_HEADER_BYTES);
  marks = regrow(marks, capacity, next, 4);
  active = regrow(active, capacity, next, 4);
  outSlots = regrow(outSlots, capacity, next, 4);
  outDepths = regrow(outDepths, capacity, next, 4);
  capacity = next;
}

/** Frees every column (the index is empty again). */
export function releaseSlots(): void {
  if (capacity == 0) return;
  release(tables, <usize>capacity * TABLE_HEADER_BYTES);
  release(marks, <usize>capacity << 2);
  release(active, <usize>capacity << 2);
  release(outSlots, <usize>capacity << 2);
  release(outDepths, <usize>capacity << 2);
  capacity = 0;
  tables = marks = active = outSlots = outDepths = 0;
  stamp = 0;
}

/** The header of a worker's external-id table (the slot must be below the capacity). */
@inline
export function slotTable(slot: u32): usize {
  return tables + (<usize>slot << 4);
}

@inline
export function slotOrphans(slot: u32): u32 {
  return load<u32>(tables + (<usize>slot << 4), 12);
}

@inline
export function addSlotOrphans(slot: u32, delta: i32): void {
  const p = tables + (<usize>slot << 4);
  store<u32>(p, load<u32>(p, 12) + <u32>delta, 12);
}

@inline
export function setSlotOrphans(slot: u32, value: u32): void {
  store<u32>(tables + (<usize>slot << 4), value, 12);
}

/** A fresh stamp: no slot's mark equals it until marked. */
export function nextStamp(): u32 {
  stamp++;
  if (stamp == 0) {
    memory.fill(marks, 0, <usize>capacity << 2);
    stamp = 1;
  }
  return stamp;
}

@inline
export function markSlot(slot: u32, value: u32): void {
  store<u32>(marks + (<usize>slot << 2), value);
}

@inline
export function slotMark(slot: u32): u32 {
  return load<u32>(marks + (<usize>slot << 2));
}

@inline
export function activeList(): usize {
  return active;
}

@inline
export function outSlotsPtr(): usize {
  return outSlots;
}

@inline
export function outDepthsPtr(): usize {
  return outDepths;
}
