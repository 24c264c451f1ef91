// The lane heap: many indexed binary min-heaps over integer item ids, used by
// the scheduler twice over: each policy class keeps a heap of its ready lanes
// (keyed by each lane's head) and each lane a heap of its queued entries.
//
// Order (see bindings/lane-order.ts): higher tier first, then earlier deadline
// (+Infinity = none), then lower policy key, then lower sequence number.
//
// Item record, 32 bytes, indexed by item id (the column grows to the highest id):
//   +0  tier     i32
//   +4  heap     u32   (NO_HEAP when the item is in no heap)
//   +8  pos      u32   position inside its heap's array
//   +12 seq      u32
//   +16 deadline f64
//   +24 key      f64
// Heap record, 16 bytes, indexed by heap id: +0 items ptr, +4 length, +8 capacity.
// A heap's items array holds item ids (u32). Freed heap ids are reused.
// Every call may grow memory except peek, size and heapOf.
import { alloc, release, resize } from './alloc';
import { grownCapacity } from './grow';

const NO_HEAP: u32 = 0xffffffff;
const ITEM: usize = 32;
const HEAP: usize = 16;

let items: usize = 0;
let itemCapacity: u32 = 0;
let heaps: usize = 0;
let heapCapacity: u32 = 0;
let heapCount: u32 = 0;
let freeHeaps: usize = 0; // u32 stack of released heap ids
let freeHeapCount: u32 = 0;
let freeHeapCapacity: u32 = 0;

@inline function item(id: u32): usize {
  return items + <usize>id * ITEM;
}
@inline function heap(id: u32): usize {
  return heaps + <usize>id * HEAP;
}
@inline function slotOf(h: usize, pos: u32): usize {
  return load<usize>(h) + (<usize>pos << 2);
}

@inline function before(a: u32, b: u32): bool {
  const pa = item(a);
  const pb = item(b);
  const ta = load<i32>(pa);
  const tb = load<i32>(pb);
  if (ta != tb) return ta > tb;
  const da = load<f64>(pa, 16);
  const db = load<f64>(pb, 16);
  if (da != db) return da < db;
  const ka = load<f64>(pa, 24);
  const kb = load<f64>(pb, 24);
  if (ka != kb) return ka < kb;
  return load<u32>(pa, 12) < load<u32>(pb, 12);
}

function ensureItems(id: u32): void {
  if (id < itemCapacity) return;
  const cap = grownCapacity(itemCapacity, id + 1);
  items = itemCapacity == 0 ? alloc(<usize>cap * ITEM) : resize(items, <usize>itemCapacity * ITEM, <usize>cap * ITEM);
  for (let i = itemCapacity; i < cap; i++) store<u32>(item(i), NO_HEAP, 4);
  itemCapacity = cap;
}

export function lanesCreateHeap(): u32 {
  let id: u32;
  if (freeHeapCount > 0) {
    freeHeapCount--;
    id = load<u32>(freeHeaps + (<usize>freeHeapCount << 2));
  } else {
    if (heapCount == heapCapacity) {
      const cap: u32 = heapCapacity == 0 ? 16 : heapCapacity << 1;
      heaps = heapCapacity == 0 ? alloc(<usize>cap * HEAP) : resize(heaps, <usize>heapCapacity * HEAP, <usize>cap * HEAP);
      heapCapacity = cap;
    }
    id = heapCount++;
  }
  const h = heap(id);
  store<usize>(h, alloc(16));
  store<u32>(h, 0, 4);
  store<u32>(h, 4, 8);
  return id;
}

export function lanesDestroyHeap(id: u32): void {
  const h = heap(id);
  const length = load<u32>(h, 4);
  for (let i: u32 = 0; i < length; i++) store<u32>(item(load<u32>(slotOf(h, i))), NO_HEAP, 4);
  release(load<usize>(h), <usize>load<u32>(h, 8) << 2);
  if (freeHeapCount == freeHeapCapacity) {
    const cap: u32 = freeHeapCapacity == 0 ? 16 : freeHeapCapacity << 1;
    freeHeaps = freeHeapCapacity == 0 ? alloc(<usize>cap << 2) : resize(freeHeaps, <usize>freeHeapCapacity << 2, <usize>cap << 2);
    freeHeapCapacity = cap;
  }
  store<u32>(freeHeaps + (<usize>freeHeapCount << 2), id);
  freeHeapCount++;
}

function place(h: usize, pos: u32, id: u32): void {
  store<u32>(slotOf(h, pos), id);
  store<u32>(item(id), pos, 8);
}

function siftUp(h: usize, pos: u32): void {
  const id = load<u32>(slotOf(h, pos));
  while (pos > 0) {
    const parent = (pos - 1) >> 1;
    const pid = load<u32>(slotOf(h, parent));
    if (!before(id, pid)) break;
    place(h, pos, pid);
    pos = parent;
  }
  place(h, pos, id);
}

function siftDown(h: usize, pos: u32): void {
  const length = load<u32>(h, 4);
  const id = load<u32>(slotOf(h, pos));
  while (true) {
    const left: u32 = 2 * pos + 1;
    if (left >= length) break;
    let child = left;
    let cid = load<u32>(slotOf(h, left));
    const right: u32 = left + 1;
    if (right < length) {
      const rid = load<u32>(slotOf(h, right));
      if (before(rid, cid)) {
        child = right;
        cid = rid;
      }
    }
    if (!before(cid, id)) break;
    place(h, pos, cid);
    pos = child;
  }
  place(h, pos, id);
}

function setOrder(id: u32, tier: i32, deadline: f64, key: f64, seq: u32): void {
  const p = item(id);
  store<i32>(p, tier);
  store<u32>(p, seq, 12);
  store<f64>(p, deadline, 16);
  store<f64>(p, key, 24);
}

/** Adds an item that is in no heap; returns false (and does nothing) otherwise. */
export function lanesPush(heapId: u32, id: u32, tier: i32, deadline: f64, key: f64, seq: u32): bool {
  ensureItems(id);
  if (load<u32>(item(id), 4) != NO_HEAP) return false;
  const h = heap(heapId);
  const length = load<u32>(h, 4);
  const capacity = load<u32>(h, 8);
  if (length == capacity) {
    store<usize>(h, resize(load<usize>(h), <usize>capacity << 2, <usize>capacity << 3));
    store<u32>(h, capacity << 1, 8);
  }
  setOrder(id, tier, deadline, key, seq);
  store<u32>(item(id), heapId, 4);
  store<u32>(h, length + 1, 4);
  store<u32>(slotOf(h, length), id);
  siftUp(h, length);
  return true;
}

/** Re-keys an item in place; false when it is in no heap. */
export function lanesUpdate(id: u32, tier: i32, deadline: f64, key: f64, seq: u32): bool {
  if (id >= itemCapacity) return false;
  const heapId = load<u32>(item(id), 4);
  if (heapId == NO_HEAP) return false;
  setOrder(id, tier, deadline, key, seq);
  const h = heap(heapId);
  const pos = load<u32>(item(id), 8);
  siftUp(h, pos);
  siftDown(h, load<u32>(item(id), 8));
  return true;
}

export function lanesRemove(id: u32): bool {
  if (id >= itemCapacity) return false;
  const heapId = load<u32>(item(id), 4);
  if (heapId == NO_HEAP) return false;
  const h = heap(heapId);
  const pos = load<u32>(item(id), 8);
  const last = load<u32>(h, 4) - 1;
  store<u32>(h, last, 4);
  store<u32>(item(id), NO_HEAP, 4);
  if (pos != last) {
    const moved = load<u32>(slotOf(h, last));
    place(h, pos, moved);
    siftUp(h, pos);
    siftDown(h, load<u32>(item(moved), 8));
  }
  shrink(h);
  return true;
}

// Give memory back when a heap that grew large has emptied out.
function shrink(h: usize): void {
  const capacity = load<u32>(h, 8);
  if (capacity > 16 && load<u32>(h, 4) * 4 < capacity) {
    store<usize>(h, resize(load<usize>(h), <usize>capacity << 2, <usize>capacity << 1));
    store<u32>(h, capacity >> 1, 8);
  }
}

/** The first item of a heap, or -1 when it is empty. */
export function lanesPeek(heapId: u32): i32 {
  const h = heap(heapId);
  return load<u32>(h, 4) == 0 ? -1 : <i32>load<u32>(load<usize>(h));
}

export function lanesPop(heapId: u32): i32 {
  const top = lanesPeek(heapId);
  if (top >= 0) lanesRemove(<u32>top);
  return top;
}

export function lanesSize(heapId: u32): u32 {
  return load<u32>(heap(heapId), 4);
}

/** The heap an item is in, or -1. */
export function lanesHeapOf(id: u32): i32 {
  if (id >= itemCapacity) return -1;
  const heapId = load<u32>(item(id), 4);
  return heapId == NO_HEAP ? -1 : <i32>heapId;
}
