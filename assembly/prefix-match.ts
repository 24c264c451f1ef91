import { ORPHANS, STAMP, UNTRACKED, INFO, adjacentChild, chainRun, childFind, memberCount, memberHas, nodeAt, rootChild, treeStarted } from './prefix-nodes';
import { MEMBERS, NO_SLOT, memberCopy, memberMark, memberNext, setDiffCopy } from './prefix-members';
import { currentEpoch } from './prefix-evict';
import { activeList, globalSlot, nextStamp, outDepthsPtr, outSlotsPtr, slotMark, slotOffset, slotStride } from './prefix-slots';

// findMatches: for each worker holding the prompt's first block, how many
// leading blocks it holds (it holds the nodes of blocks 0..d-1 along the
// prompt's path and not block d). Slots are the model's (see prefix-slots.ts).
//
// The answer is compact: most workers of a shared prompt match to the same
// depth, so it names them as a set, read in place from the node that holds
// them, rather than one by one. Every worker holding the first block is in
// exactly one of
// - a run: a node's members less its child's, all at one depth (the walk
//   stepped from the node to the child there, and the workers the child
//   lacks matched to that depth; the last node walked has no child: all its
//   members). Records of RUN_BYTES at outRunsPtr() (static: at most
//   MAX_RUNS), in walk order:
//     +0  depth   u32  the run's workers' depth
//     +4  count   u32  its workers: countA - countB
//     +8  countA  u32  set A, the node's member set as the node keeps it
//     +12 wordA   u32  (prefix-members.ts: count, and the one member's shard slot
//                      or the address of its member block)
//     +16 countB  u32  set B, the child's member set (a subset of A), the
//     +20 wordB   u32  workers left out; countB 0: none
//     +24 map     u32  stride << 16 | offset: shard slot s is model slot
//                      s x stride + offset
//     +28         u32  0
// - a pair (slot, depth) in the outSlots/outDepths columns: the workers the
//   walk met one by one (a drop-out of a few, or the explicit form below).
// The record at matchAnswerPtr() says where the answer is:
//   +0 workers u32, +4 runs u32, +8 pairs u32, +12 runsPtr u32,
//   +16 slotsPtr u32, +20 depthsPtr u32
// matchExpand() writes the runs' workers as pairs after the walk's, for a
// reader that wants one pair per worker. Sets are read in place: the answer
// holds until the next event changes the index.
//
// The walk keeps the set of still-matching workers in one of two forms:
// - implicit: exactly the current node's members. While the next node has no
//   orphans under a node that tracks them, its members are a subset of the
//   current node's, so equal member counts mean nobody dropped out (O(1) per
//   block); a smaller count means emitting the current members the child
//   lacks.
// - explicit: a list of slots, once a node with orphans (or under a node that
//   does not track them) breaks the subset rule; intersected per block by
//   marking the child's members or, when the list is much shorter than the
//   child, by looking each slot up. When the list shrinks to the child's size
//   it is the child's member set again and the walk goes back to implicit.
//
// Finding the next node: a chain stored in one event sits in consecutive
// pool records, so the walk first tries the record after the current one
// (prefix-nodes.ts adjacentChild) and only then the node's children. In the
// implicit form, a run of such records with the same member count and no
// orphans is stepped in one tight loop (chainRun): nothing is emitted there,
// and no step waits on a load to learn where the next node is.
//
// Every node walked gets the current epoch's stamp (prefix-evict.ts): what
// lookups use is what eviction keeps.
//
// earlyExit: after matching a depth d at which exactly one worker still
// matches, stop. That worker is reported with depth d, a lower bound on its
// overlap; every other reported depth is exact (those workers dropped out at
// or before d). Without a single survivor at any depth the result is the
// same as without earlyExit.

// An explicit list much shorter than the child's members is intersected by
// looking each slot up rather than by marking all the child's members.
const LOOKUP_RATIO: u32 = 8;
// Under a node that does not track orphans, a child this small is checked
// member by member for being a subset of the current set.
const FEW_SURVIVORS: u32 = 32;
// A drop-out of at least 1/RUN_SHARE of the current members is a run; a
// smaller one is written as pairs. A run's set A then holds at most
// RUN_SHARE times the workers the run reports, so a reader going through
// every run's sets does at most a few times the work of reading pairs.
const RUN_SHARE: u32 = 4;
/** Bytes of one run record. */
export const RUN_BYTES: usize = 32;
// Each run but the last leaves at most 3/4 of the members still matching,
// and a node has fewer than 2^24 (prefix-members.ts COUNT_MASK): at most
// 57 such runs (log base 4/3 of 2^24), and the last.
const MAX_RUNS: u32 = 64;
const runRecords: usize = memory.data(<i32>(<usize>MAX_RUNS * RUN_BYTES), 8);

/** Where the last answer's runs are. */
@inline
export function outRunsPtr(): usize {
  return runRecords;
}

let out: u32 = 0; // pairs written so far
let runs: u32 = 0; // runs written so far
let workers: u32 = 0; // the answer's workers
let expanded = false;
const answer: usize = memory.data(24, 4);

/** The record of where the last answer is (see the header). */
export function matchAnswerPtr(): usize {
  return answer;
}

// Writes the record (after a walk or an expansion).
function recordAnswer(): void {
  store<u32>(answer, workers);
  store<u32>(answer, runs, 4);
  store<u32>(answer, out, 8);
  store<u32>(answer, <u32>outRunsPtr(), 12);
  store<u32>(answer, <u32>outSlotsPtr(), 16);
  store<u32>(answer, <u32>outDepthsPtr(), 20);
}

@inline
export function answerRuns(): u32 {
  return runs;
}

@inline
export function answerPairs(): u32 {
  return out;
}

/** Records a run: the members of the node at ap less those of the node at bp (0: none), at depth. */
function emitRun(ap: usize, bp: usize, depth: u32): void {
  const r = outRunsPtr() + <usize>runs * RUN_BYTES;
  const countA = memberCount(ap);
  const countB = bp == 0 ? 0 : memberCount(bp);
  store<u32>(r, depth);
  store<u32>(r, countA - countB, 4);
  store<u32>(r, countA, 8);
  store<u32>(r, load<u32>(ap, MEMBERS), 12);
  store<u32>(r, countB, 16);
  store<u32>(r, bp == 0 ? 0 : load<u32>(bp, MEMBERS), 20);
  store<u32>(r, (slotStride() << 16) | slotOffset(), 24);
  store<u32>(r, 0, 28);
  runs++;
}

/**
 * Writes the run's workers at `out` as model slots (its map), up to
 * COPY_SLACK entries past them; returns how many.
 */
export function runCopy(run: usize, out: usize): u32 {
  const map = load<u32>(run, 24);
  return setDiffCopy(load<u32>(run, 8), load<u32>(run, 12), load<u32>(run, 16), load<u32>(run, 20), out, map >> 16, map & 0xffff);
}

/**
 * Writes the runs' workers as pairs after the walk's pairs (once per
 * answer); returns the pairs, one per worker.
 */
export function matchExpand(): u32 {
  if (expanded) return out;
  expanded = true;
  for (let i: u32 = 0; i < runs; i++) {
    const r = outRunsPtr() + <usize>i * RUN_BYTES;
    const start = out;
    out += runCopy(r, outSlotsPtr() + (<usize>out << 2));
    fillDepths(start, out, load<u32>(r));
  }
  recordAnswer();
  return out;
}

@inline
function emit(slot: u32, depth: u32): void {
  store<u32>(outSlotsPtr() + (<usize>out << 2), globalSlot(slot));
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

@inline
function stampWalked(p: usize, epoch: u16): void {
  if (load<u16>(p, STAMP) != epoch) store<u16>(p, epoch, STAMP);
}

/** Emits at depth the members of cur that are not members of child (child's members are a subset). */
function emitDropped(curAt: usize, childAt: usize, depth: u32): void {
  const start = out;
  out += setDiffCopy(memberCount(curAt), load<u32>(curAt, MEMBERS), memberCount(childAt), load<u32>(childAt, MEMBERS), outSlotsPtr() + (<usize>out << 2), slotStride(), slotOffset());
  fillDepths(start, out, depth);
}

/** Whether every member of the node at cp is a member of the node at pp. */
function within(cp: usize, pp: usize): bool {
  const count = memberCount(cp);
  for (let s = memberNext(cp, 0, count); s != NO_SLOT; s = memberNext(cp, s + 1, count)) if (!memberHas(pp, s)) return false;
  return true;
}

/**
 * Walks the hashes at ptr (count u64 local hashes) and writes the answer
 * (see the header); returns its workers.
 */
export function findMatches(ptr: usize, count: u32, earlyExit: bool): u32 {
  walk(ptr, count, earlyExit);
  recordAnswer();
  return workers;
}

function walk(ptr: usize, count: u32, earlyExit: bool): void {
  out = 0;
  runs = 0;
  workers = 0;
  expanded = false;
  if (count == 0 || !treeStarted()) return;
  let cur = rootChild(load<u64>(ptr));
  if (cur == 0) return;
  let curAt = nodeAt(cur);
  let curCount = memberCount(curAt);
  if (curCount == 0) return;
  workers = curCount;
  const epoch = <u16>currentEpoch();
  stampWalked(curAt, epoch);
  let depth: u32 = 1;
  const list = activeList();
  let listed: u32 = 0; // explicit form when > 0
  for (let i: u32 = 1; i < count && !(earlyExit && curCount == 1); i++) {
    if (listed == 0) {
      // Along a chain with the same members nothing is emitted: step the run at once.
      const steps = chainRun(cur, curAt, ptr + (<usize>i << 3), count - i, epoch);
      if (steps != 0) {
        cur += steps;
        curAt = nodeAt(cur);
        depth += steps;
        i += steps;
        if (i == count) break;
      }
    }
    // The next block's node: most often the next record (adjacentChild),
    // else looked up among the node's children.
    const local = load<u64>(ptr + (<usize>i << 3));
    let child = cur + 1;
    let cp = adjacentChild(cur, curAt, local);
    if (cp == 0) {
      child = childFind(cur, local);
      if (child == 0) break;
      cp = nodeAt(child);
    }
    const childCount = memberCount(cp);
    if (childCount == 0) break;
    stampWalked(cp, epoch);
    if (listed == 0) {
      const tracked = (load<u32>(curAt, INFO) & UNTRACKED) == 0;
      if (tracked ? load<u16>(cp, ORPHANS) == 0 : childCount <= FEW_SURVIVORS && within(cp, curAt)) {
        if (childCount != curCount) {
          if ((curCount - childCount) * RUN_SHARE >= curCount) emitRun(curAt, cp, depth);
          else emitDropped(curAt, cp, depth);
        }
        cur = child;
        curAt = cp;
        curCount = childCount;
        depth++;
        continue;
      }
      // The child may have members outside the current set: list the set.
      listed = memberCopy(curAt, list, 1, 0);
    }
    let kept: u32 = 0;
    if (listed * LOOKUP_RATIO < childCount) {
      for (let k: u32 = 0; k < listed; k++) {
        const slot = load<u32>(list + (<usize>k << 2));
        if (memberHas(cp, slot)) store<u32>(list + (<usize>(kept++) << 2), slot);
        else emit(slot, depth);
      }
    } else {
      const stamp = nextStamp();
      memberMark(cp, stamp);
      for (let k: u32 = 0; k < listed; k++) {
        const slot = load<u32>(list + (<usize>k << 2));
        if (slotMark(slot) == stamp) store<u32>(list + (<usize>(kept++) << 2), slot);
        else emit(slot, depth);
      }
    }
    if (kept == 0) return;
    cur = child;
    curAt = cp;
    depth++;
    // Every listed slot is a member of the child: equal sizes, equal sets.
    listed = kept == childCount ? 0 : kept;
    curCount = kept;
  }
  if (listed == 0) {
    emitRun(curAt, 0, depth);
  } else {
    for (let k: u32 = 0; k < listed; k++) emit(load<u32>(list + (<usize>k << 2)), depth);
  }
}
