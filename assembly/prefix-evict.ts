import { alloc, release } from './alloc';
import { ID_EMPTY, idsCapacity, idsEntry, idsShrink, idsSize } from './prefix-ids';
import { forget, walkStart, wordNode } from './prefix-bind';
import { usedBytes } from './prefix-memory';
import { PARENT, ROOT, memberCount, membershipCount, nodeAt, nodeCount, nodeIsLive, nodeTop, stampAt } from './prefix-nodes';
import { META_EVICTED, META_OLDEST, globalSlot, slotCapacity, slotIds, slotMeta } from './prefix-slots';

// What the index forgets first when it reaches its memory bound: the blocks
// least recently stored or matched.
//
// Every node has a u16 stamp (in its record): the
// epoch of the last event that stored it or lookup that walked it. The epoch
// advances every 1/64 of the index's (worker, block) pairs stored (at least
// 64 blocks), so ages mean "how many 64ths of the index came in since". A
// lookup stamps its path from the root down and a store stamps its chain's
// parent and a few ancestors, so a parent is rarely older than its child and
// the blocks older than an age mostly form whole subtrees (a block evicted
// under one its worker keeps only makes that one an orphan, which the index
// handles like a removal in the middle of a chain).
//
// Before a store that could take the index past its bound, eviction estimates
// from a sample of nodes the age beyond which the excess lies, then walks the
// workers round robin, each one's id table once, forgetting its ids of blocks
// at least that old, until the index is under the bound (less the event and
// 1/64 of the bound, so it does not evict on every event). A round that
// falls short halves the age. Each worker keeps a lower bound on its blocks'
// stamps, so a round skips workers with nothing that old. Every id forgotten
// is counted (per worker, since its last clear) and, when a log is set up,
// written there for whoever must mirror it (the tests' twin).

let epoch: u32 = 1;
let sinceTick: u32 = 0;
let bound: usize = 0;
let hand: u32 = 0;
let evicted: u64 = 0;
let rng: u32 = 0x9e3779b9;

// The eviction log: 16-byte entries (id u64, slot u32, pad), from alloc.ts
// rather than the index's own memory, since it is not part of the index.
let logAt: usize = 0;
let logCapacity: u32 = 0;
let logCount: u32 = 0;
let logOverflow = false;

// Sample of (age, members) for the age estimate, in static data.
const SAMPLES: u32 = 256;
const sample: usize = memory.data(<i32>SAMPLES * 8, 8);

@inline
export function currentEpoch(): u32 {
  return epoch;
}

@inline
function ageOf(n: u32): u32 {
  return (epoch - <u32>load<u16>(stampAt(n))) & 0xffff;
}

@inline
export function stampNode(n: u32): void {
  store<u16>(stampAt(n), <u16>epoch);
}

/**
 * Stamps n and its ancestors up to the first one already stamped this epoch,
 * at most TOUCH_DEPTH of them: a store continues a chain whose prefix the
 * lookup that routed it has just stamped from the root, and a chain grown by
 * events alone must not be walked to the root at every epoch.
 */
export function touchUp(n: u32): void {
  for (let k: u32 = 0; k < TOUCH_DEPTH && n != ROOT; k++) {
    const s = stampAt(n);
    if (<u32>load<u16>(s) == epoch) return;
    store<u16>(s, <u16>epoch);
    n = load<u32>(nodeAt(n), PARENT);
  }
}

const TOUCH_DEPTH: u32 = 32;

/** Counts stored blocks toward the next epoch. */
export function tickBlocks(count: u32): void {
  sinceTick += count;
  if (sinceTick >= max<u32>(64, membershipCount() >> 6)) {
    epoch = (epoch + 1) & 0xffff;
    sinceTick = 0;
  }
}

/** A worker starting to hold blocks: none of them is older than now. */
export function startOldest(slot: u32): void {
  store<u32>(slotMeta(slot), epoch, META_OLDEST);
}

export function setBound(bytes: usize): void {
  bound = bytes;
}

export function evictedCount(): u64 {
  return evicted;
}

/** Before an event that may add up to `estimate` bytes: evicts while the index would pass its bound. */
export function makeRoom(estimate: usize): void {
  if (bound == 0) return;
  const used = usedBytes();
  if (used + estimate <= bound) return;
  const slack = estimate + (bound >> 6);
  evictDown(bound > slack ? bound - slack : 0);
}

function evictDown(target: usize): void {
  const used = usedBytes();
  if (used <= target) return;
  let age = estimateAge(<f64>(used - target) / <f64>used);
  while (true) {
    const capacity = slotCapacity();
    for (let k: u32 = 0; k < capacity; k++) {
      const slot = hand;
      hand = hand + 1 >= capacity ? 0 : hand + 1;
      const h = slotIds(slot);
      if (idsSize(h) == 0) continue;
      if (((epoch - load<u32>(slotMeta(slot), META_OLDEST)) & 0xffff) < age) continue;
      evictSlot(slot, age);
      if (usedBytes() <= target) return;
    }
    if (age == 0) return;
    age >>= 1;
  }
}

// The age at or above which about `fraction` of the sampled memberships lie.
function estimateAge(fraction: f64): u32 {
  const top = nodeTop();
  if (nodeCount() == 0 || top <= 1) return 0;
  let taken: u32 = 0;
  let total: f64 = 0;
  for (let tries: u32 = 0; tries < SAMPLES * 4 && taken < SAMPLES; tries++) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    const n = 1 + rng % (top - 1);
    if (!nodeIsLive(n)) continue;
    const weight = memberCount(nodeAt(n));
    if (weight == 0) continue;
    // Insertion by age, oldest first.
    const age = ageOf(n);
    let j = taken++;
    for (; j > 0 && load<u32>(sample + (<usize>(j - 1) << 3)) < age; j--) {
      store<u64>(sample + (<usize>j << 3), load<u64>(sample + (<usize>(j - 1) << 3)));
    }
    store<u32>(sample + (<usize>j << 3), age);
    store<u32>(sample + (<usize>j << 3), weight, 4);
    total += weight;
  }
  const want = min(fraction * 1.25, 1.0) * total;
  let seen: f64 = 0;
  for (let j: u32 = 0; j < taken; j++) {
    seen += load<u32>(sample + (<usize>j << 3), 4);
    if (seen >= want) return load<u32>(sample + (<usize>j << 3));
  }
  return 0;
}

// Forgets the worker's ids of blocks at least `age` old; notes the oldest it keeps.
function evictSlot(slot: u32, age: u32): void {
  const h = slotIds(slot);
  const capacity = idsCapacity(h);
  const meta = slotMeta(slot);
  let oldestAge: u32 = 0;
  let oldest = epoch;
  let i = walkStart(h);
  for (let steps: u32 = 0; steps < capacity; ) {
    const e = idsEntry(h, i);
    const word = load<u32>(e, 8);
    if (word != ID_EMPTY) {
      const n = wordNode(word);
      const a = ageOf(n);
      if (a >= age) {
        logEviction(slot, load<u64>(e));
        store<u32>(meta, load<u32>(meta, META_EVICTED) + 1, META_EVICTED);
        evicted++;
        forget(slot, h, e);
        continue; // the next entry shifted into this place
      }
      if (a > oldestAge) {
        oldestAge = a;
        oldest = <u32>load<u16>(stampAt(n));
      }
    }
    i = i + 1 == capacity ? 0 : i + 1;
    steps++;
  }
  store<u32>(meta, oldest, META_OLDEST);
  idsShrink(h);
}

function logEviction(slot: u32, id: u64): void {
  if (logCapacity == 0) return;
  if (logCount == logCapacity) {
    logOverflow = true;
    return;
  }
  const at = logAt + (<usize>(logCount++) << 4);
  store<u64>(at, id);
  store<u32>(at, globalSlot(slot), 8);
}

/** Starts (capacity > 0) or stops logging evictions; clears the log. */
export function setEvictionLog(capacity: u32): void {
  if (logAt != 0) release(logAt, <usize>logCapacity << 4);
  logAt = capacity == 0 ? 0 : alloc(<usize>capacity << 4);
  logCapacity = capacity;
  logCount = 0;
  logOverflow = false;
}

export function evictionLogPtr(): usize {
  return logAt;
}

/** Entries in the log, or -1 when it overflowed (some evictions were not written). */
export function evictionLogCount(): i32 {
  return logOverflow ? -1 : <i32>logCount;
}

export function clearEvictionLog(): void {
  logCount = 0;
  logOverflow = false;
}

/** Forgets the eviction state that belongs to the tree (the index is empty or abandoned). */
export function resetEviction(): void {
  hand = 0;
  sinceTick = 0;
}
