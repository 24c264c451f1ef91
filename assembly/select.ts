import {
  busyReason,
  clampedCost,
  costConstant,
  costKey,
  prefillClamped,
  unclampedCost,
} from './cost-model';
import { grownCapacity, regrow } from './grow';
import {
  COL_ACTIVE_DECODE,
  COL_ACTIVE_PREFILL,
  COL_ACTIVE_REQUESTS,
  COL_AVAILABLE,
  COL_MAX_BATCHED_TOKENS,
  COL_PRESENT,
  COL_TOTAL_BLOCKS,
  COL_TOUCH,
  ledgerColumn,
  ledgerProjectedBlockSize,
  ledgerProjectedPromptTokens,
  ledgerProjectedSeqCount,
  ledgerRows,
} from './load-table';
import { chance, unit } from './random';

// Worker selection over the load ledger's rows: eligibility, the default cost
// and the picker. Export prefix `select`. It reads the ledger's columns and its
// last projection (load-table.ts) and keeps its own per-slot columns, sized to
// the ledger's rows by `selectReserve()` (addresses move when rows grow):
//   id  column    type  meaning
//   0   ELIGIBLE  u8    1 when the worker may take the request (output of eligibility;
//                       callers may clear entries before cost and pick, e.g. custom filters)
//   1   REASON    u8    why a row is ineligible (REASON_* below; 0 = eligible)
//   2   COST      f64   the default cost, lower is better; +Infinity when not eligible
//   3   ALLOWED   u8    1 for slots in the request's allow-list (built from the list
//                       staged at `selectAllowedPtr()` when a call is given its length)
//   4   TAINT     f64   input: summed weights of the preferred taints each worker matches
//                       (read when asked; 0 means no effect)
// `selectCountsPtr()` points at five u32 counts written by eligibility and by
// every decision: present, available (and present), allowed (and available),
// overloaded (allowed but busy), eligible. `selectLastCost()` is the cost of the
// last pick (+Infinity when none).
// The steps run as `selectEligibility`, `selectCost`, `selectPick` (so a caller
// can filter the ELIGIBLE column in between) or fused as `selectRun`, the full
// scan; `selectDecide` (select-fast.ts) answers most temperature-0 decisions
// without it. Randomness (tie-breaks, softmax draws) comes from random.ts, so a
// seed fixes every decision.

export const REASON_ELIGIBLE: u8 = 0;
export const REASON_ABSENT: u8 = 1;
export const REASON_UNAVAILABLE: u8 = 2;
export const REASON_NOT_ALLOWED: u8 = 3;
// 4..6: REASON_BUSY_* in cost-model.ts

const COL_ELIGIBLE: u32 = 0;
const COL_REASON: u32 = 1;
const COL_COST: u32 = 2;
export const COL_ALLOWED: u32 = 3;
const COL_TAINT: u32 = 4;

let capacity: u32 = 0;
let eligibleCol: usize = 0;
let reasonCol: usize = 0;
let costCol: usize = 0;
let allowedCol: usize = 0;
let taintCol: usize = 0;
// Softmax weights of the last temperature pick (scratch).
let weightCol: usize = 0;
const counts: usize = memory.data(20);
// The staged allow-list: u32 slots, any order, duplicates and slots past the rows allowed.
let allowedList: usize = 0;
let allowedListCapacity: u32 = 0;
// The cost of the last pick (+Infinity when none).
let lastCost: f64 = Infinity;

/** Sizes the selector's columns to the ledger's rows. */
export function selectReserve(): void {
  const rows = ledgerRows();
  if (rows <= capacity) return;
  const cap = grownCapacity(capacity, rows);
  eligibleCol = regrow(eligibleCol, capacity, cap, 1);
  reasonCol = regrow(reasonCol, capacity, cap, 1);
  costCol = regrow(costCol, capacity, cap, 8);
  allowedCol = regrow(allowedCol, capacity, cap, 1);
  taintCol = regrow(taintCol, capacity, cap, 8);
  weightCol = regrow(weightCol, capacity, cap, 8);
  capacity = cap;
}

/** Room for an allow-list of `count` slots at selectAllowedPtr(). */
export function selectReserveAllowed(count: u32): void {
  if (count <= allowedListCapacity) return;
  const cap = grownCapacity(allowedListCapacity, count);
  allowedList = regrow(allowedList, allowedListCapacity, cap, 4);
  allowedListCapacity = cap;
}

export function selectAllowedPtr(): usize {
  return allowedList;
}

/** The ALLOWED column from the first `count` staged slots (slots past the rows are ignored). */
export function buildAllowedMask(count: u32, rows: u32): void {
  memory.fill(allowedCol, 0, <usize>rows);
  for (let i: u32 = 0; i < count; i++) {
    const slot = load<u32>(allowedList + (<usize>i << 2));
    if (slot < rows) store<u8>(allowedCol + slot, 1);
  }
}

export function selectLastCost(): f64 {
  return lastCost;
}

export function setLastCost(cost: f64): void {
  lastCost = cost;
}

export function selectColumn(id: u32): usize {
  switch (id) {
    case COL_ELIGIBLE: return eligibleCol;
    case COL_REASON: return reasonCol;
    case COL_COST: return costCol;
    case COL_ALLOWED: return allowedCol;
    case COL_TAINT: return taintCol;
  }
  return 0;
}

export function selectCountsPtr(): usize {
  return counts;
}

// Ledger column addresses for the current call (they move when rows grow).
let present: usize = 0;
let available: usize = 0;
let prefill: usize = 0;
let maxBatched: usize = 0;
let decode: usize = 0;
let total: usize = 0;
let touch: usize = 0;
let requests: usize = 0;
// The cost's per-request terms, set by beginCost.
let blockSize: f64 = 0;
let promptBlocks: f64 = 0;
let seqCount: u32 = 0;
let constant: f64 = 0;

function bindLedger(): u32 {
  selectReserve();
  present = ledgerColumn(COL_PRESENT);
  available = ledgerColumn(COL_AVAILABLE);
  prefill = ledgerColumn(COL_ACTIVE_PREFILL);
  maxBatched = ledgerColumn(COL_MAX_BATCHED_TOKENS);
  decode = ledgerColumn(COL_ACTIVE_DECODE);
  total = ledgerColumn(COL_TOTAL_BLOCKS);
  touch = ledgerColumn(COL_TOUCH);
  requests = ledgerColumn(COL_ACTIVE_REQUESTS);
  return ledgerRows();
}

function beginCost(prefillLoadScale: f64): void {
  blockSize = <f64>ledgerProjectedBlockSize();
  promptBlocks = Math.ceil(<f64>ledgerProjectedPromptTokens() / blockSize);
  seqCount = ledgerProjectedSeqCount();
  constant = costConstant(promptBlocks, seqCount, prefillLoadScale);
}

/** Why row w may not take the request, or REASON_ELIGIBLE (busy: see cost-model.ts). */
@inline
function rowReason(w: u32, useAllowed: bool, prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u8 {
  if (load<u8>(present + w) == 0) return REASON_ABSENT;
  if (load<u8>(available + w) == 0) return REASON_UNAVAILABLE;
  if (useAllowed && load<u8>(allowedCol + w) == 0) return REASON_NOT_ALLOWED;
  return busyReason(
    load<f64>(prefill + (<usize>w << 3)),
    load<u32>(maxBatched + (<usize>w << 2)),
    load<u32>(decode + (<usize>w << 2)),
    load<u32>(total + (<usize>w << 2)),
    prefillTokens,
    prefillFraction,
    decodeFraction,
  );
}

/** Records row w's reason in the REASON and ELIGIBLE columns. */
@inline
function markRow(w: u32, reason: u8): void {
  store<u8>(reasonCol + w, reason);
  store<u8>(eligibleCol + w, reason == REASON_ELIGIBLE ? 1 : 0);
}

/**
 * The counts at selectCountsPtr, from the REASON column; returns the eligible
 * count. A pass of its own: counting in memory inside the row loop would chain
 * every row on the previous row's store.
 */
function writeCounts(rows: u32): u32 {
  let absent: u32 = 0;
  let unavailable: u32 = 0;
  let notAllowed: u32 = 0;
  let eligible: u32 = 0;
  for (let w: u32 = 0; w < rows; w++) {
    const reason = load<u8>(reasonCol + w);
    absent += <u32>(reason == REASON_ABSENT);
    unavailable += <u32>(reason == REASON_UNAVAILABLE);
    notAllowed += <u32>(reason == REASON_NOT_ALLOWED);
    eligible += <u32>(reason == REASON_ELIGIBLE);
  }
  const nPresent = rows - absent;
  const nAvailable = nPresent - unavailable;
  storeCounts(nPresent, nAvailable, nAvailable - notAllowed, eligible);
  return eligible;
}

/** Writes the counts at selectCountsPtr (overloaded = allowed - eligible). */
export function storeCounts(present: u32, available: u32, allowed: u32, eligible: u32): void {
  store<u32>(counts, present, 0);
  store<u32>(counts, available, 4);
  store<u32>(counts, allowed, 8);
  store<u32>(counts, allowed - eligible, 12);
  store<u32>(counts, eligible, 16);
}

/**
 * The default cost of row w from the ledger's last projection (cost-model.ts),
 * times exp(-tanh(TAINT)) when useTaint and the row's TAINT is not 0.
 */
@inline
function rowCost(w: u32, overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64, useTaint: bool): f64 {
  const at4 = <usize>w << 2;
  const at8 = <usize>w << 3;
  const tokens = load<f64>(prefill + at8);
  const decodeBlocks = load<u32>(decode + at4);
  const active = load<u32>(requests + at4);
  const credited = overlapCredit * <f64>load<u32>(touch + at8);
  const held = load<u32>(touch + at8, 4);
  let cost = prefillClamped(tokens, blockSize, promptBlocks, credited)
    ? clampedCost(decodeBlocks, seqCount, held, active, activeRequestWeight)
    : unclampedCost(costKey(tokens, decodeBlocks, active, blockSize, prefillLoadScale, activeRequestWeight), constant, credited, held, prefillLoadScale);
  if (useTaint) {
    const weight = load<f64>(taintCol + at8);
    if (weight != 0) cost *= Math.exp(-Math.tanh(weight));
  }
  return cost;
}

/**
 * One pass over all rows into ELIGIBLE, REASON and the counts; returns the
 * eligible count. allowedCount < 0: no allow-list; else the first allowedCount
 * staged slots.
 */
export function selectEligibility(allowedCount: i32, prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u32 {
  const n = bindLedger();
  const useAllowed = allowedCount >= 0;
  if (useAllowed) buildAllowedMask(<u32>allowedCount, n);
  for (let w: u32 = 0; w < n; w++) markRow(w, rowReason(w, useAllowed, prefillTokens, prefillFraction, decodeFraction));
  return writeCounts(n);
}

/**
 * COST for every row marked ELIGIBLE (+Infinity for the rest). The projection
 * must use a block size > 0.
 */
export function selectCost(overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64, useTaint: bool): void {
  const n = bindLedger();
  beginCost(prefillLoadScale);
  for (let w: u32 = 0; w < n; w++) {
    const cost = load<u8>(eligibleCol + w) != 0 ? rowCost(w, overlapCredit, prefillLoadScale, activeRequestWeight, useTaint) : Infinity;
    store<f64>(costCol + (<usize>w << 3), cost);
  }
}

/**
 * Eligibility, cost and pick fused into one pass over the rows (two more for
 * a temperature > 0): the same columns, counts, random draws and result as
 * selectEligibility, selectCost and selectPick called in turn.
 */
export function selectRun(
  allowedCount: i32,
  prefillTokens: f64,
  prefillFraction: f64,
  decodeFraction: f64,
  overlapCredit: f64,
  prefillLoadScale: f64,
  activeRequestWeight: f64,
  useTaint: bool,
  temperature: f64,
): i32 {
  const n = bindLedger();
  beginCost(prefillLoadScale);
  const useAllowed = allowedCount >= 0;
  if (useAllowed) buildAllowedMask(<u32>allowedCount, n);
  const greedy = !(temperature > 0);
  const cheapest = changetype<Cheapest>(cheapestState);
  cheapest.reset();
  for (let w: u32 = 0; w < n; w++) {
    const reason = rowReason(w, useAllowed, prefillTokens, prefillFraction, decodeFraction);
    markRow(w, reason);
    let cost = Infinity;
    if (reason == REASON_ELIGIBLE) {
      cost = rowCost(w, overlapCredit, prefillLoadScale, activeRequestWeight, useTaint);
      if (greedy) cheapest.offer(w, cost);
    }
    store<f64>(costCol + (<usize>w << 3), cost);
  }
  writeCounts(n);
  return recordPick(greedy ? cheapest.best : pickSoftmax(temperature));
}

/**
 * Picks an eligible row by COST; returns its slot, or -1 when none is eligible.
 * Temperature 0: the cheapest, ties uniformly at random (single-pass reservoir:
 * the k-th tie replaces the pick with probability 1/k). Temperature T > 0:
 * p_i proportional to exp(-(c_i - cmin) / ((cmax - cmin) T)), uniform when all
 * costs are equal, sampled against one uniform draw (the last eligible row is the
 * fallback for rounding).
 */
export function selectPick(temperature: f64): i32 {
  selectReserve();
  return recordPick(temperature > 0 ? pickSoftmax(temperature) : pickCheapest());
}

@inline
function recordPick(slot: i32): i32 {
  lastCost = slot < 0 ? Infinity : load<f64>(costCol + (<usize>slot << 3));
  return slot;
}

// The temperature-0 pick as a running state, so the fused pass and the pick
// pass make the same choice with the same random draws.
@unmanaged
class Cheapest {
  best: i32;
  cost: f64;
  ties: u32;

  @inline
  reset(): void {
    this.best = -1;
    this.cost = Infinity;
    this.ties = 0;
  }

  /** Reservoir over equal costs: the k-th tie replaces the pick with probability 1/k. */
  @inline
  offer(w: u32, cost: f64): void {
    if (this.best < 0 || cost < this.cost) {
      this.best = <i32>w;
      this.cost = cost;
      this.ties = 1;
    } else if (cost == this.cost) {
      this.ties++;
      if (chance(this.ties)) this.best = <i32>w;
    }
  }
}

const cheapestState: usize = memory.data(offsetof<Cheapest>());

function pickCheapest(): i32 {
  const n = ledgerRows();
  const state = changetype<Cheapest>(cheapestState);
  state.reset();
  for (let w: u32 = 0; w < n; w++) {
    if (load<u8>(eligibleCol + w) != 0) state.offer(w, load<f64>(costCol + (<usize>w << 3)));
  }
  return state.best;
}

function pickSoftmax(temperature: f64): i32 {
  const n = ledgerRows();
  let low: f64 = Infinity;
  let high: f64 = -Infinity;
  let any = false;
  for (let w: u32 = 0; w < n; w++) {
    if (load<u8>(eligibleCol + w) == 0) continue;
    const cost = load<f64>(costCol + (<usize>w << 3));
    if (cost < low) low = cost;
    if (cost > high) high = cost;
    any = true;
  }
  if (!any) return -1;
  // Normalise before dividing by T, so a tiny T sharpens towards the argmin
  // instead of underflowing the denominator.
  const range = high - low;
  let total: f64 = 0;
  for (let w: u32 = 0; w < n; w++) {
    if (load<u8>(eligibleCol + w) == 0) continue;
    const weight = range > 0 ? Math.exp(-((load<f64>(costCol + (<usize>w << 3)) - low) / range / temperature)) : 1.0;
    store<f64>(weightCol + (<usize>w << 3), weight);
    total += weight;
  }
  const target = unit() * total;
  let acc: f64 = 0;
  let last: i32 = -1;
  for (let w: u32 = 0; w < n; w++) {
    if (load<u8>(eligibleCol + w) == 0) continue;
    acc += load<f64>(weightCol + (<usize>w << 3));
    last = <i32>w;
    if (target < acc) return last;
  }
  return last;
}
