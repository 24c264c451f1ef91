import {
  CHILD_LIST_BACK,
  CHILD_LIST_MAX,
  FIRST,
  INFO,
  NEXT,
  NO_SLOT,
  ORPHANS,
  PARENT,
  ROOT,
  UNTRACKED,
  childCount,
  childKey,
  childTable,
  isTracked,
  isWide,
  memberCount,
  memberHas,
  membershipCount,
  nodeAt,
  nodeCount,
  nodeIsLive,
  nodeTop,
  orphanTable,
  wideChild,
} from './prefix-nodes';
import { isBitmap, memberBlock, memberNext } from './prefix-members';
import { blockCap, blockCapacity, heldBytes, usedBytes } from './prefix-memory';
import { EXTRA_REFS, ID_EMPTY, ROUTED, idsCapacity, idsEntry, idsFind, idsSize } from './prefix-ids';
import { TABLE_EMPTY, tableCapacity, tableEntry, tableFind, tableFindNext, tableSize } from './prefix-table';
import { extrasFind, extrasTable, refsFind, refsTable, wordNode } from './prefix-bind';
import { META_EXTRAS, activeList, slotCapacity, slotIds, slotMeta, slotOrphans } from './prefix-slots';
import { routedCount } from './prefix-routed';

// Recomputes every derived count of the prefix index from scratch and
// compares: the tests call it after each event, so a count that drifts
// (orphans, a worker's orphan total, table contents) fails at once rather
// than only when it happens to change a match. Returns 0 when all hold, else
// the number of the first broken rule below.

function verifyMembers(p: usize): u32 {
  const count = memberCount(p);
  const b = memberBlock(p);
  if (count < 2) return 0;
  const cap = blockCap(b);
  if (isBitmap(b)) {
    let bits: u32 = 0;
    for (let w: u32 = 0; w < cap; w++) bits += popcnt(load<u32>(b + 4 + (<usize>w << 2)));
    if (bits != count) return 22; // a bitmap's bits are its members
    if (blockCapacity(cap) != cap) return 23;
  } else {
    if (cap < count || blockCapacity(cap) != cap) return 23; // an array has room for its members, in a class
    for (let i: u32 = 1; i < count; i++) {
      if (load<u32>(b + 4 + (<usize>(i - 1) << 2)) >= load<u32>(b + 4 + (<usize>i << 2))) return 24; // sorted, each slot once
    }
  }
  for (let s = memberNext(p, 0, count); s != NO_SLOT; s = memberNext(p, s + 1, count)) if (s >= slotCapacity()) return 7;
  return 0;
}

function verifyNode(n: u32): u32 {
  const p = nodeAt(n);
  const count = memberCount(p);
  const nchild = childCount(p);
  const parent = load<u32>(p, PARENT);
  if (n != ROOT && count == 0 && nchild == 0) return 1; // unused nodes are freed
  const wide = isWide(p);
  let c = wide ? 0 : load<u32>(p, FIRST);
  for (let k: u32 = 0; k < nchild; k++) {
    if (wide) c = wideChild(p, k);
    if (c == 0 || !nodeIsLive(c) || load<u32>(nodeAt(c), PARENT) != n) return 2;
    if (wide) {
      if (load<u32>(nodeAt(c), NEXT) != k) return 2; // a wide node's child knows its position
      const key = childKey(n, load<u64>(nodeAt(c)));
      let e = tableFind(childTable, key);
      while (e != 0 && load<u32>(e, 8) != c) e = tableFindNext(childTable, e, key);
      if (e == 0) return 3; // a wide node's child is in the children table
    }
    // Children under a node that does not track orphans have none counted.
    const orphans = <u32>load<u16>(nodeAt(c), ORPHANS);
    if (n == ROOT || !isTracked(n) ? orphans != 0 : orphans != countMissing(nodeAt(c), p)) return 10;
    if (!wide) c = load<u32>(nodeAt(c), NEXT);
  }
  if (!wide && c != 0) return 4; // the list ends where its count says
  if (wide ? nchild <= CHILD_LIST_BACK : nchild > CHILD_LIST_MAX) return 5;
  if (wide && n != ROOT && isTracked(n)) return 6; // wide nodes do not track orphans
  if (n == ROOT && (load<u32>(p, INFO) & UNTRACKED) != 0) return 6;
  return verifyMembers(p);
}

function countMissing(cp: usize, pp: usize): u32 {
  let missing: u32 = 0;
  const count = memberCount(cp);
  for (let s = memberNext(cp, 0, count); s != NO_SLOT; s = memberNext(cp, s + 1, count)) if (!memberHas(pp, s)) missing++;
  return missing;
}

export function verifyIndex(): u32 {
  if (nodeTop() == 0) return membershipCount() == 0 && nodeCount() == 0 && routedCount() == 0 && tableSize(refsTable) == 0 && tableSize(extrasTable) == 0 ? 0 : 11;
  if (usedBytes() > heldBytes()) return 25;
  let live: u32 = 0;
  let members: u32 = 0;
  let wideChildren: u32 = 0;
  // Per slot orphan memberships under tracked parents, counted into the active column.
  const orphanTotals = activeList();
  memory.fill(orphanTotals, 0, <usize>slotCapacity() << 2);
  for (let n: u32 = 0; n < nodeTop(); n++) {
    if (n != ROOT && !nodeIsLive(n)) continue;
    const broken = verifyNode(n);
    if (broken != 0) return broken;
    const p = nodeAt(n);
    if (n != ROOT) live++;
    const count = memberCount(p);
    members += count;
    if (isWide(p)) wideChildren += childCount(p);
    const parent = load<u32>(p, PARENT);
    if (n != ROOT && parent != ROOT && isTracked(parent)) {
      for (let s = memberNext(p, 0, count); s != NO_SLOT; s = memberNext(p, s + 1, count)) {
        if (!memberHas(nodeAt(parent), s)) store<u32>(orphanTotals + (<usize>s << 2), load<u32>(orphanTotals + (<usize>s << 2)) + 1);
      }
    }
  }
  if (live != nodeCount() || members != membershipCount()) return 12;
  if (tableSize(childTable) != wideChildren) return 13;
  // Worker tables: every id points at a live node the worker is a member of;
  // a worker's entries for one node are one plus its extras; refs and routed
  // entries have their side data.
  let entries: u32 = 0;
  let extraIds: u32 = 0;
  let extraRefs: u32 = 0;
  let routed: u32 = 0;
  let orphanTotal: u32 = 0;
  for (let slot: u32 = 0; slot < slotCapacity(); slot++) {
    const h = slotIds(slot);
    let size: u32 = 0;
    for (let i: u32 = 0; i < idsCapacity(h); i++) {
      const e = idsEntry(h, i);
      const word = load<u32>(e, 8);
      if (word == ID_EMPTY) continue;
      size++;
      if (idsFind(h, load<u64>(e)) != e) return 26; // each id found where it is
      const n = wordNode(word);
      if (!nodeIsLive(n) || !memberHas(nodeAt(n), slot)) return 14;
      if (word & ROUTED) routed++;
      else if (word & EXTRA_REFS) {
        const r = refsFind(slot, load<u64>(e));
        if (r == 0 || load<u32>(r, 12) == 0) return 15;
        extraRefs++;
      }
      entries++;
    }
    if (size != idsSize(h)) return 26;
    let slotExtras: u32 = 0;
    for (let i: u32 = 0; i < tableCapacity(extrasTable); i++) {
      const e = tableEntry(extrasTable, i);
      if (load<u32>(e, 8) == TABLE_EMPTY || <u32>load<u64>(e) != slot) continue;
      const n = <u32>(load<u64>(e) >> 32);
      if (!nodeIsLive(n) || !memberHas(nodeAt(n), slot) || extrasFind(n, slot) != e) return 17;
      slotExtras++;
      extraIds += load<u32>(e, 8);
    }
    if (slotExtras != load<u32>(slotMeta(slot), META_EXTRAS)) return 17;
    const orphans = load<u32>(orphanTotals + (<usize>slot << 2));
    if (orphans != slotOrphans(slot)) return 16;
    orphanTotal += orphans;
  }
  if (entries != membershipCount() + extraIds) return 17;
  if (extraRefs != tableSize(refsTable)) return 15;
  if (routed != routedCount()) return 18;
  // The orphan registry: one entry per orphan membership under a tracked parent.
  let registered: u32 = 0;
  for (let i: u32 = 0; i < tableCapacity(orphanTable); i++) {
    const e = tableEntry(orphanTable, i);
    const c = load<u32>(e, 8);
    if (c == TABLE_EMPTY) continue;
    const parent = <u32>(load<u64>(e) >> 32);
    const slot = <u32>load<u64>(e);
    if (!nodeIsLive(c) || load<u32>(nodeAt(c), PARENT) != parent || !isTracked(parent)) return 20;
    if (!memberHas(nodeAt(c), slot) || memberHas(nodeAt(parent), slot)) return 20;
    registered++;
  }
  if (registered != orphanTotal) return 21;
  return 0;
}

