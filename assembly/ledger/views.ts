import { release } from '../alloc';
import { busyReason } from '../cost/busy';
import { configuredKey, costConfigure, costConfigured } from '../cost/kind';
import { NIL, grownCapacity, regrow } from '../grow';
import { treeCreate, treeDestroy, treeFill, treeLeaves, treeRebuild, treeResize, treeSet } from '../tie-tree';
import { groupCount, groupPosition, groupSize, groupSlotAt } from './groups';
import {
  decodeOf,
  groupOf,
  isAvailable,
  keyOf,
  maxBatchedOf,
  prefillOf,
  rowCapacity,
  rowCount,
  setKeyOf,
  totalBlocksOf,
} from './rows';

// Fast-path views: for each set of busy thresholds in use (one per policy
// class, at most MAX_VIEWS open), which workers are members (present,
// available and not busy under those thresholds) and, per taint group, a tie
// tree (tie-tree.ts) over the group's positions holding each worker's cost key
// (the KEY column, under the configured cost) as a member leaf or an empty one.
// Every change to a worker's load, capacity, presence, availability or group
// updates its key and its leaf in every open view: O(views x log n).
//
// A view is a 48-byte record in a static table of MAX_VIEWS:
//   +0  open            u32   1 while open
//   +4  memberKeys      ptr   f64 per slot: the key of a member, +Infinity for any other
//                             slot (one load tells a decision both)
//   +8  trees           ptr   u32 per group: its tree (0 before the group had workers)
//   +12 groupMembers    ptr   u32 per group: members in the group
//   +16 prefillTokens   f64   the thresholds (+Infinity: off)
//   +24 prefillFraction f64
//   +32 decodeFraction  f64
//   +40 memberTotal     u32   members in all groups
//   +44 groupRoom       u32   entries in trees and groupMembers
// Views exist only while a cost is configured (ledgerConfigureCost); changing
// it rebuilds every open view.

export const MAX_VIEWS: u32 = 8;
const VIEW: usize = 48;
const MIN_TREE: u32 = 16;

const views: usize = memory.data(<i32>(MAX_VIEWS * <u32>VIEW), 8);

@inline
function view(v: u32): usize {
  return views + <usize>v * VIEW;
}

@inline
export function viewIsOpen(v: u32): bool {
  return load<u32>(view(v)) != 0;
}

@inline
export function viewMember(v: u32, w: u32): bool {
  return load<f64>(<usize>load<u32>(view(v), 4) + (<usize>w << 3)) != Infinity;
}

/** The view's tree for a group, or 0 when the group never had workers. */
@inline
export function viewTree(v: u32, group: u32): usize {
  const r = view(v);
  return group < load<u32>(r, 44) ? <usize>load<u32>(<usize>load<u32>(r, 8) + (<usize>group << 2)) : 0;
}

@inline
export function viewGroupMembers(v: u32, group: u32): u32 {
  const r = view(v);
  return group < load<u32>(r, 44) ? load<u32>(<usize>load<u32>(r, 12) + (<usize>group << 2)) : 0;
}

/** Members of the view in all groups. */
@inline
export function viewMemberTotal(v: u32): u32 {
  return load<u32>(view(v), 40);
}

/** The view's member keys: f64 per slot, the key of a member, +Infinity for any other slot. */
@inline
export function viewMemberKeys(v: u32): usize {
  return <usize>load<u32>(view(v), 4);
}

/** The open view with exactly these thresholds, or NIL. */
export function viewFind(prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u32 {
  for (let v: u32 = 0; v < MAX_VIEWS; v++) {
    const r = view(v);
    if (load<u32>(r) != 0 && load<f64>(r, 16) == prefillTokens && load<f64>(r, 24) == prefillFraction && load<f64>(r, 32) == decodeFraction) return v;
  }
  return NIL;
}

@inline
function standing(r: usize, w: u32): bool {
  if (!isAvailable(w)) return false;
  return busyReason(prefillOf(w), maxBatchedOf(w), decodeOf(w), totalBlocksOf(w), load<f64>(r, 16), load<f64>(r, 24), load<f64>(r, 32)) == 0;
}

/**
 * Members of the open view with these thresholds (workers available and not
 * busy under them, the fleet's headroom for a class), or -1 when none is open.
 */
export function ledgerViewMembers(prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): i32 {
  const v = viewFind(prefillTokens, prefillFraction, decodeFraction);
  return v == NIL ? -1 : <i32>viewMemberTotal(v);
}

/**
 * Whether the worker at `slot` is a member of the open view with these
 * thresholds (available and not busy under them): 1 or 0, or -1 when no such
 * view is open.
 */
export function ledgerViewHolds(prefillTokens: f64, prefillFraction: f64, decodeFraction: f64, slot: u32): i32 {
  const v = viewFind(prefillTokens, prefillFraction, decodeFraction);
  if (v == NIL) return -1;
  return slot < rowCount() && viewMember(v, slot) ? 1 : 0;
}

/**
 * Keeps cost keys for cost kind `kind` with its weights (`scale`, `weight`,
 * `third`: cost/kind.ts) and block size `blockSize`; rebuilds every open view.
 * O(rows x views).
 */
export function ledgerConfigureCost(kind: u32, scale: f64, weight: f64, third: f64, blockSize: u32): void {
  costConfigure(kind, scale, weight, third, blockSize);
  const n = rowCount();
  for (let w: u32 = 0; w < n; w++) setKeyOf(w, configuredKey(w));
  for (let v: u32 = 0; v < MAX_VIEWS; v++) if (viewIsOpen(v)) build(v);
}

/**
 * Opens the view for these busy thresholds (+Infinity: off), or finds it open;
 * returns its id, or NIL when no cost is configured or all MAX_VIEWS are open
 * (the host closes one first). O(rows) when it opens one.
 */
export function ledgerOpenView(prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u32 {
  if (!costConfigured()) return NIL;
  const found = viewFind(prefillTokens, prefillFraction, decodeFraction);
  if (found != NIL) return found;
  for (let v: u32 = 0; v < MAX_VIEWS; v++) {
    const r = view(v);
    if (load<u32>(r) != 0) continue;
    store<u32>(r, 1);
    store<u32>(r, <u32>regrow(0, 0, rowCapacity(), 8), 4);
    store<u32>(r, 0, 8);
    store<u32>(r, 0, 12);
    store<f64>(r, prefillTokens, 16);
    store<f64>(r, prefillFraction, 24);
    store<f64>(r, decodeFraction, 32);
    store<u32>(r, 0, 40);
    store<u32>(r, 0, 44);
    build(v);
    return v;
  }
  return NIL;
}

/** Closes a view and frees what it holds. */
export function ledgerCloseView(v: u32): void {
  if (v >= MAX_VIEWS || !viewIsOpen(v)) return;
  const r = view(v);
  const room = load<u32>(r, 44);
  for (let g: u32 = 0; g < room; g++) {
    const tree = viewTree(v, g);
    if (tree != 0) treeDestroy(tree);
  }
  if (room > 0) {
    release(<usize>load<u32>(r, 8), <usize>room << 2);
    release(<usize>load<u32>(r, 12), <usize>room << 2);
  }
  release(<usize>load<u32>(r, 4), <usize>rowCapacity() << 3);
  store<u32>(r, 0);
}

/** Member keys follow the rows' capacity (called when it grows, with the old capacity); new slots are no members. */
export function viewsRowsGrew(oldCapacity: u32): void {
  const cap = rowCapacity();
  for (let v: u32 = 0; v < MAX_VIEWS; v++) {
    if (!viewIsOpen(v)) continue;
    const r = view(v);
    const keys = regrow(<usize>load<u32>(r, 4), oldCapacity, cap, 8);
    fillNone(keys, oldCapacity, cap);
    store<u32>(r, <u32>keys, 4);
  }
}

function fillNone(keys: usize, from: u32, to: u32): void {
  for (let w = from; w < to; w++) store<f64>(keys + (<usize>w << 3), Infinity);
}

/** Room in the view's per-group tables for groups 0..group. */
function reserveGroups(r: usize, group: u32): void {
  const room = load<u32>(r, 44);
  if (group < room) return;
  const grown = grownCapacity(room, group + 1);
  store<u32>(r, <u32>regrow(<usize>load<u32>(r, 8), room, grown, 4), 8);
  store<u32>(r, <u32>regrow(<usize>load<u32>(r, 12), room, grown, 4), 12);
  store<u32>(r, grown, 44);
}

@inline
function setGroupMembers(r: usize, group: u32, delta: i32): void {
  const p = <usize>load<u32>(r, 12) + (<usize>group << 2);
  store<u32>(p, load<u32>(p) + <u32>delta);
  store<u32>(r, load<u32>(r, 40) + <u32>delta, 40);
}

/** Every standing and every tree of view v, from the rows. */
function build(v: u32): void {
  const r = view(v);
  const groups = groupCount();
  if (groups > 0) reserveGroups(r, groups - 1);
  const members = <usize>load<u32>(r, 4);
  const n = rowCount();
  fillNone(members, 0, rowCapacity());
  for (let w: u32 = 0; w < n; w++) if (groupPosition(w) != NIL && standing(r, w)) store<f64>(members + (<usize>w << 3), keyOf(w));
  store<u32>(r, 0, 40);
  const room = load<u32>(r, 44);
  for (let g: u32 = 0; g < room; g++) {
    store<u32>(<usize>load<u32>(r, 12) + (<usize>g << 2), 0);
    rebuildTree(v, g);
  }
}

/** Group g's tree in view v from the group's positions (sized to fit), and its member count. */
function rebuildTree(v: u32, group: u32): void {
  const r = view(v);
  const size = groupSize(group);
  let tree = viewTree(v, group);
  if (size == 0 && tree == 0) return;
  const leaves = grownCapacity(MIN_TREE, size);
  if (tree == 0) {
    tree = treeCreate(leaves);
    store<u32>(<usize>load<u32>(r, 8) + (<usize>group << 2), <u32>tree);
  } else if (treeLeaves(tree) != leaves) {
    treeResize(tree, leaves);
  }
  const members = <usize>load<u32>(r, 4);
  const before = viewGroupMembers(v, group);
  let count: u32 = 0;
  for (let pos: u32 = 0; pos < leaves; pos++) {
    if (pos >= size) {
      treeFill(tree, pos, Infinity, false);
      continue;
    }
    const w = groupSlotAt(group, pos);
    const member = load<f64>(members + (<usize>w << 3)) != Infinity;
    if (member) count++;
    treeFill(tree, pos, keyOf(w), member);
  }
  treeRebuild(tree);
  setGroupMembers(r, group, <i32>count - <i32>before);
}

/** Brings a present worker's key and its standing and leaf in every open view up to date. */
export function rowChanged(w: u32): void {
  if (!costConfigured()) return;
  const key = configuredKey(w);
  setKeyOf(w, key);
  const pos = groupPosition(w);
  if (pos == NIL) return;
  const group = groupOf(w);
  for (let v: u32 = 0; v < MAX_VIEWS; v++) {
    const r = view(v);
    if (load<u32>(r) == 0) continue;
    const members = <usize>load<u32>(r, 4) + (<usize>w << 3);
    const member = standing(r, w);
    const was = load<f64>(members) != Infinity;
    store<f64>(members, member ? key : Infinity);
    if (member != was) setGroupMembers(r, group, member ? 1 : -1);
    treeSet(viewTree(v, group), pos, key, member);
  }
}

/** A worker joined group `group` at position `pos`: its leaf in every open view (trees rebuilt when positions shifted). */
export function viewsJoined(w: u32, group: u32, pos: u32): void {
  if (!costConfigured()) return;
  const key = configuredKey(w);
  setKeyOf(w, key);
  const size = groupSize(group);
  for (let v: u32 = 0; v < MAX_VIEWS; v++) {
    const r = view(v);
    if (load<u32>(r) == 0) continue;
    reserveGroups(r, group);
    const members = <usize>load<u32>(r, 4);
    const member = standing(r, w);
    store<f64>(members + (<usize>w << 3), member ? key : Infinity);
    const tree = viewTree(v, group);
    if (tree != 0 && pos == size - 1 && size <= treeLeaves(tree)) {
      if (member) setGroupMembers(r, group, 1);
      treeSet(tree, pos, key, member);
    } else {
      rebuildTree(v, group);
    }
  }
}

/** A worker left group `group` from position `pos` (the group's positions already shifted). */
export function viewsLeft(w: u32, group: u32, pos: u32): void {
  if (!costConfigured()) return;
  const size = groupSize(group);
  for (let v: u32 = 0; v < MAX_VIEWS; v++) {
    const r = view(v);
    if (load<u32>(r) == 0) continue;
    const members = <usize>load<u32>(r, 4);
    const was = load<f64>(members + (<usize>w << 3)) != Infinity;
    store<f64>(members + (<usize>w << 3), Infinity);
    if (pos == size) {
      if (was) setGroupMembers(r, group, -1);
      treeSet(viewTree(v, group), pos, Infinity, false);
    } else {
      rebuildTree(v, group);
    }
  }
}
