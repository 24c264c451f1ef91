import { seqActiveCount, seqHeldNew, seqHold, seqHoldId, seqNames, seqRelease, seqReleaseEnd } from '../active-seqs';
import { alloc, release } from '../alloc';
import { NIL, RecordPool, grownCapacity, poolCreate, poolGive, poolRecord, poolTake, regrow } from '../grow';
import { addDecode, addDecoding, addPrefill, addRequests, isPresent } from './rows';
import { rowChanged } from './views';

// The ledger's requests: what each booked request holds on its worker. The
// binding maps request ids to u32 handles; `ledgerAdd` hands one out (freed
// handles are reused). A record is 32 bytes:
//   +0 worker u32 | +4 prefill u32 (tokens still counted in ACTIVE_PREFILL, 0 after
//   prefillComplete) | +8 seq ids ptr (u32: the active-seqs record of each of its sequence hashes) |
//   +12 count u32 | +16 addedAt f64 | +24 state u32 (0 free, 1 in prefill, 2 decoding:
//   past its first token, counted in DECODING) | +28 next free handle u32
// Active sequences (active-seqs.ts) count decode blocks as distinct hashes
// and give the projection the workers holding a prompt's hashes.
// `ledgerSweep` and `ledgerRemoveWorker` write the handles they drop to
// `ledgerDroppedPtr()` (u32) and return how many.

const requests: RecordPool = poolCreate(32, 28);
const FREE: u32 = 0;
const PREFILLING: u32 = 1;
const DECODING: u32 = 2;
let liveRequests: u32 = 0;

// The seq ids of the request freed last by ledgerFree (a request that ended;
// one swept or dropped with its worker is no hint). The next turn of its conversation
// names the same leading hashes, so a booking first walks these ids while
// they still name its hashes (seqNames), reading records in order instead of
// looking each hash up in the table; the first hash that differs ends the
// walk (sequence hashes are chained: the rest differ too).
let recentSids: usize = 0;
let recentCount: u32 = 0;

let dropped: usize = 0;
let droppedCapacity: u32 = 0;

@inline
function record(handle: u32): usize {
  return poolRecord(requests, handle);
}

@inline
function isLive(handle: u32): bool {
  return handle < requests.high && load<u32>(record(handle), 24) != FREE;
}

/**
 * Books a request on a present worker: its uncached prompt tokens count as
 * active prefill and its sequence hashes as active decode blocks. Returns its
 * handle, or NIL when the worker is not present.
 */
export function ledgerAdd(worker: u32, seqPtr: usize, seqCount: u32, prefillTokens: u32, now: f64): u32 {
  if (!isPresent(worker)) return NIL;
  const handle = poolTake(requests);
  let sids: usize = 0;
  if (seqCount > 0) {
    sids = alloc(<usize>seqCount << 2);
    let held: i32 = 0;
    const known = seqCount < recentCount ? seqCount : recentCount;
    let i: u32 = 0;
    for (; i < known; i++) {
      const sid = load<u32>(recentSids + (<usize>i << 2));
      if (!seqNames(sid, load<u64>(seqPtr + (<usize>i << 3)))) break;
      seqHoldId(worker, sid);
      store<u32>(sids + (<usize>i << 2), sid);
      if (seqHeldNew) held++;
    }
    for (; i < seqCount; i++) {
      store<u32>(sids + (<usize>i << 2), seqHold(worker, load<u64>(seqPtr + (<usize>i << 3))));
      if (seqHeldNew) held++;
    }
    addDecode(worker, held);
  }
  const r = record(handle);
  store<u32>(r, worker, 0);
  store<u32>(r, prefillTokens, 4);
  store<usize>(r, sids, 8);
  store<u32>(r, seqCount, 12);
  store<f64>(r, now, 16);
  store<u32>(r, PREFILLING, 24);
  addPrefill(worker, <f64>prefillTokens);
  addRequests(worker, 1);
  liveRequests++;
  rowChanged(worker);
  return handle;
}

/** Releases a request's prefill tokens and counts it as decoding (first output token). False when unknown. */
export function ledgerPrefillComplete(handle: u32): bool {
  if (!isLive(handle)) return false;
  releasePrefill(handle);
  const r = record(handle);
  const worker = load<u32>(r, 0);
  if (load<u32>(r, 24) == PREFILLING) {
    store<u32>(r, DECODING, 24);
    addDecoding(worker, 1);
  }
  rowChanged(worker);
  return true;
}

/**
 * Takes up to `tokens` off the prefill a request in prefill still counts,
 * leaving it at least `keep` (or what it has, when less): prompt tokens its
 * worker has computed (its KV events showed their blocks), ahead of its
 * first token. Returns the tokens taken: 0 when the handle is unknown, past
 * its first token, or has no more than `keep` left.
 */
export function ledgerPrefillProgress(handle: u32, tokens: u32, keep: u32): u32 {
  if (!isLive(handle)) return 0;
  const r = record(handle);
  if (load<u32>(r, 24) != PREFILLING) return 0;
  const left = load<u32>(r, 4);
  const room = left > keep ? left - keep : 0;
  const taken = tokens < room ? tokens : room;
  if (taken == 0) return 0;
  store<u32>(r, left - taken, 4);
  const worker = load<u32>(r, 0);
  addPrefill(worker, -<f64>taken);
  rowChanged(worker);
  return taken;
}

function releasePrefill(handle: u32): void {
  const r = record(handle);
  const tokens = load<u32>(r, 4);
  if (tokens != 0) {
    addPrefill(load<u32>(r, 0), -<f64>tokens);
    store<u32>(r, 0, 4);
  }
}

/** Releases everything a request holds (completion, error, cancel). False when unknown. */
export function ledgerFree(handle: u32): bool {
  if (!isLive(handle)) return false;
  rowChanged(freeRequest(handle, true));
  return true;
}

/**
 * Releases a live request without updating its worker's key and leaves;
 * returns the worker. `recent`: its seq ids become the hint for the next booking.
 */
function freeRequest(handle: u32, recent: bool): u32 {
  releasePrefill(handle);
  const r = record(handle);
  const worker = load<u32>(r, 0);
  const sids = load<usize>(r, 8);
  const count = load<u32>(r, 12);
  if (count > 0) {
    let released: i32 = 0;
    for (let i: u32 = 0; i < count; i++) {
      if (seqRelease(worker, load<u32>(sids + (<usize>i << 2)))) released++;
    }
    addDecode(worker, -released);
    seqReleaseEnd();
    if (recent) {
      if (recentCount > 0) release(recentSids, <usize>recentCount << 2);
      recentSids = sids;
      recentCount = count;
    } else {
      release(sids, <usize>count << 2);
    }
  }
  addRequests(worker, -1);
  if (load<u32>(r, 24) == DECODING) addDecoding(worker, -1);
  store<u32>(r, FREE, 24);
  poolGive(requests, handle);
  liveRequests--;
  return worker;
}

function reserveDropped(): void {
  if (droppedCapacity < requests.high) {
    const cap = grownCapacity(droppedCapacity, requests.high);
    dropped = regrow(dropped, droppedCapacity, cap, 4);
    droppedCapacity = cap;
  }
}

/** Frees every request added more than maxAgeMs before now; returns how many (handles at ledgerDroppedPtr). */
export function ledgerSweep(now: f64, maxAgeMs: f64): u32 {
  reserveDropped();
  let count: u32 = 0;
  for (let h: u32 = 0; h < requests.high; h++) {
    if (isLive(h) && now - load<f64>(record(h), 16) > maxAgeMs) {
      rowChanged(freeRequest(h, false));
      store<u32>(dropped + (<usize>count << 2), h);
      count++;
    }
  }
  return count;
}

/** Frees every request booked on a worker (its removal); returns how many (handles at ledgerDroppedPtr). */
export function dropWorkerRequests(slot: u32): u32 {
  reserveDropped();
  let count: u32 = 0;
  for (let h: u32 = 0; h < requests.high; h++) {
    if (isLive(h) && load<u32>(record(h), 0) == slot) {
      freeRequest(h, false);
      store<u32>(dropped + (<usize>count << 2), h);
      count++;
    }
  }
  return count;
}

export function ledgerDroppedPtr(): usize {
  return dropped;
}

export function ledgerLiveRequests(): u32 {
  return liveRequests;
}

/** Distinct sequence hashes active on any worker. */
export function ledgerActiveHashes(): u32 {
  return seqActiveCount();
}
