import {
  KIDS_DONE,
  M_EXTS,
  M_KIDS,
  NONE,
  PARENT,
  ROOT,
  DEPTH,
  COUNT,
  memberDrop,
  memberMeta,
  memberFind,
  memberJoin,
  memberLeave,
  nodeAt,
  orphanEnd,
} from './prefix-nodes';
import { TABLE_EMPTY, tableAdded, tableCapacity, tableDelete, tableEntry, tableFind, tableInsert, tableRelease, tableUpsert } from './prefix-table';
import { setSlotOrphans, slotCapacity, slotTable } from './prefix-slots';
import {
  heapEmpty,
  heapPop,
  routedAlloc,
  routedCount,
  routedFree,
  routedRefresh,
  topExpiry,
  topExt,
  topIsLive,
  topSlot,
} from './prefix-routed';

// A worker's external ids and what they point at. Each worker slot has a
// table: external id -> (node, info), where info is either the number of
// stored events naming the id (refcount) or ROUTED | record for a routed block.
// A membership (worker, node) lives as long as any of the worker's ids points
// at the node; its `exts` counts those ids.
//
// Rules the pure-TS twin mirrors:
// - storing an id already bound to the same node adds a reference (a routed
//   binding becomes a stored one with one reference: events are authoritative);
// - storing or routing an id bound to another node rebinds it (the newest
//   event wins): the new node is joined before the old one is left, so no
//   node on the path being stored is freed under it;
// - routing an id bound by events to the same node leaves it alone;
// - removing drops one reference (a routed binding has one).
// A stored chain passes each block's membership position on to the next
// block, which then needs no lookup in its parent.

export const ROUTED: u32 = 0x80000000;

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

/** One more of slot's ids points at n; returns slot's position among n's members. */
function addRef(n: u32, slot: u32, parentPos: u32): u32 {
  // A node created for this very block has no members to look through.
  const pos = load<u32>(nodeAt(n), COUNT) == 0 ? NONE : memberFind(n, slot);
  if (pos == NONE) {
    const joined = memberJoin(n, slot, parentPos);
    store<u32>(memberMeta(n, joined), 1, M_EXTS);
    return joined;
  }
  const e = memberMeta(n, pos);
  store<u32>(e, load<u32>(e, M_EXTS) + 1, M_EXTS);
  return pos;
}

function dropRef(n: u32, slot: u32): void {
  const pos = memberFind(n, slot);
  const e = memberMeta(n, pos);
  const exts = load<u32>(e, M_EXTS) - 1;
  if (exts == 0) memberLeave(n, pos);
  else store<u32>(e, exts, M_EXTS);
}

/**
 * A stored event's block: worker `slot` holds node n under id ext. parentPos
 * is the slot's position among the members of n's parent when known (see
 * memberJoin); returns its position among n's members, or NONE when the id
 * was already bound there (no lookup made).
 */
export function bindStored(slot: u32, ext: u64, n: u32, parentPos: u32): u32 {
  const e = tableUpsert(slotTable(slot), ext, n, 1);
  if (tableAdded) return addRef(n, slot, parentPos);
  const old = load<u32>(e, 8);
  const info = load<u32>(e, 12);
  if (info & ROUTED) routedFree(info & ~ROUTED);
  if (old == n) {
    // References saturate below the routed flag (2^31 stores of one block by one worker).
    store<u32>(e, info & ROUTED ? 1 : min(info + 1, ROUTED - 1), 12);
    return NONE;
  }
  store<u32>(e, n, 8);
  store<u32>(e, 1, 12);
  const pos = addRef(n, slot, parentPos);
  dropRef(old, slot);
  return pos;
}

/** A routed block: worker `slot` is assumed to hold node n until expiry. Returns as bindStored. */
export function bindRouted(slot: u32, ext: u64, n: u32, expiry: f64, parentPos: u32): u32 {
  const h = slotTable(slot);
  const e = tableFind(h, ext);
  if (e == 0) {
    const r = routedAlloc(slot, ext, load<u32>(nodeAt(n), DEPTH), expiry);
    tableInsert(h, ext, n, ROUTED | r);
    return addRef(n, slot, parentPos);
  }
  const old = load<u32>(e, 8);
  const info = load<u32>(e, 12);
  if (old == n) {
    if (info & ROUTED) routedRefresh(info & ~ROUTED, expiry);
    return NONE;
  }
  if (info & ROUTED) routedFree(info & ~ROUTED);
  store<u32>(e, n, 8);
  store<u32>(e, ROUTED | routedAlloc(slot, ext, load<u32>(nodeAt(n), DEPTH), expiry), 12);
  const pos = addRef(n, slot, parentPos);
  dropRef(old, slot);
  return pos;
}

/** The node worker `slot` binds ext to, or NONE. */
export function boundNode(slot: u32, ext: u64): u32 {
  if (slot >= slotCapacity()) return NONE;
  const e = tableFind(slotTable(slot), ext);
  return e == 0 ? NONE : load<u32>(e, 8);
}

/** Drops one reference to ext; false when the worker has no such id. */
export function unbind(slot: u32, ext: u64): bool {
  if (slot >= slotCapacity()) return false;
  const h = slotTable(slot);
  const e = tableFind(h, ext);
  if (e == 0) return false;
  const n = load<u32>(e, 8);
  const info = load<u32>(e, 12);
  if (info & ROUTED) {
    routedFree(info & ~ROUTED);
  } else if (info > 1) {
    store<u32>(e, info - 1, 12);
    return true;
  }
  tableDelete(h, e);
  dropRef(n, slot);
  return true;
}

/**
 * Removes every block of a worker. Leaving nodes one by one would make each
 * middle block re-orphan its children only for them to be removed next, so
 * this settles orphans first, for all of the worker's memberships at once
 * (every relation involving the worker disappears; only orphans(n) of its
 * own orphan memberships need lowering), then drops the memberships.
 */
export function clearSlot(slot: u32): void {
  if (slot >= slotCapacity()) return;
  const h = slotTable(slot);
  const capacity = tableCapacity(h);
  for (let i: u32 = 0; i < capacity; i++) {
    const e = tableEntry(h, i);
    const n = load<u32>(e, 8);
    if (n == TABLE_EMPTY) continue;
    const info = load<u32>(e, 12);
    if (info & ROUTED) routedFree(info & ~ROUTED);
    const m = memberMeta(n, memberFind(n, slot));
    if (load<u32>(m, M_KIDS) == KIDS_DONE) continue; // a second id of the same membership
    store<u32>(m, KIDS_DONE, M_KIDS);
    const parent = load<u32>(nodeAt(n), PARENT);
    if (parent != ROOT && memberFind(parent, slot) == NONE) orphanEnd(n, parent, slot);
  }
  for (let i: u32 = 0; i < capacity; i++) {
    const e = tableEntry(h, i);
    const n = load<u32>(e, 8);
    if (n == TABLE_EMPTY) continue;
    const pos = memberFind(n, slot);
    const m = memberMeta(n, pos);
    const exts = load<u32>(m, M_EXTS) - 1;
    if (exts == 0) memberDrop(n, pos);
    else store<u32>(m, exts, M_EXTS);
  }
  tableRelease(h);
  setSlotOrphans(slot, 0);
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
