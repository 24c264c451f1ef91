import { EXTRA_REFS, ID_EMPTY, NODE_BITS, ROUTED, idsCapacity, idsDelete, idsEntry, idsFind, idsInsertMissed, idsRelease, idsReserve, idsShrink, idsSize } from './prefix-ids';
import { ROOT, PARENT, isTracked, memberCount, memberDrop, memberHas, memberJoin, memberLeave, nodeAt, orphanEnd, setHoldRetrack } from './prefix-nodes';
import { TABLE_HEADER_BYTES, tableDelete, tableFind, tableFindNext, tableInsert, tableReserve } from './prefix-table';
import { META_EVICTED, META_EXTRAS, setSlotOrphans, slotCapacity, slotIds, slotMeta } from './prefix-slots';
import { heapEmpty, heapPop, routedAlloc, routedCount, routedFree, routedNode, routedRefresh, topExpiry, topExt, topIsLive, topSlot } from './prefix-routed';

// A worker's external ids and what they point at (prefix-ids.ts holds the
// table). A membership (worker, node) lives as long as any of the worker's
// ids points at the node. The usual case, one id stored once, costs the
// 12-byte entry alone; the rest lives in shared tables (prefix-table.ts):
//   refs table    key id -> a: slot, b: references beyond the first (an id
//                 stored again: the entry's EXTRA_REFS flag says to look)
//   extras table  key node << 32 | slot -> a: the worker's ids for the node
//                 beyond the first (its count of such entries is in the slot
//                 meta, so workers without any never look)
//
// Rules the pure-TS twin mirrors:
// - storing an id already bound to the same node adds a reference (a routed
//   binding becomes a stored one with one reference: events are authoritative);
// - storing or routing an id bound to another node rebinds it (the newest
//   event wins): the new node is joined before the old one is left, so no
//   node on the path being stored is freed under it;
// - routing an id bound by events to the same node leaves it alone;
// - removing drops one reference (a routed binding has one).
// Binding can fail for want of memory and then changes nothing; unbinding
// and clearing never allocate.

export const refsTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);
export const extrasTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);
/** References saturate below this (2^31 stores of one block by one worker). */
const REFS_MAX: u32 = 0x7ffffffe;

/**
 * The chained sequence hash routed blocks use as external ids:
 * seq[0] = local[0], seq[i] = chainMix(seq[i-1], local[i]), where chainMix
 * multiplies the previous id by the 64-bit golden ratio, adds the block's
 * local hash (wrapping) and runs the murmur3 64-bit finalizer over the sum.
 */
export function chainMix(prev: u64, local: u64): u64 {
  let k = prev * 0x9e3779b97f4a7c15 + local;
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccd;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53;
  k ^= k >> 33;
  return k;
}

/** The node an entry's word points at. */
@inline
export function wordNode(word: u32): u32 {
  return word & ROUTED ? routedNode(word & NODE_BITS) : word & NODE_BITS;
}

/** The refs-table entry of (slot, id), or 0. */
export function refsFind(slot: u32, id: u64): usize {
  let e = tableFind(refsTable, id);
  while (e != 0 && load<u32>(e, 8) != slot) e = tableFindNext(refsTable, e, id);
  return e;
}

@inline
function extrasKey(n: u32, slot: u32): u64 {
  return (<u64>n << 32) | <u64>slot;
}

/** The extras-table entry of (node, slot), or 0. */
export function extrasFind(n: u32, slot: u32): usize {
  return load<u32>(slotMeta(slot), META_EXTRAS) == 0 ? 0 : tableFind(extrasTable, extrasKey(n, slot));
}

@inline
function addExtras(slot: u32, delta: i32): void {
  const m = slotMeta(slot);
  store<u32>(m, load<u32>(m, META_EXTRAS) + <u32>delta, META_EXTRAS);
}

// The worker takes one more id on n: it joins n, or counts one more id for
// it. False (nothing changed) when there is no memory.
function holdNode(n: u32, slot: u32, parentHeld: i32): bool {
  const p = nodeAt(n);
  if (memberCount(p) != 0 && memberHas(p, slot)) {
    const x = extrasFind(n, slot);
    if (x != 0) {
      store<u32>(x, load<u32>(x, 8) + 1, 8);
      return true;
    }
    if (!tableReserve(extrasTable, 1)) return false;
    tableInsert(extrasTable, extrasKey(n, slot), 1, 0);
    addExtras(slot, 1);
    return true;
  }
  return memberJoin(n, slot, parentHeld);
}

// The worker lets go of one id on n: one of its extra ids, or the membership.
function releaseNode(n: u32, slot: u32): void {
  const x = extrasFind(n, slot);
  if (x != 0) {
    const count = load<u32>(x, 8) - 1;
    if (count != 0) {
      store<u32>(x, count, 8);
    } else {
      tableDelete(extrasTable, x);
      addExtras(slot, -1);
    }
    return;
  }
  memberLeave(n, slot);
}

// Frees what an entry keeps beside its word: its routed record or its extra references.
function dropSideData(slot: u32, id: u64, word: u32): void {
  if (word & ROUTED) routedFree(word & NODE_BITS);
  else if (word & EXTRA_REFS) tableDelete(refsTable, refsFind(slot, id));
}

/**
 * A stored event's block: worker `slot` holds node n under id `id`.
 * parentHeld as for memberJoin. False (nothing changed) when there is no memory.
 */
export function bindStored(slot: u32, id: u64, n: u32, parentHeld: i32): bool {
  const h = slotIds(slot);
  // Room for a new id first: the lookup then leaves where to put it.
  if (!idsReserve(h, 1)) return false;
  const e = idsFind(h, id);
  if (e == 0) {
    if (!holdNode(n, slot, parentHeld)) return false;
    idsInsertMissed(h, id, n);
    return true;
  }
  const word = load<u32>(e, 8);
  const old = wordNode(word);
  if (old == n) {
    if (word & ROUTED) {
      routedFree(word & NODE_BITS);
      store<u32>(e, n, 8);
    } else if (word & EXTRA_REFS) {
      const r = refsFind(slot, id);
      store<u32>(r, min(load<u32>(r, 12) + 1, REFS_MAX), 12);
    } else {
      if (!tableReserve(refsTable, 1)) return false;
      tableInsert(refsTable, id, slot, 1);
      store<u32>(e, word | EXTRA_REFS, 8);
    }
    return true;
  }
  if (!holdNode(n, slot, parentHeld)) return false;
  dropSideData(slot, id, word);
  store<u32>(e, n, 8);
  releaseNode(old, slot);
  return true;
}

/**
 * A routed block: worker `slot` is assumed to hold node n (at `depth`) until
 * expiry. Room for one routed record reserved; false (nothing changed) when
 * there is no memory.
 */
export function bindRouted(slot: u32, id: u64, n: u32, depth: u32, expiry: f64, parentHeld: i32): bool {
  const h = slotIds(slot);
  if (!idsReserve(h, 1)) return false;
  const e = idsFind(h, id);
  if (e == 0) {
    if (!holdNode(n, slot, parentHeld)) return false;
    idsInsertMissed(h, id, ROUTED | routedAlloc(slot, id, depth, expiry, n));
    return true;
  }
  const word = load<u32>(e, 8);
  const old = wordNode(word);
  if (old == n) {
    if (word & ROUTED) routedRefresh(word & NODE_BITS, expiry);
    return true;
  }
  if (!holdNode(n, slot, parentHeld)) return false;
  dropSideData(slot, id, word);
  store<u32>(e, ROUTED | routedAlloc(slot, id, depth, expiry, n), 8);
  releaseNode(old, slot);
  return true;
}

/** The node worker `slot` binds id to, or NONE. */
export function boundNode(slot: u32, id: u64): u32 {
  if (slot >= slotCapacity()) return 0xffffffff;
  const e = idsFind(slotIds(slot), id);
  return e == 0 ? 0xffffffff : wordNode(load<u32>(e, 8));
}

/** Drops one reference to id; false when the worker has no such id. */
export function unbind(slot: u32, id: u64): bool {
  if (slot >= slotCapacity()) return false;
  const h = slotIds(slot);
  const e = idsFind(h, id);
  if (e == 0) return false;
  const word = load<u32>(e, 8);
  if (!(word & ROUTED) && word & EXTRA_REFS) {
    const r = refsFind(slot, id);
    const extra = load<u32>(r, 12) - 1;
    if (extra != 0) {
      store<u32>(r, extra, 12);
    } else {
      tableDelete(refsTable, r);
      store<u32>(e, word & ~EXTRA_REFS, 8);
    }
    return true;
  }
  forget(slot, h, e);
  if (idsSize(h) == 0) idsRelease(h);
  return true;
}

/** Drops an entry whatever its references (the caller's pointer is then stale). */
export function forget(slot: u32, h: usize, e: usize): void {
  const word = load<u32>(e, 8);
  const n = wordNode(word);
  dropSideData(slot, load<u64>(e), word);
  idsDelete(h, e);
  releaseNode(n, slot);
}

/**
 * A position just past a free entry: a walk over the table from there that
 * deletes as it goes never meets an entry twice, since deletions only pull
 * entries back from further along their run, and no run crosses a free entry.
 */
export function walkStart(h: usize): u32 {
  const capacity = idsCapacity(h);
  for (let i: u32 = 0; i < capacity; i++) {
    if (load<u32>(idsEntry(h, i), 8) == ID_EMPTY) return i + 1 == capacity ? 0 : i + 1;
  }
  return 0;
}

/**
 * Removes every block of a worker. Leaving nodes one by one would make each
 * middle block orphan its children only for them to be removed next, so this
 * first settles orphans and extra ids for all of the worker's memberships at
 * once (every relation involving the worker disappears), then drops the
 * memberships.
 */
export function clearSlot(slot: u32): void {
  if (slot >= slotCapacity()) return;
  const h = slotIds(slot);
  if (idsSize(h) != 0) {
    const capacity = idsCapacity(h);
    let i = walkStart(h);
    for (let steps: u32 = 0; steps < capacity; ) {
      const e = idsEntry(h, i);
      const word = load<u32>(e, 8);
      if (word != ID_EMPTY) {
        const n = wordNode(word);
        dropSideData(slot, load<u64>(e), word);
        store<u32>(e, n, 8);
        if (extrasFind(n, slot) != 0) {
          // Another id of the worker keeps the membership; this one goes now
          // (and the next entry shifts into its place).
          releaseNode(n, slot);
          idsDelete(h, e);
          continue;
        }
        const parent = load<u32>(nodeAt(n), PARENT);
        if (parent != ROOT && isTracked(parent) && !memberHas(nodeAt(parent), slot)) orphanEnd(n, parent, slot);
      }
      i = i + 1 == capacity ? 0 : i + 1;
      steps++;
    }
    setHoldRetrack(true);
    for (let k: u32 = 0; k < capacity; k++) {
      const word = load<u32>(idsEntry(h, k), 8);
      if (word != ID_EMPTY) memberDrop(word, slot);
    }
    setHoldRetrack(false);
    idsRelease(h);
  }
  setSlotOrphans(slot, 0);
  store<u32>(slotMeta(slot), 0, META_EVICTED);
}

/** Gives a worker's table back its room after removals, when memory allows. */
export function settleIds(slot: u32): void {
  if (slot < slotCapacity()) idsShrink(slotIds(slot));
}

/** Removes routed blocks whose expiry is at or before now; returns how many. */
export function expireUntil(now: f64): u32 {
  let removed: u32 = 0;
  while (!heapEmpty() && topExpiry() <= now) {
    const live = topIsLive();
    const slot = topSlot();
    const ext = topExt();
    heapPop();
    if (live) {
      unbind(slot, ext);
      removed++;
    }
  }
  return removed;
}

/** Drops routed blocks, earliest expiry first (deepest first on ties), down to target. */
export function pruneTo(target: u32): void {
  while (routedCount() > target && !heapEmpty()) {
    const live = topIsLive();
    const slot = topSlot();
    const ext = topExt();
    heapPop();
    if (live) unbind(slot, ext);
  }
}
