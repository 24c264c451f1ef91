import { release } from './alloc';
import { RecordPool, poolCreate, poolGive, poolRecord, poolTake, regrow } from './grow';
import { MAP_EMPTY, U64Map, mapCreate, mapDelete, mapDeleteAt, mapFill, mapGet, mapProbe, mapProbeForInsert, mapReserve, mapSet, mapShrink, mapSlotValue } from './u64-map';

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
// its place. Free seq ids are chained through +16.

const seqIds: U64Map = mapCreate(16);
const holders: U64Map = mapCreate(16);
const seqs: RecordPool = poolCreate(32, 16);

@inline
function seqRecord(sid: u32): usize {
  return poolRecord(seqs, sid);
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

/** Room for `count` more hashes, made before a request holds its prompt's. */
export function seqReserve(count: u32): void {
  mapReserve(seqIds, count);
}

/** One more active request of `worker` names `hash`; true when the worker did not hold it before. */
export function seqHold(worker: u32, hash: u64): bool {
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
  return fresh;
}

/**
 * One fewer active request of `worker` names `hash` (it was held); true when
 * the worker no longer holds it. The hash is looked up once, and the table
 * keeps its size: call seqReleaseEnd after the last release of a batch.
 */
export function seqRelease(worker: u32, hash: u64): bool {
  const slot = mapProbe(seqIds, hash);
  const sid = mapSlotValue(seqIds, slot);
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
    // The holders map is another table: the slot found above still holds the hash.
    mapDeleteAt(seqIds, slot);
    poolGive(seqs, sid);
  }
  return true;
}

/** Ends a batch of releases: the hash table shrinks once if they left it mostly empty. */
export function seqReleaseEnd(): void {
  mapShrink(seqIds);
}

/** The record of an active hash, or 0 when no active request names it. Valid until the next hold or release. */
@inline
export function seqFind(hash: u64): usize {
  const sid = mapGet(seqIds, hash);
  return sid == MAP_EMPTY ? 0 : seqRecord(sid);
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
  return seqIds.size;
}
