import { seqActiveCount, seqFind, seqHolderCount, seqHolderWorker } from '../active-seqs';
import { regrow } from '../grow';
import { decodeOf, prefillOf, rowCount } from './rows';

// The projection of one new request onto the workers it touches. Columns, by
// slot (ids continue ledger/rows.ts's):
//   id  column              type     meaning
//   7   OVERLAP             u32      cached prefix depth in blocks
//   8   POTENTIAL_PREFILL   f64      ACTIVE_PREFILL + the request's uncached tokens there
//   9   POTENTIAL_DECODE    u32      ACTIVE_DECODE + prompt hashes it does not hold active
//  10   TOUCH               u64      bits 0-23 the cached prefix depth, 24-47 the prompt hashes it
//                                    holds active, 48-63 the stamp of the projection that wrote
//                                    them (one 8-byte record per slot, so a touched worker costs
//                                    one cache line)
// The projection is sparse: `ledgerProject` writes TOUCH only for the workers
// the request touches (a nonzero depth or held count) and lists them at
// `ledgerTouchedPtr()`; a record whose stamp is not the current projection's
// reads as depth 0, held 0, so starting a projection forgets the last one
// without visiting its workers (every 65,535 projections the stamps wrap and
// the column is cleared once). Depths and held counts saturate at 2^24 - 1
// blocks. OVERLAP and the two potential columns are filled for every row by
// `ledgerProjectColumns()`, on demand.

export const COL_OVERLAP: u32 = 7;
export const COL_POTENTIAL_PREFILL: u32 = 8;
export const COL_POTENTIAL_DECODE: u32 = 9;
export const COL_TOUCH: u32 = 10;

let capacity: u32 = 0;
let overlapCol: usize = 0;
let potentialPrefillCol: usize = 0;
let potentialDecodeCol: usize = 0;
let touchCol: usize = 0;
// Per slot, the credited blocks of its match, read only while `credits` is set.
let creditCol: usize = 0;
// The current projection's credits (f64 per match), 0 when a match is credited its depth.
let credits: usize = 0;
// Slots the last projection touched, each once.
let touched: usize = 0;
let touchedCount: u32 = 0;
// The current projection's stamp, in 1..STAMP_LIMIT - 1 (0 is never current).
let stamp: u64 = 1;

const FIELD: u64 = 0xffffff;
const HELD_SHIFT: u64 = 24;
const STAMP_SHIFT: u64 = 48;
const STAMP_LIMIT: u64 = 0x10000;

// The request the columns were last projected for (the cost reads them).
let projectedPromptTokens: u32 = 0;
let projectedBlockSize: u32 = 0;
let projectedSeqCount: u32 = 0;

/** Columns for `cap` rows (the rows' capacity). */
export function projectionReserve(cap: u32): void {
  if (cap <= capacity) return;
  overlapCol = regrow(overlapCol, capacity, cap, 4);
  potentialPrefillCol = regrow(potentialPrefillCol, capacity, cap, 8);
  potentialDecodeCol = regrow(potentialDecodeCol, capacity, cap, 4);
  touchCol = regrow(touchCol, capacity, cap, 8);
  creditCol = regrow(creditCol, capacity, cap, 8);
  touched = regrow(touched, capacity, cap, 4);
  capacity = cap;
}

export function projectionColumn(id: u32): usize {
  switch (id) {
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

export function ledgerTouchedPtr(): usize {
  return touched;
}

export function ledgerTouchedCount(): u32 {
  return touchedCount;
}

@inline
export function touchedAt(i: u32): u32 {
  return load<u32>(touched + (<usize>i << 2));
}

/** Whether a TOUCH record was written by the current projection. */
@inline
export function isCurrent(record: u64): bool {
  return record >> STAMP_SHIFT == stamp;
}

/** The cached prefix depth a current record holds. */
@inline
export function recordDepth(record: u64): u32 {
  return <u32>(record & FIELD);
}

/** The held count a current record holds. */
@inline
export function recordHeld(record: u64): u32 {
  return <u32>((record >> HELD_SHIFT) & FIELD);
}

/** A fresh record of the current projection with this depth (held 0). */
@inline
export function freshRecord(depth: u32): u64 {
  return (stamp << STAMP_SHIFT) | min<u64>(<u64>depth, FIELD);
}

/** The record with its depth replaced. */
@inline
export function withDepth(record: u64, depth: u32): u64 {
  return (record & ~FIELD) | min<u64>(<u64>depth, FIELD);
}

@inline
export function recordOf(w: u32): u64 {
  return load<u64>(touchCol + (<usize>w << 3));
}

/** The request's cached prefix depth on w (0 when untouched). */
@inline
export function depthOf(w: u32): u32 {
  const record = recordOf(w);
  return isCurrent(record) ? recordDepth(record) : 0;
}

/** The request's hashes w holds active. */
@inline
export function heldOf(w: u32): u32 {
  const record = recordOf(w);
  return isCurrent(record) ? recordHeld(record) : 0;
}

/** The blocks worker w's cached prefix is credited: its depth, or its match's credit when the projection had credits. */
@inline
export function overlapOf(w: u32): f64 {
  const record = recordOf(w);
  if (!isCurrent(record)) return 0;
  const depth = recordDepth(record);
  return credits == 0 || depth == 0 ? <f64>depth : load<f64>(creditCol + (<usize>w << 3));
}

/** The credit of match i (at the current projection's credits), or its depth without them. */
@inline
export function creditAt(i: u32, depth: u32): f64 {
  return credits == 0 ? <f64>depth : load<f64>(credits + (<usize>i << 3));
}

/** Records slot's credit for the current projection (read only when it has credits). */
@inline
export function setCredit(slot: u32, credit: f64): void {
  if (credits != 0) store<f64>(creditCol + (<usize>slot << 3), credit);
}

/** Sets the credits of the projection about to start (0: none). */
export function projectionCredits(ptr: usize): void {
  credits = ptr;
}

@inline
export function isTouched(w: u32): bool {
  return isCurrent(recordOf(w));
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
  creditsPtr: usize,
): void {
  projectionCredits(creditsPtr);
  projectionStart(promptTokens, blockSize, seqCount);
  projectHeld(seqPtr, seqCount);
  projectOverlaps(slotsPtr, depthsPtr, overlapCount, 0);
}

/**
 * OVERLAP of the projection started: `count` matches at slotsPtr with their
 * depths at depthsPtr, or all at depth `fixed` when it is nonzero (a run of
 * an index answer, assembly/match-runs.ts); the deepest entry per slot.
 */
export function projectOverlaps(slotsPtr: usize, depthsPtr: usize, count: u32, fixed: u32): void {
  // Locals, not the module's globals, inside the loop: the stores of one
  // iteration do not then make the next reload them.
  const records = touchCol;
  const list = touched;
  let listed = touchedCount;
  const n = rowCount();
  for (let i: u32 = 0; i < count; i++) {
    const slot = load<u32>(slotsPtr + (<usize>i << 2));
    const depth = fixed != 0 ? fixed : load<u32>(depthsPtr + (<usize>i << 2));
    if (slot >= n || depth == 0) continue;
    const t = records + (<usize>slot << 3);
    const record = load<u64>(t);
    if (!isCurrent(record)) {
      store<u32>(list + (<usize>listed << 2), slot);
      listed++;
      store<u64>(t, freshRecord(depth));
      setCredit(slot, creditAt(i, depth));
    } else if (depth > recordDepth(record)) {
      store<u64>(t, withDepth(record, depth));
      setCredit(slot, creditAt(i, depth));
    }
  }
  touchedCount = listed;
}

/** Starts a projection for this request: the last one's TOUCH records and list are forgotten. */
export function projectionStart(promptTokens: u32, blockSize: u32, seqCount: u32): void {
  stamp++;
  if (stamp == STAMP_LIMIT) {
    memory.fill(touchCol, 0, <usize>capacity << 3);
    stamp = 1;
  }
  touchedCount = 0;
  projectedPromptTokens = promptTokens;
  projectedBlockSize = blockSize;
  projectedSeqCount = seqCount;
}

/** HELD: the prompt hashes each worker holds active, through the reverse index; lists the workers. */
export function projectHeld(seqPtr: usize, seqCount: u32): void {
  // Nothing active: no lookups (the table may still hold cold hashes).
  if (seqActiveCount() == 0) return;
  const records = touchCol;
  const list = touched;
  let listed = touchedCount;
  for (let i: u32 = 0; i < seqCount; i++) {
    const s = seqFind(load<u64>(seqPtr + (<usize>i << 3)));
    if (s == 0) continue;
    const count = seqHolderCount(s);
    for (let j: u32 = 0; j < count; j++) {
      const slot = seqHolderWorker(s, j);
      const t = records + (<usize>slot << 3);
      let record = load<u64>(t);
      if (!isCurrent(record)) {
        store<u32>(list + (<usize>listed << 2), slot);
        listed++;
        record = freshRecord(0);
      }
      if (recordHeld(record) < <u32>FIELD) record += <u64>1 << HELD_SHIFT;
      store<u64>(t, record);
    }
  }
  touchedCount = listed;
}

/**
 * For a caller that writes TOUCH records and the touched list itself (the
 * fused decision's one-pass projection, select-fast.ts): the new length of
 * the list.
 */
export function adoptTouched(count: u32): void {
  touchedCount = count;
}

/**
 * Fills OVERLAP and the potential columns of every row from the last
 * projection and the current load: POTENTIAL_PREFILL = ACTIVE_PREFILL +
 * max(promptTokens - overlapOf(w) x blockSize, 0), POTENTIAL_DECODE = ACTIVE_DECODE +
 * seqCount - held.
 */
export function ledgerProjectColumns(): void {
  const prompt = <f64>projectedPromptTokens;
  const size = <f64>projectedBlockSize;
  const n = rowCount();
  for (let w: u32 = 0; w < n; w++) {
    store<u32>(overlapCol + (<usize>w << 2), depthOf(w));
    let uncached = prompt - overlapOf(w) * size;
    if (uncached < 0) uncached = 0;
    store<f64>(potentialPrefillCol + (<usize>w << 3), prefillOf(w) + uncached);
    store<u32>(potentialDecodeCol + (<usize>w << 2), decodeOf(w) + projectedSeqCount - heldOf(w));
  }
}
