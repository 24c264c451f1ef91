import { grownCapacity } from './grow';
import { give, take } from './prefix-memory';
import { COPY_SLACK } from './prefix-members';

// Per-worker-slot columns of the prefix index. All grow together, to a power
// of two above the highest slot an event names, and only in ensureSlot (so
// findMatches never allocates and its output stays put until the next event):
//   ids        16 B/slot  header of the worker's external-id table (prefix-ids.ts);
//                         its spare word (+12) is the worker's orphan total:
//                         memberships whose parent block it lacks, under
//                         parents that track orphans
//   meta       16 B/slot  +0 evicted: (worker, block) pairs evicted since the
//                         worker was last cleared; +4 oldest: the stamp of the
//                         oldest block it held when eviction last looked (a
//                         lower bound on its blocks' stamps); +8 extras: its
//                         entries in the extra-ids table; +12 span: the next
//                         record of its span in the node pool (prefix-nodes.ts
//                         arenas; 0: none)
//   marks       4 B/slot  findMatches stamps ("this worker holds the child")
//   active      4 B/slot  findMatches explicit list of still-matching slots
//   outSlots    4 B/slot  findMatches output: worker slots
//   outDepths   4 B/slot  findMatches output: matched blocks, same order
// (active and outSlots have COPY_SLACK entries more, which member copies may
// write past what they copy)
// A slot at or past the capacity has never stored anything, so reads treat
// it as empty rather than growing.
//
// Slots here are the shard's own: a model's index may be split over several
// cores by worker (bindings/prefix-index-sharded.ts), each holding the slots
// s with s mod stride == offset as s / stride. findMatches writes the
// model's slots (local x stride + offset) to outSlots, so its output means
// the same in every shard.

let capacity: u32 = 0;
let ids: usize = 0;
let meta: usize = 0;
let marks: usize = 0;
let active: usize = 0;
let outSlots: usize = 0;
let outDepths: usize = 0;
let stamp: u32 = 0;
let stride: u32 = 1;
let offset: u32 = 0;

export function slotCapacity(): u32 {
  return capacity;
}

export function setSlotMapping(everyNth: u32, first: u32): void {
  stride = everyNth;
  offset = first;
}

export function slotStride(): u32 {
  return stride;
}

export function slotOffset(): u32 {
  return offset;
}

/** The model's slot for a shard slot. */
@inline
export function globalSlot(local: u32): u32 {
  return local * stride + offset;
}

/** Grows the columns to hold `slot`; false (nothing changed) when there is no memory. */
export function ensureSlot(slot: u32): bool {
  if (slot < capacity) return true;
  const next = grownCapacity(capacity, slot + 1);
  const wide = <usize>next << 4;
  const narrow = <usize>next << 2;
  const slack = narrow + (<usize>COPY_SLACK << 2);
  const newIds = take(wide);
  const newMeta: usize = newIds == 0 ? 0 : take(wide);
  const newMarks: usize = newMeta == 0 ? 0 : take(narrow);
  const newActive: usize = newMarks == 0 ? 0 : take(slack);
  const newSlots: usize = newActive == 0 ? 0 : take(slack);
  const newDepths: usize = newSlots == 0 ? 0 : take(narrow);
  if (newDepths == 0) {
    if (newSlots != 0) give(newSlots, slack);
    if (newActive != 0) give(newActive, slack);
    if (newMarks != 0) give(newMarks, narrow);
    if (newMeta != 0) give(newMeta, wide);
    if (newIds != 0) give(newIds, wide);
    return false;
  }
  ids = moveColumn(ids, newIds, 16, next, 0);
  meta = moveColumn(meta, newMeta, 16, next, 0);
  marks = moveColumn(marks, newMarks, 4, next, 0);
  active = moveColumn(active, newActive, 4, next, COPY_SLACK);
  outSlots = moveColumn(outSlots, newSlots, 4, next, COPY_SLACK);
  outDepths = moveColumn(outDepths, newDepths, 4, next, 0);
  capacity = next;
  return true;
}

// Copies a column into its grown replacement, zeroing the new part
// (`extra` entries of slack past the capacity included).
function moveColumn(old: usize, grown: usize, width: usize, next: u32, extra: u32): usize {
  const oldBytes = <usize>capacity * width;
  if (old != 0) {
    memory.copy(grown, old, oldBytes);
    give(old, oldBytes + <usize>extra * width);
  }
  memory.fill(grown + oldBytes, 0, <usize>(next + extra) * width - oldBytes);
  return grown;
}

/** Frees every column (the index is empty again). */
export function releaseSlots(): void {
  if (capacity == 0) return;
  give(ids, <usize>capacity << 4);
  give(meta, <usize>capacity << 4);
  give(marks, <usize>capacity << 2);
  give(active, <usize>(capacity + COPY_SLACK) << 2);
  give(outSlots, <usize>(capacity + COPY_SLACK) << 2);
  give(outDepths, <usize>capacity << 2);
  forgetSlots();
}

/** Drops the columns without freeing them (the state is abandoned after a trap). */
export function forgetSlots(): void {
  capacity = 0;
  ids = meta = marks = active = outSlots = outDepths = 0;
  stamp = 0;
}

/** The header of a worker's external-id table (the slot must be below the capacity). */
@inline
export function slotIds(slot: u32): usize {
  return ids + (<usize>slot << 4);
}

@inline
export function slotOrphans(slot: u32): u32 {
  return load<u32>(ids + (<usize>slot << 4), 12);
}

@inline
export function addSlotOrphans(slot: u32, delta: i32): void {
  const p = ids + (<usize>slot << 4);
  store<u32>(p, load<u32>(p, 12) + <u32>delta, 12);
}

@inline
export function setSlotOrphans(slot: u32, value: u32): void {
  store<u32>(ids + (<usize>slot << 4), value, 12);
}

@inline
export function slotMeta(slot: u32): usize {
  return meta + (<usize>slot << 4);
}

export const META_EVICTED: usize = 0;
export const META_OLDEST: usize = 4;
export const META_EXTRAS: usize = 8;
export const META_SPAN: usize = 12;

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
