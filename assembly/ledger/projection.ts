import { seqFind, seqHolderCount, seqHolderWorker } from '../active-seqs';
import { regrow } from '../grow';
import { decodeOf, prefillOf, rowCount } from './rows';

// The projection of one new request onto the workers it touches. Columns, by
// slot (ids continue ledger/rows.ts's):
//   id  column              type     meaning
//   7   OVERLAP             u32      cached prefix depth in blocks
//   8   POTENTIAL_PREFILL   f64      ACTIVE_PREFILL + the request's uncached tokens there
//   9   POTENTIAL_DECODE    u32      ACTIVE_DECODE + prompt hashes it does not hold active
//  10   TOUCH               2 x u32  +0 the cached prefix depth, +4 the prompt hashes it holds
//                                    active (one 8-byte record per slot, so a touched worker
//                                    costs one cache line)
// The projection is sparse: `ledgerProject` writes TOUCH only for the workers
// the request touches (a nonzero depth or held count; every other row reads 0)
// and lists them at `ledgerTouchedPtr()`; OVERLAP and the two potential
// columns are filled for every row by `ledgerProjectColumns()`, on demand.

export const COL_OVERLAP: u32 = 7;
export const COL_POTENTIAL_PREFILL: u32 = 8;
export const COL_POTENTIAL_DECODE: u32 = 9;
export const COL_TOUCH: u32 = 10;

let capacity: u32 = 0;
let overlapCol: usize = 0;
let potentialPrefillCol: usize = 0;
let potentialDecodeCol: usize = 0;
let touchCol: usize = 0;
// Slots the last projection touched, each once.
let touched: usize = 0;
let touchedCount: u32 = 0;

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

/** The request's cached prefix depth on w (0 when untouched). */
@inline
export function depthOf(w: u32): u32 {
  return load<u32>(touchCol + (<usize>w << 3));
}

/** The request's hashes w holds active. */
@inline
export function heldOf(w: u32): u32 {
  return load<u32>(touchCol + (<usize>w << 3), 4);
}

@inline
export function isTouched(w: u32): bool {
  return load<u64>(touchCol + (<usize>w << 3)) != 0;
}

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
  for (let i: u32 = 0; i < touchedCount; i++) store<u64>(touchCol + (<usize>touchedAt(i) << 3), 0);
  touchedCount = 0;
  const n = rowCount();
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
    for (let j: u32 = 0; j < count; j++) {
      const t = touch(seqHolderWorker(s, j));
      store<u32>(t, load<u32>(t, 4) + 1, 4);
    }
  }
  projectedPromptTokens = promptTokens;
  projectedBlockSize = blockSize;
  projectedSeqCount = seqCount;
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
  const n = rowCount();
  for (let w: u32 = 0; w < n; w++) {
    const depth = depthOf(w);
    store<u32>(overlapCol + (<usize>w << 2), depth);
    let uncached = prompt - <f64>depth * size;
    if (uncached < 0) uncached = 0;
    store<f64>(potentialPrefillCol + (<usize>w << 3), prefillOf(w) + uncached);
    store<u32>(potentialDecodeCol + (<usize>w << 2), decodeOf(w) + projectedSeqCount - heldOf(w));
  }
}
