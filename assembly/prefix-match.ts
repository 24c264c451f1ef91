import { COUNT, MEMBER_BYTES, NONE, ORPHANS, ROOT, childFind, memberFind, membersOf, nodeAt, treeStarted } from './prefix-nodes';
import { activeList, markSlot, nextStamp, outDepthsPtr, outSlotsPtr, slotMark } from './prefix-slots';

// findMatches: for each worker holding the prompt's first block, how many
// leading blocks it holds (it holds the nodes of blocks 0..d-1 along the
// prompt's path and not block d). Output: `count` (slot, depth) pairs in the
// outSlots/outDepths columns, each slot once, in no particular order.
//
// The walk keeps the set of still-matching workers in one of two forms:
// - implicit: exactly the current node's members. While the next node has no
//   orphans its members are a subset of the current node's, so equal member
//   counts mean nobody dropped out (O(1) per block); a smaller count means
//   marking the child's members and emitting the unmarked current members.
// - explicit: a list of slots, once a node with orphans breaks the subset
//   rule; intersected per block by marking the child's members or, when the
//   list is much shorter than the child, by looking each slot up. When the
//   list shrinks to the child's size it is the child's member set again and
//   the walk goes back to implicit.
//
// earlyExit: after matching a depth d at which exactly one worker still
// matches, stop. That worker is reported with depth d, a lower bound on its
// overlap; every other reported depth is exact (those workers dropped out at
// or before d). Without a single survivor at any depth the result is the
// same as without earlyExit.

const LOOKUP_RATIO: u32 = 8;

let emitted: u32 = 0;

@inline
function emit(slot: u32, depth: u32): void {
  store<u32>(outSlotsPtr() + (<usize>emitted << 2), slot);
  store<u32>(outDepthsPtr() + (<usize>emitted << 2), depth);
  emitted++;
}

function emitMembers(n: u32, depth: u32): void {
  const base = membersOf(n);
  const count = load<u32>(nodeAt(n), COUNT);
  for (let i: u32 = 0; i < count; i++) emit(load<u32>(base + <usize>i * MEMBER_BYTES), depth);
}

function markMembers(n: u32): u32 {
  const stamp = nextStamp();
  const base = membersOf(n);
  const count = load<u32>(nodeAt(n), COUNT);
  for (let i: u32 = 0; i < count; i++) markSlot(load<u32>(base + <usize>i * MEMBER_BYTES), stamp);
  return stamp;
}

/** Walks the hashes at ptr (count u64 local hashes); returns the number of (slot, depth) pairs. */
export function findMatches(ptr: usize, count: u32, earlyExit: bool): u32 {
  emitted = 0;
  if (count == 0 || !treeStarted()) return 0;
  let cur = childFind(ROOT, load<u64>(ptr));
  if (cur == 0 || load<u32>(nodeAt(cur), COUNT) == 0) return 0;
  let depth: u32 = 1;
  const list = activeList();
  let listed: u32 = 0; // explicit form when > 0
  let single = load<u32>(nodeAt(cur), COUNT) == 1;
  for (let i: u32 = 1; i < count && !(earlyExit && single); i++) {
    const child = childFind(cur, load<u64>(ptr + (<usize>i << 3)));
    if (child == 0) break;
    const cp = nodeAt(child);
    const childCount = load<u32>(cp, COUNT);
    if (listed == 0) {
      const curCount = load<u32>(nodeAt(cur), COUNT);
      if (load<u32>(cp, ORPHANS) == 0) {
        if (childCount != curCount) {
          if (childCount == 0) break;
          const stamp = markMembers(child);
          const base = membersOf(cur);
          for (let k: u32 = 0; k < curCount; k++) {
            const slot = load<u32>(base + <usize>k * MEMBER_BYTES);
            if (slotMark(slot) != stamp) emit(slot, depth);
          }
          single = childCount == 1;
        }
        cur = child;
        depth++;
        continue;
      }
      // The child has members outside the current set: list the set.
      const base = membersOf(cur);
      for (let k: u32 = 0; k < curCount; k++) store<u32>(list + (<usize>k << 2), load<u32>(base + <usize>k * MEMBER_BYTES));
      listed = curCount;
    }
    let kept: u32 = 0;
    if (listed * LOOKUP_RATIO < childCount) {
      for (let k: u32 = 0; k < listed; k++) {
        const slot = load<u32>(list + (<usize>k << 2));
        if (memberFind(child, slot) != NONE) store<u32>(list + (<usize>(kept++) << 2), slot);
        else emit(slot, depth);
      }
    } else {
      const stamp = markMembers(child);
      for (let k: u32 = 0; k < listed; k++) {
        const slot = load<u32>(list + (<usize>k << 2));
        if (slotMark(slot) == stamp) store<u32>(list + (<usize>(kept++) << 2), slot);
        else emit(slot, depth);
      }
    }
    if (kept == 0) return emitted;
    cur = child;
    depth++;
    single = kept == 1;
    // Every listed slot is a member of the child: equal sizes, equal sets.
    listed = kept == childCount ? 0 : kept;
  }
  if (listed == 0) {
    emitMembers(cur, depth);
  } else {
    for (let k: u32 = 0; k < listed; k++) emit(load<u32>(list + (<usize>k << 2)), depth);
  }
  return emitted;
}
