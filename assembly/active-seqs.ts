import { release } from './alloc';
import { RecordPool, grownCapacity, poolCreate, poolGive, poolRecord, poolTake, regrow } from './grow';
import { MAP_EMPTY, U64Map, mapCreate, mapDelete, mapFill, mapGet, mapProbeForInsert, mapRetain, mapSet, mapSlotValue } from './u64-map';

// The ledger's reverse index of active sequence hashes: for every hash that an
// active request names, which workers hold it and through how many of their
// requests. Decode blocks count distinct hashes per worker through it, and the
// projection finds the workers holding a prompt's hashes in time proportional
// to the holders rather than workers x blocks (load-table.ts).
//   seqIds   U64Map  sequence hash -> seq id
//   seq      32-byte records by seq id: +0 hash u64 | +8 holder 0 (8 bytes) | +16 more ptr |
//            +20 holder count u32 | +24 more capacity u32
//   holder   8 bytes: +0 worker u32 | +4 refs u32 (that worker's active requests naming the hash)
//   holders  U64Map  (seq id << 32 | worker slot) -> holder index, for indices >= 1
// A sequence's holders are contiguous, so the projection walks them without
// chasing pointers: holder 0 inside the record (most hashes have one holder),
// holder i >= 1 at more + 8 (i - 1), an array that doubles as it fills and is
// released when one holder is left. Removing a holder moves the last one into
// its place. Free seq ids are chained through +16, and their +24 is GIVEN_BACK.
//
// A booked request keeps the seq ids of its hashes, so its release goes
// straight to the records. A record whose last holder leaves stays in seqIds,
// cold (no holders): it is active again, at the cost of one lookup, when the
// next turn of the conversation books the same prefix. Cold records are not
// active (seqFind does not return them, seqActiveCount does not count them);
// a bit per seq id (`held`) tells them apart without reading the record, so
// a lookup of a cold hash reads no more memory than a lookup of an absent one;
// once more than COLD_LIMIT pile up, one pass drops them all and gives their
// ids back, and the table shrinks to the active ones.

/** Cold records kept for the next turns before they are dropped (each costs its 32 bytes and a table entry). */
export const COLD_LIMIT: u32 = 1 << 16;

/** In +24 (more capacity) of a record given back to the pool, which no record in use has. */
const GIVEN_BACK: u32 = 0xffffffff;

const seqIds: U64Map = mapCreate(16);
const holders: U64Map = mapCreate(16);
const seqs: RecordPool = poolCreate(32, 16);
let cold: u32 = 0;
/** One bit per seq id: set while the record has holders. */
let held: usize = 0;
let heldWords: u32 = 0;
/** Whether the last seqHold made its worker a holder of the hash (it did not hold it before). */
export let seqHeldNew: bool = false;

@inline
function seqRecord(sid: u32): usize {
  return poolRecord(seqs, sid);
}

@inline
function isHeld(sid: u32): bool {
  return (load<u32>(held + (<usize>(sid >> 5) << 2)) & (<u32>1 << (sid & 31))) != 0;
}

@inline
function flipHeld(sid: u32): void {
  const p = held + (<usize>(sid >> 5) << 2);
  store<u32>(p, load<u32>(p) ^ (<u32>1 << (sid & 31)));
}

@inline
function holderKey(sid: u32, worker: u32): u64 {
  return (<u64>sid << 32) | <u64>worker;
}

/** Address of holder i of the sequence at s. */
@inline
function holderAt(s: usize, i: u32): usize {
  return i == 0 ? s + 8 : load<usize>(s, 16) + (<usize>(i - 1) << 3);
}

/** Index of worker among the holders of the sequence sid (at s), or MAP_EMPTY. */
@inline
function holderIndex(s: usize, sid: u32, worker: u32): u32 {
  if (load<u32>(s, 20) == 0) return MAP_EMPTY;
  if (load<u32>(s, 8) == worker) return 0;
  return mapGet(holders, holderKey(sid, worker));
}

/**
 * One more active request of `worker` names `hash`; returns the hash's seq
 * id, for the release, and sets seqHeldNew when the worker did not hold it before.
 */
export function seqHold(worker: u32, hash: u64): u32 {
  const slot = mapProbeForInsert(seqIds, hash);
  let sid = mapSlotValue(seqIds, slot);
  if (sid == MAP_EMPTY) {
    sid = poolTake(seqs);
    const s = seqRecord(sid);
    store<u64>(s, hash, 0);
    store<usize>(s, 0, 16);
    store<u32>(s, 0, 20);
    store<u32>(s, 0, 24);
    mapFill(seqIds, slot, hash, sid);
    if ((sid >> 5) >= heldWords) {
      const words = grownCapacity(heldWords, (sid >> 5) + 1);
      held = regrow(held, heldWords, words, 4);
      heldWords = words;
    }
    // A record without holders, as a cold one: seqHoldId makes it active.
    cold++;
  }
  seqHoldId(worker, sid);
  return sid;
}

/**
 * Whether `sid`, the id a hash had in an earlier request, still names `hash`:
 * its record is in use (not given back) and holds that hash (one hash has
 * one record in use). Lets a booking reuse an earlier request's ids without
 * a table lookup.
 */
export function seqNames(sid: u32, hash: u64): bool {
  if (sid >= seqs.high) return false;
  const s = seqRecord(sid);
  return load<u32>(s, 24) != GIVEN_BACK && load<u64>(s) == hash;
}

/** seqHold for a hash whose seq id is known (seqNames); sets seqHeldNew likewise. */
export function seqHoldId(worker: u32, sid: u32): void {
  if (!isHeld(sid)) {
    cold--;
    flipHeld(sid);
  }
  const s = seqRecord(sid);
  let index = holderIndex(s, sid, worker);
  const fresh = index == MAP_EMPTY;
  if (fresh) {
    index = load<u32>(s, 20);
    if (index > 0) {
      const capacity = load<u32>(s, 24);
      if (index > capacity) {
        const grown = capacity == 0 ? <u32>2 : capacity << 1;
        store<usize>(s, regrow(load<usize>(s, 16), capacity, grown, 8), 16);
        store<u32>(s, grown, 24);
      }
      mapSet(holders, holderKey(sid, worker), index);
    }
    const h = holderAt(s, index);
    store<u32>(h, worker, 0);
    store<u32>(h, 0, 4);
    store<u32>(s, index + 1, 20);
  }
  const h = holderAt(s, index);
  store<u32>(h, load<u32>(h, 4) + 1, 4);
  seqHeldNew = fresh;
}

/**
 * One fewer active request of `worker` names the hash of seq id `sid` (from
 * its seqHold); true when the worker no longer holds it. A hash left without
 * holders turns cold: call seqReleaseEnd after the last release of a batch.
 */
export function seqRelease(worker: u32, sid: u32): bool {
  const s = seqRecord(sid);
  const index = holderIndex(s, sid, worker);
  const h = holderAt(s, index);
  const refs = load<u32>(h, 4) - 1;
  if (refs > 0) {
    store<u32>(h, refs, 4);
    return false;
  }
  if (index > 0) mapDelete(holders, holderKey(sid, worker));
  const last = load<u32>(s, 20) - 1;
  if (index != last) {
    const moved = load<u32>(holderAt(s, last), 0);
    store<u64>(h, load<u64>(holderAt(s, last)));
    if (index == 0) mapDelete(holders, holderKey(sid, moved));
    else mapSet(holders, holderKey(sid, moved), index);
  }
  store<u32>(s, last, 20);
  if (last <= 1) {
    const capacity = load<u32>(s, 24);
    if (capacity > 0) release(load<usize>(s, 16), <usize>capacity << 3);
    store<usize>(s, 0, 16);
    store<u32>(s, 0, 24);
  }
  if (last == 0) {
    cold++;
    flipHeld(sid);
  }
  return true;
}

/** Ends a batch of releases: past COLD_LIMIT cold records, drops them all. */
export function seqReleaseEnd(): void {
  if (cold > COLD_LIMIT) dropCold();
}

function dropCold(): void {
  mapRetain(seqIds, seqIds.size - cold, keepHeld);
  cold = 0;
}

/** Whether the record sid has holders; a cold one's id goes back to the pool. */
function keepHeld(sid: u32): bool {
  if (isHeld(sid)) return true;
  store<u32>(seqRecord(sid), GIVEN_BACK, 24);
  poolGive(seqs, sid);
  return false;
}

/** The record of an active hash, or 0 when no active request names it. Valid until the next hold or release. */
@inline
export function seqFind(hash: u64): usize {
  const sid = mapGet(seqIds, hash);
  if (sid == MAP_EMPTY) return 0;
  return isHeld(sid) ? seqRecord(sid) : 0;
}

/** How many workers hold the hash whose record is s (at least 1). */
@inline
export function seqHolderCount(s: usize): u32 {
  return load<u32>(s, 20);
}

/** The worker of holder i (< seqHolderCount) of the record s. */
@inline
export function seqHolderWorker(s: usize, i: u32): u32 {
  return load<u32>(holderAt(s, i));
}

/** Distinct sequence hashes active on any worker. */
export function seqActiveCount(): u32 {
  return seqIds.size - cold;
}
