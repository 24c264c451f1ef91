import { CHILDREN_INDEXED, COUNT, FIRST, FLAGS, LOCAL, NEXT, NONE, ORPHANS, ROOT, childFind, memberFind, memberSlots, nodeAt, treeStarted } from './prefix-nodes';
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

// An explicit list much shorter than the child's members is intersected by
// looking each slot up rather than by marking all the child's members.
const LOOKUP_RATIO: u32 = 8;
// A drop-out leaving at most this many survivors (and a sixteenth of the
// set) copies every slot out and takes the survivors back, instead of
// checking each slot's mark.
const FEW_SURVIVORS: u32 = 32;

let out: u32 = 0; // pairs written so far

@inline
function emit(slot: u32, depth: u32): void {
  store<u32>(outSlotsPtr() + (<usize>out << 2), slot);
  store<u32>(outDepthsPtr() + (<usize>out << 2), depth);
  out++;
}

function fillDepths(from: u32, to: u32, depth: u32): void {
  let p = outDepthsPtr() + (<usize>from << 2);
  const end = outDepthsPtr() + (<usize>to << 2);
  const four = i32x4.splat(<i32>depth);
  for (; p + 16 <= end; p += 16) v128.store(p, four);
  for (; p < end; p += 4) store<u32>(p, depth);
}

/** Emits every member of n at depth. */
function emitMembers(n: u32, depth: u32): void {
  const count = load<u32>(nodeAt(n), COUNT);
  memory.copy(outSlotsPtr() + (<usize>out << 2), memberSlots(n), <usize>count << 2);
  fillDepths(out, out + count, depth);
  out += count;
}

function markMembers(n: u32): u32 {
  const stamp = nextStamp();
  const slots = memberSlots(n);
  const count = load<u32>(nodeAt(n), COUNT);
  for (let i: u32 = 0; i < count; i++) markSlot(load<u32>(slots + (<usize>i << 2)), stamp);
  return stamp;
}

/** Emits at depth the members of cur that are not members of child (child's members are a subset). */
function emitDropped(cur: u32, child: u32, depth: u32): void {
  const curCount = load<u32>(nodeAt(cur), COUNT);
  const childCount = load<u32>(nodeAt(child), COUNT);
  const curSlots = memberSlots(cur);
  if (childCount <= FEW_SURVIVORS && childCount * 16 <= curCount) {
    // Copy all, then swap each survivor out, highest position first, so the
    // entry pulled in from the end is never a survivor still to be removed.
    const start = out;
    emitMembers(cur, depth);
    const positions = activeList();
    const childSlots = memberSlots(child);
    for (let i: u32 = 0; i < childCount; i++) {
      const at = memberFind(cur, load<u32>(childSlots + (<usize>i << 2)));
      let j = i;
      for (; j > 0 && load<u32>(positions + (<usize>(j - 1) << 2)) < at; j--) {
        store<u32>(positions + (<usize>j << 2), load<u32>(positions + (<usize>(j - 1) << 2)));
      }
      store<u32>(positions + (<usize>j << 2), at);
    }
    const slotsOut = outSlotsPtr();
    for (let i: u32 = 0; i < childCount; i++) {
      out--;
      const at = start + load<u32>(positions + (<usize>i << 2));
      store<u32>(slotsOut + (<usize>at << 2), load<u32>(slotsOut + (<usize>out << 2)));
    }
    return;
  }
  const stamp = markMembers(child);
  for (let k: u32 = 0; k < curCount; k++) {
    const slot = load<u32>(curSlots + (<usize>k << 2));
    if (slotMark(slot) != stamp) emit(slot, depth);
  }
}

/** Walks the hashes at ptr (count u64 local hashes); returns the number of (slot, depth) pairs. */
export function findMatches(ptr: usize, count: u32, earlyExit: bool): u32 {
  out = 0;
  if (count == 0 || !treeStarted()) return 0;
  let cur = childFind(ROOT, load<u64>(ptr));
  if (cur == 0) return 0;
  let curCount = load<u32>(nodeAt(cur), COUNT);
  if (curCount == 0) return 0;
  let depth: u32 = 1;
  const list = activeList();
  let listed: u32 = 0; // explicit form when > 0
  let curAt = nodeAt(cur);
  for (let i: u32 = 1; i < count && !(earlyExit && curCount == 1); i++) {
    // The next block's node: the sibling-list walk inlined, since along a
    // prompt most nodes have a single child.
    const local = load<u64>(ptr + (<usize>i << 3));
    let child: u32;
    let cp: usize = 0;
    if (load<u32>(curAt, FLAGS) & CHILDREN_INDEXED) {
      child = childFind(cur, local);
      if (child != 0) cp = nodeAt(child);
    } else {
      for (child = load<u32>(curAt, FIRST); child != 0; child = load<u32>(cp, NEXT)) {
        cp = nodeAt(child);
        if (load<u64>(cp, LOCAL) == local) break;
      }
    }
    if (child == 0) break;
    const childCount = load<u32>(cp, COUNT);
    if (listed == 0) {
      if (load<u32>(cp, ORPHANS) == 0) {
        if (childCount != curCount) {
          if (childCount == 0) break;
          emitDropped(cur, child, depth);
        }
        cur = child;
        curAt = cp;
        curCount = childCount;
        depth++;
        continue;
      }
      // The child has members outside the current set: list the set.
      memory.copy(list, memberSlots(cur), <usize>curCount << 2);
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
    if (kept == 0) return out;
    cur = child;
    curAt = cp;
    depth++;
    // Every listed slot is a member of the child: equal sizes, equal sets.
    listed = kept == childCount ? 0 : kept;
    curCount = kept;
  }
  if (listed == 0) {
    emitMembers(cur, depth);
  } else {
    for (let k: u32 = 0; k < listed; k++) emit(load<u32>(list + (<usize>k << 2)), depth);
  }
  return out;
}
