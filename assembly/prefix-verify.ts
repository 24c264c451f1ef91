import {
  CHILDREN_INDEXED,
  CHILD_LIST_BACK,
  CHILD_LIST_MAX,
  COUNT,
  FIRST,
  FLAGS,
  MEMBERS_INDEXED,
  MEMBER_SCAN_BACK,
  MEMBER_SCAN_MAX,
  M_EXTS,
  M_KIDS,
  NCHILD,
  NEXT,
  NONE,
  ORPHANS,
  PARENT,
  PREV,
  ROOT,
  WCAP,
  childKey,
  childTable,
  memberFind,
  memberKey,
  memberTable,
  memberMeta,
  memberSlots,
  membershipCount,
  nodeAt,
  nodeCount,
  nodeIsLive,
  nodeTop,
  orphanTable,
} from './prefix-nodes';
import { TABLE_EMPTY, tableCapacity, tableEntry, tableFind, tableFindNext, tableSize } from './prefix-table';
import { slotCapacity, slotOrphans, slotTable } from './prefix-slots';
import { routedCount } from './prefix-routed';
import { ROUTED } from './prefix-bind';

// Recomputes every derived count of the prefix index from scratch and
// compares: the tests call it after each event, so a count that drifts
// (orphans, kids, a worker's orphan total, table contents) fails at once
// rather than only when it happens to change a match. Returns 0 when all
// hold, else the number of the first broken rule below.

function verifyNode(n: u32): u32 {
  const p = nodeAt(n);
  const count = load<u32>(p, COUNT);
  const nchild = load<u32>(p, NCHILD);
  const flags = load<u32>(p, FLAGS);
  const parent = load<u32>(p, PARENT);
  if (n != ROOT && count == 0 && nchild == 0) return 1; // unused nodes are freed
  let children: u32 = 0;
  let prev: u32 = 0;
  for (let c = load<u32>(p, FIRST); c != 0; c = load<u32>(nodeAt(c), NEXT)) {
    if (!nodeIsLive(c) || load<u32>(nodeAt(c), PARENT) != n || load<u32>(nodeAt(c), PREV) != prev) return 2;
    if (flags & CHILDREN_INDEXED) {
      const key = childKey(n, load<u64>(nodeAt(c)));
      let e = tableFind(childTable, key);
      while (e != 0 && load<u32>(e, 8) != c) e = tableFindNext(childTable, e, key);
      if (e == 0) return 3; // an indexed child is in the children table
    }
    prev = c;
    children++;
  }
  if (children != nchild) return 4;
  if (flags & CHILDREN_INDEXED ? nchild <= CHILD_LIST_BACK : nchild > CHILD_LIST_MAX) return 5;
  if (flags & MEMBERS_INDEXED ? count <= MEMBER_SCAN_BACK : count > MEMBER_SCAN_MAX) return 6;
  // Member arrays track their count: inline for one, else at most 4x over.
  const cap = load<u32>(p, WCAP);
  if (count <= 1 ? cap != 1 : cap < count || cap > count * 4) return 19;
  let orphans: u32 = 0;
  const slots = memberSlots(n);
  for (let i: u32 = 0; i < count; i++) {
    const m = memberMeta(n, i);
    const slot = load<u32>(slots + (<usize>i << 2));
    if (slot >= slotCapacity() || load<u32>(m, M_EXTS) == 0) return 7;
    if (memberFind(n, slot) != i) return 8; // each slot once, found where it is
    if (parent != ROOT && memberFind(parent, slot) == NONE) orphans++;
    let kids: u32 = 0;
    for (let c = load<u32>(p, FIRST); c != 0; c = load<u32>(nodeAt(c), NEXT)) if (memberFind(c, slot) != NONE) kids++;
    if (kids != load<u32>(m, M_KIDS)) return 9;
  }
  if (orphans != load<u32>(p, ORPHANS)) return 10;
  return 0;
}

export function verifyIndex(): u32 {
  if (nodeTop() == 0) return membershipCount() == 0 && nodeCount() == 0 && routedCount() == 0 ? 0 : 11;
  let live: u32 = 0;
  let members: u32 = 0;
  let indexedMembers: u32 = 0;
  let indexedChildren: u32 = 0;
  for (let n: u32 = 0; n < nodeTop(); n++) {
    if (n != ROOT && !nodeIsLive(n)) continue;
    const broken = verifyNode(n);
    if (broken != 0) return broken;
    const p = nodeAt(n);
    if (n != ROOT) live++;
    members += load<u32>(p, COUNT);
    if (load<u32>(p, FLAGS) & MEMBERS_INDEXED) indexedMembers += load<u32>(p, COUNT);
    if (load<u32>(p, FLAGS) & CHILDREN_INDEXED) indexedChildren += load<u32>(p, NCHILD);
  }
  if (live != nodeCount() || members != membershipCount()) return 12;
  if (tableSize(memberTable) != indexedMembers || tableSize(childTable) != indexedChildren) return 13;
  // Worker tables: every id points at a live node the worker is a member of;
  // exts counts the ids; the orphan total counts the worker's orphan memberships.
  let ids: u32 = 0;
  let exts: u32 = 0;
  let routed: u32 = 0;
  let orphanTotal: u32 = 0;
  for (let slot: u32 = 0; slot < slotCapacity(); slot++) {
    const h = slotTable(slot);
    for (let i: u32 = 0; i < tableCapacity(h); i++) {
      const e = tableEntry(h, i);
      const n = load<u32>(e, 8);
      if (n == TABLE_EMPTY) continue;
      if (!nodeIsLive(n) || memberFind(n, slot) == NONE) return 14;
      if (load<u32>(e, 12) & ROUTED) routed++;
      else if (load<u32>(e, 12) == 0) return 15;
      ids++;
    }
    let orphans: u32 = 0;
    for (let n: u32 = 1; n < nodeTop(); n++) {
      if (!nodeIsLive(n)) continue;
      const pos = memberFind(n, slot);
      if (pos == NONE) continue;
      exts += load<u32>(memberMeta(n, pos), M_EXTS);
      const parent = load<u32>(nodeAt(n), PARENT);
      if (parent != ROOT && memberFind(parent, slot) == NONE) orphans++;
    }
    if (orphans != slotOrphans(slot)) return 16;
    orphanTotal += orphans;
  }
  if (ids != exts) return 17;
  if (routed != routedCount()) return 18;
  // The orphan registry: one entry per orphan membership, keyed by parent and slot.
  let registered: u32 = 0;
  for (let i: u32 = 0; i < tableCapacity(orphanTable); i++) {
    const e = tableEntry(orphanTable, i);
    const c = load<u32>(e, 8);
    if (c == TABLE_EMPTY) continue;
    const parent = <u32>(load<u64>(e) >> 32);
    const slot = <u32>load<u64>(e);
    if (!nodeIsLive(c) || load<u32>(nodeAt(c), PARENT) != parent) return 20;
    if (memberFind(c, slot) == NONE || memberFind(parent, slot) != NONE) return 20;
    registered++;
  }
  if (registered != orphanTotal) return 21;
  return 0;
}
