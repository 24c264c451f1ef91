import { seqActiveCount, seqFind, seqHold, seqHolderCount, seqHolderWorker, seqRelease } from './active-seqs';
import { alloc, release } from './alloc';
import { busyReason, costKey } from './cost-model';
import { NIL, RecordPool, grownCapacity, poolCreate, poolGive, poolRecord, poolTake, regrow } from './grow';
import { tieTreeFill, tieTreeLeaves, tieTreeRebuild, tieTreeResize, tieTreeSet } from './tie-tree';

// The load ledger: what every worker is carrying (the requests dispatched to
// it and not yet finished) and the projection of one new request onto every
// worker. Export prefix `ledger`.
//
// Worker rows: one per worker slot, `ledgerRows()` of them; they only grow.
// Each column is a flat array; `ledgerColumn(id)` gives its address, which
// moves when rows grow, and a JS view of it detaches whenever memory grows.
//   id  column              type  meaning
//   0   PRESENT             u8    1 from setWorker until removeWorker
//   1   AVAILABLE           u8    1 when the worker takes new requests
//   2   TOTAL_BLOCKS        u32   KV cache capacity in blocks
//   3   MAX_BATCHED_TOKENS  u32   the engine's max_num_batched_tokens
//   4   ACTIVE_PREFILL      f64   uncached prompt tokens of its requests still in prefill
//                                 (a sum of u32s, so an exact integer)
//   5   ACTIVE_DECODE       u32   DISTINCT sequence hashes among its active requests
//   6   ACTIVE_REQUESTS     u32
//   7   OVERLAP             u32   projection: cached prefix depth in blocks
//   8   POTENTIAL_PREFILL   f64   projection: ACTIVE_PREFILL + the request's uncached tokens there
//   9   POTENTIAL_DECODE    u32   projection: ACTIVE_DECODE + prompt hashes it does not hold active
//  10   TOUCH               2 x u32  projection: +0 the cached prefix depth, +4 the prompt
//                                 hashes it holds active (one 8-byte record per slot, so a
//                                 touched worker costs one cache line)
//
// The projection is sparse: `ledgerProject` writes TOUCH only for the workers
// the request touches (a nonzero depth or held count; every other row reads 0)
// and lists them at `ledgerTouchedPtr()`; OVERLAP and the two potential columns
// are filled for every row by `ledgerProjectColumns()`, on demand.
//
// Fast path (select-fast.ts): after `ledgerEnableFastPath(scale, weight,
// blockSize, busy thresholds)` the ledger keeps every worker's cost key
// (cost-model.ts) in the tie tree (tie-tree.ts), as a member when the worker is
// present, available and not busy under those thresholds, and counts present,
// available and member workers. Every change to a worker's load, capacity,
// presence or availability updates its leaf in O(log n).
//
// Requests: the binding maps request ids to u32 handles; `ledgerAdd` hands
// one out (freed handles are reused). A record is 32 bytes:
//   +0 worker u32 | +4 prefill u32 (tokens still counted in ACTIVE_PREFILL, 0 after
//   prefillComplete) | +8 hashes ptr (its own copy of the u64 sequence hashes) |
//   +12 count u32 | +16 addedAt f64 | +24 live u32 | +28 next free handle u32
//
// Active sequences (active-seqs.ts) count decode blocks as distinct hashes and
// give the projection the workers holding a prompt's hashes.
//
// Inputs: `ledgerReserveInput(seqCount, overlapCount)` sizes a staging area for
// callers with no buffer of their own: `ledgerInputSeqPtr()` (u64 sequence
// hashes), `ledgerInputSlotsPtr()` and `ledgerInputDepthsPtr()` (u32 pairs of the
// sparse overlap list). Any u64 buffer and u32 pair list in this memory will do,
// e.g. the block hasher's and the prefix index's outputs.
// Outputs: `ledgerSweep` and `ledgerRemoveWorker` write the handles they drop
// to `ledgerDroppedPtr()` (u32) and return how many.

export const COL_PRESENT: u32 = 0;
export const COL_AVAILABLE: u32 = 1;
export const COL_TOTAL_BLOCKS: u32 = 2;
export const COL_MAX_BATCHED_TOKENS: u32 = 3;
export const COL_ACTIVE_PREFILL: u32 = 4;
export const COL_ACTIVE_DECODE: u32 = 5;
export const COL_ACTIVE_REQUESTS: u32 = 6;
export const COL_OVERLAP: u32 = 7;
export const COL_POTENTIAL_PREFILL: u32 = 8;
export const COL_POTENTIAL_DECODE: u32 = 9;
export const COL_TOUCH: u32 = 10;

// ---- worker rows ----

let rows: u32 = 0;
let rowCapacity: u32 = 0;
let presentCol: usize = 0;
let availableCol: usize = 0;
let totalBlocksCol: usize = 0;
let maxBatchedCol: usize = 0;
let prefillCol: usize = 0;
let decodeCol: usize = 0;
let requestsCol: usize = 0;
let overlapCol: usize = 0;
let potentialPrefillCol: usize = 0;
let potentialDecodeCol: usize = 0;
let touchCol: usize = 0;
// Per slot, the worker's standing at its last leaf update (STATE_* bits).
let stateCol: usize = 0;
// Slots the last projection touched, each once.
let touched: usize = 0;
let touchedCount: u32 = 0;

// The request the columns were last projected for (the cost reads them).
let projectedPromptTokens: u32 = 0;
let projectedBlockSize: u32 = 0;
let projectedSeqCount: u32 = 0;

export function ledgerReserveWorkers(count: u32): void {
  if (count > rowCapacity) {
    const cap = grownCapacity(rowCapacity, count);
    presentCol = regrow(presentCol, rowCapacity, cap, 1);
    availableCol = regrow(availableCol, rowCapacity, cap, 1);
    totalBlocksCol = regrow(totalBlocksCol, rowCapacity, cap, 4);
    maxBatchedCol = regrow(maxBatchedCol, rowCapacity, cap, 4);
    prefillCol = regrow(prefillCol, rowCapacity, cap, 8);
    decodeCol = regrow(decodeCol, rowCapacity, cap, 4);
    requestsCol = regrow(requestsCol, rowCapacity, cap, 4);
    overlapCol = regrow(overlapCol, rowCapacity, cap, 4);
    potentialPrefillCol = regrow(potentialPrefillCol, rowCapacity, cap, 8);
    potentialDecodeCol = regrow(potentialDecodeCol, rowCapacity, cap, 4);
    touchCol = regrow(touchCol, rowCapacity, cap, 8);
    stateCol = regrow(stateCol, rowCapacity, cap, 1);
    touched = regrow(touched, rowCapacity, cap, 4);
    rowCapacity = cap;
  }
  if (count > rows) rows = count;
  if (fastPath && tieTreeLeaves() < rowCapacity) rebuildTree();
}

export function ledgerRows(): u32 {
  return rows;
}

export function ledgerColumn(id: u32): usize {
  switch (id) {
    case COL_PRESENT: return presentCol;
    case COL_AVAILABLE: return availableCol;
    case COL_TOTAL_BLOCKS: return totalBlocksCol;
    case COL_MAX_BATCHED_TOKENS: return maxBatchedCol;
    case COL_ACTIVE_PREFILL: return prefillCol;
    case COL_ACTIVE_DECODE: return decodeCol;
    case COL_ACTIVE_REQUESTS: return requestsCol;
    case COL_OVERLAP: return overlapCol;
    case COL_POTENTIAL_PREFILL: return potentialPrefillCol;
    case COL_POTENTIAL_DECODE: return potentialDecodeCol;
    case COL_TOUCH: return touchCol;
  }
  return 0;
}

/** Prompt tokens of the last projection (0 before any). */
export function ledgerProjectedPromptTokens(): u32 {
  return projectedPromptTokens;
}

/** Block size of the last projection (0 before any). */
export function ledgerProjectedBlockSize(): u32 {
  return projectedBlockSize;
}

/** Sequence hashes of the last projection. */
export function ledgerProjectedSeqCount(): u32 {
  return projectedSeqCount;
}

@inline
function isPresent(slot: u32): bool {
  return slot < rows && load<u8>(presentCol + slot) != 0;
}

/** Gives a slot its capacity; a slot new to the ledger starts available. */
export function ledgerSetWorker(slot: u32, totalBlocks: u32, maxBatchedTokens: u32): void {
  if (slot >= rows) ledgerReserveWorkers(slot + 1);
  if (!isPresent(slot)) {
    store<u8>(presentCol + slot, 1);
    store<u8>(availableCol + slot, 1);
  }
  store<u32>(totalBlocksCol + (<usize>slot << 2), totalBlocks);
  store<u32>(maxBatchedCol + (<usize>slot << 2), maxBatchedTokens);
  refreshLeaf(slot);
}

/** Marks a present worker available or not; false when the slot is not present. */
export function ledgerSetAvailable(slot: u32, available: bool): bool {
  if (!isPresent(slot)) return false;
  store<u8>(availableCol + slot, available ? 1 : 0);
  refreshLeaf(slot);
  return true;
}

// ---- requests ----

const requests: RecordPool = poolCreate(32, 28);
let liveRequests: u32 = 0;

let dropped: usize = 0;
let droppedCapacity: u32 = 0;

@inline
function record(handle: u32): usize {
  return poolRecord(requests, handle);
}

@inline
function isLive(handle: u32): bool {
  return handle < requests.high && load<u32>(record(handle), 24) != 0;
}

/**
 * Books a request on a present worker: its uncached prompt tokens count as
 * active prefill and its sequence hashes as active decode blocks. Returns its
 * handle, or NIL when the worker is not present.
 */
export function ledgerAdd(worker: u32, seqPtr: usize, seqCount: u32, prefillTokens: u32, now: f64): u32 {
  if (!isPresent(worker)) return NIL;
  const handle = poolTake(requests);
  let hashes: usize = 0;
  if (seqCount > 0) {
    hashes = alloc(<usize>seqCount << 3);
    memory.copy(hashes, seqPtr, <usize>seqCount << 3);
    for (let i: u32 = 0; i < seqCount; i++) {
      if (seqHold(worker, load<u64>(hashes + (<usize>i << 3)))) addDecode(worker, 1);
    }
  }
  const r = record(handle);
  store<u32>(r, worker, 0);
  store<u32>(r, prefillTokens, 4);
  store<usize>(r, hashes, 8);
  store<u32>(r, seqCount, 12);
  store<f64>(r, now, 16);
  store<u32>(r, 1, 24);
  const p = prefillCol + (<usize>worker << 3);
  store<f64>(p, load<f64>(p) + <f64>prefillTokens);
  const q = requestsCol + (<usize>worker << 2);
  store<u32>(q, load<u32>(q) + 1);
  liveRequests++;
  refreshLeaf(worker);
  return handle;
}

/** Distinct active hashes of a worker go up or down by one. */
@inline
function addDecode(worker: u32, delta: i32): void {
  const d = decodeCol + (<usize>worker << 2);
  store<u32>(d, load<u32>(d) + <u32>delta);
}

/** Releases a request's prefill tokens (first output token). False when unknown. */
export function ledgerPrefillComplete(handle: u32): bool {
  if (!isLive(handle)) return false;
  releasePrefill(handle);
  refreshLeaf(load<u32>(record(handle), 0));
  return true;
}

function releasePrefill(handle: u32): void {
  const r = record(handle);
  const tokens = load<u32>(r, 4);
  if (tokens != 0) {
    const p = prefillCol + (<usize>load<u32>(r, 0) << 3);
    store<f64>(p, load<f64>(p) - <f64>tokens);
    store<u32>(r, 0, 4);
  }
}

/** Releases everything a request holds (completion, error, cancel). False when unknown. */
export function ledgerFree(handle: u32): bool {
  if (!isLive(handle)) return false;
  refreshLeaf(freeRequest(handle));
  return true;
}

/** Releases a live request without updating its worker's leaf; returns the worker. */
function freeRequest(handle: u32): u32 {
  releasePrefill(handle);
  const r = record(handle);
  const worker = load<u32>(r, 0);
  const hashes = load<usize>(r, 8);
  const count = load<u32>(r, 12);
  if (count > 0) {
    for (let i: u32 = 0; i < count; i++) {
      if (seqRelease(worker, load<u64>(hashes + (<usize>i << 3)))) addDecode(worker, -1);
    }
    release(hashes, <usize>count << 3);
  }
  const q = requestsCol + (<usize>worker << 2);
  store<u32>(q, load<u32>(q) - 1);
  store<u32>(r, 0, 24);
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
      refreshLeaf(freeRequest(h));
      store<u32>(dropped + (<usize>count << 2), h);
      count++;
    }
  }
  return count;
}

/** Drops a worker's requests and its row; returns how many requests (handles at ledgerDroppedPtr). */
export function ledgerRemoveWorker(slot: u32): u32 {
  reserveDropped();
  if (!isPresent(slot)) return 0;
  let count: u32 = 0;
  for (let h: u32 = 0; h < requests.high; h++) {
    if (isLive(h) && load<u32>(record(h), 0) == slot) {
      freeRequest(h);
      store<u32>(dropped + (<usize>count << 2), h);
      count++;
    }
  }
  store<u8>(presentCol + slot, 0);
  store<u8>(availableCol + slot, 0);
  store<u32>(totalBlocksCol + (<usize>slot << 2), 0);
  store<u32>(maxBatchedCol + (<usize>slot << 2), 0);
  refreshLeaf(slot);
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

// ---- projection ----

/** Lists a slot as touched the first time the projection writes its TOUCH record; returns the record. */
@inline
function touch(slot: u32): usize {
  const t = touchCol + (<usize>slot << 3);
  if (load<u64>(t) == 0) {
    store<u32>(touched + (<usize>touchedCount << 2), slot);
    touchedCount++;
  }
  return t;
}

/** One more of the request's hashes is held by `slot`. */
@inline
function countHeld(slot: u32): void {
  const t = touch(slot);
  store<u32>(t, load<u32>(t, 4) + 1, 4);
}

/**
 * Projects a new request onto the workers it touches: OVERLAP from the sparse
 * overlap list (the deepest entry per slot; slots outside the table are
 * ignored) and HELD, the prompt hashes each worker holds active, through the
 * reverse index. Costs time in the list and the holders, not the rows.
 */
export function ledgerProject(
  seqPtr: usize,
  seqCount: u32,
  promptTokens: u32,
  blockSize: u32,
  slotsPtr: usize,
  depthsPtr: usize,
  overlapCount: u32,
): void {
  for (let i: u32 = 0; i < touchedCount; i++) store<u64>(touchCol + (<usize>load<u32>(touched + (<usize>i << 2)) << 3), 0);
  touchedCount = 0;
  const n = rows;
  for (let i: u32 = 0; i < overlapCount; i++) {
    const slot = load<u32>(slotsPtr + (<usize>i << 2));
    const depth = load<u32>(depthsPtr + (<usize>i << 2));
    if (slot >= n || depth == 0) continue;
    const t = touch(slot);
    if (depth > load<u32>(t)) store<u32>(t, depth);
  }
  for (let i: u32 = 0; i < seqCount; i++) {
    const s = seqFind(load<u64>(seqPtr + (<usize>i << 3)));
    if (s == 0) continue;
    const count = seqHolderCount(s);
    for (let j: u32 = 0; j < count; j++) countHeld(seqHolderWorker(s, j));
  }
  projectedPromptTokens = promptTokens;
  projectedBlockSize = blockSize;
  projectedSeqCount = seqCount;
}

export function ledgerTouchedPtr(): usize {
  return touched;
}

export function ledgerTouchedCount(): u32 {
  return touchedCount;
}

/**
 * Fills OVERLAP and the potential columns of every row from the last
 * projection and the current load: POTENTIAL_PREFILL = ACTIVE_PREFILL +
 * max(promptTokens - depth x blockSize, 0), POTENTIAL_DECODE = ACTIVE_DECODE +
 * seqCount - held.
 */
export function ledgerProjectColumns(): void {
  const prompt = <f64>projectedPromptTokens;
  const size = <f64>projectedBlockSize;
  for (let w: u32 = 0; w < rows; w++) {
    const at4 = <usize>w << 2;
    const at8 = <usize>w << 3;
    const depth = load<u32>(touchCol + at8);
    store<u32>(overlapCol + at4, depth);
    let uncached = prompt - <f64>depth * size;
    if (uncached < 0) uncached = 0;
    store<f64>(potentialPrefillCol + at8, load<f64>(prefillCol + at8) + uncached);
    store<u32>(potentialDecodeCol + at4, load<u32>(decodeCol + at4) + projectedSeqCount - load<u32>(touchCol + at8, 4));
  }
}

// ---- fast path: cost keys in the tie tree ----

const STATE_PRESENT: u8 = 1;
const STATE_AVAILABLE: u8 = 2;
const STATE_MEMBER: u8 = 4;

let fastPath = false;
let fastScale: f64 = 0;
let fastWeight: f64 = 0;
let fastBlockSize: f64 = 0;
let fastPrefillTokens: f64 = 0;
let fastPrefillFraction: f64 = 0;
let fastDecodeFraction: f64 = 0;
let presentCount: u32 = 0;
let availableCount: u32 = 0;
let memberCount: u32 = 0;

/**
 * Keeps cost keys for prefill load scale `scale`, active request weight
 * `weight` and block size `blockSize`, with members not busy under the given
 * thresholds (+Infinity: off). Rebuilds the tree: O(rows).
 */
export function ledgerEnableFastPath(
  scale: f64,
  weight: f64,
  blockSize: u32,
  prefillTokens: f64,
  prefillFraction: f64,
  decodeFraction: f64,
): void {
  fastScale = scale;
  fastWeight = weight;
  fastBlockSize = <f64>blockSize;
  fastPrefillTokens = prefillTokens;
  fastPrefillFraction = prefillFraction;
  fastDecodeFraction = decodeFraction;
  fastPath = true;
  rebuildTree();
}

function rebuildTree(): void {
  // The tree's leaves cover the row capacity (a power of two, at least 16).
  const cap = grownCapacity(rowCapacity, rowCapacity);
  if (tieTreeLeaves() != cap) tieTreeResize(cap);
  presentCount = 0;
  availableCount = 0;
  memberCount = 0;
  for (let w: u32 = 0; w < rows; w++) {
    const state = standing(w);
    store<u8>(stateCol + w, state);
    countStanding(state, 1);
    tieTreeFill(w, keyOf(w), (state & STATE_MEMBER) != 0);
  }
  tieTreeRebuild();
}

/** The worker's STATE_* bits under the fast path's thresholds. */
@inline
function standing(w: u32): u8 {
  if (load<u8>(presentCol + w) == 0) return 0;
  if (load<u8>(availableCol + w) == 0) return STATE_PRESENT;
  const busy = busyReason(
    load<f64>(prefillCol + (<usize>w << 3)),
    load<u32>(maxBatchedCol + (<usize>w << 2)),
    load<u32>(decodeCol + (<usize>w << 2)),
    load<u32>(totalBlocksCol + (<usize>w << 2)),
    fastPrefillTokens,
    fastPrefillFraction,
    fastDecodeFraction,
  );
  return STATE_PRESENT | STATE_AVAILABLE | (busy == 0 ? STATE_MEMBER : 0);
}

@inline
function countStanding(state: u8, sign: i32): void {
  presentCount += <u32>(sign * <i32>(state & STATE_PRESENT));
  availableCount += <u32>(sign * <i32>((state & STATE_AVAILABLE) >> 1));
  memberCount += <u32>(sign * <i32>((state & STATE_MEMBER) >> 2));
}

@inline
function keyOf(w: u32): f64 {
  return costKey(
    load<f64>(prefillCol + (<usize>w << 3)),
    load<u32>(decodeCol + (<usize>w << 2)),
    load<u32>(requestsCol + (<usize>w << 2)),
    fastBlockSize,
    fastScale,
    fastWeight,
  );
}

/** Brings a worker's leaf and the counts up to date after any change to it. */
@inline
function refreshLeaf(w: u32): void {
  if (fastPath) updateLeaf(w);
}

function updateLeaf(w: u32): void {
  const state = standing(w);
  const before = load<u8>(stateCol + w);
  if (state != before) {
    countStanding(before, -1);
    countStanding(state, 1);
    store<u8>(stateCol + w, state);
  }
  tieTreeSet(w, keyOf(w), (state & STATE_MEMBER) != 0);
}

export function ledgerFastPathOn(): bool {
  return fastPath;
}

/** Whether a decision with these parameters may use the tree's keys and members. */
export function ledgerFastPathMatches(
  scale: f64,
  weight: f64,
  blockSize: u32,
  prefillTokens: f64,
  prefillFraction: f64,
  decodeFraction: f64,
): bool {
  return (
    fastPath &&
    scale == fastScale &&
    weight == fastWeight &&
    <f64>blockSize == fastBlockSize &&
    prefillTokens == fastPrefillTokens &&
    prefillFraction == fastPrefillFraction &&
    decodeFraction == fastDecodeFraction
  );
}

export function ledgerPresentCount(): u32 {
  return presentCount;
}

export function ledgerAvailableCount(): u32 {
  return availableCount;
}

export function ledgerMemberCount(): u32 {
  return memberCount;
}

// ---- input staging ----

let inputSeq: usize = 0;
let inputSeqCapacity: u32 = 0;
let inputSlots: usize = 0;
let inputDepths: usize = 0;
let inputOverlapCapacity: u32 = 0;

export function ledgerReserveInput(seqCount: u32, overlapCount: u32): void {
  if (seqCount > inputSeqCapacity) {
    const cap = grownCapacity(inputSeqCapacity, seqCount);
    inputSeq = regrow(inputSeq, inputSeqCapacity, cap, 8);
    inputSeqCapacity = cap;
  }
  if (overlapCount > inputOverlapCapacity) {
    const cap = grownCapacity(inputOverlapCapacity, overlapCount);
    inputSlots = regrow(inputSlots, inputOverlapCapacity, cap, 4);
    inputDepths = regrow(inputDepths, inputOverlapCapacity, cap, 4);
    inputOverlapCapacity = cap;
  }
}

export function ledgerInputSeqPtr(): usize {
  return inputSeq;
}

export function ledgerInputSlotsPtr(): usize {
  return inputSlots;
}

export function ledgerInputDepthsPtr(): usize {
  return inputDepths;
}
