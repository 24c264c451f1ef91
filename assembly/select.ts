import {
  MULT_NONE,
  allowedColumn,
  buildAllowedMask,
  constraintsBegin,
  constraintsEnd,
  constraintsReserve,
  rowAllowed,
  rowMultiplier,
  setMultiplierSource,
  taintColumn,
} from './constraints';
import { busyReason } from './cost/busy';
import { COST_KV, costBegin, costKey, costTouched } from './cost/kind';
import { grownCapacity, regrow } from './grow';
import { heldOf, overlapOf, ledgerProjectedBlockSize, ledgerProjectedPromptTokens, ledgerProjectedSeqCount } from './ledger/projection';
import { decodeOf, isAvailable, isPresent, maxBatchedOf, prefillOf, rowCount, totalBlocksOf } from './ledger/rows';
import { below, unit } from './random';

// Worker selection by the full scan over the ledger's rows: eligibility, the
// cost and the picker, for the step API (exports prefixed `select`) and as the
// fallback of the fast path and the fused decision. It reads the ledger's rows
// and its last projection and keeps its own per-slot columns, sized to the
// ledger's rows by `selectReserve()` (addresses move when rows grow):
//   id  column    type  meaning
//   0   ELIGIBLE  u8    1 when the worker may take the request (output of eligibility;
//                       callers may clear entries before cost and pick, e.g. custom filters)
//   1   REASON    u8    why a row is ineligible (REASON_* below; 0 = eligible)
//   2   COST      f64   the cost, lower is better; +Infinity when not eligible
//   3   ALLOWED   u8    the allow-list as a mask (constraints.ts)
//   4   TAINT     f64   input: summed preferred-taint weights per worker (constraints.ts)
// `selectCountsPtr()` points at five u32 counts written by eligibility and by
// every decision: present, available (and present), allowed (and available),
// overloaded (allowed but busy), eligible. `selectLastCost()` is the cost of the
// last pick (+Infinity when none).
// The steps run as `selectEligibility`, `selectCost`, `selectPick` (so a caller
// can filter the ELIGIBLE column in between) or fused as `selectDecide`
// (select-fast.ts), which answers most temperature-0 decisions without the
// scan, with the same result.
//
// The pick at temperature 0: the eligible workers at the minimum cost, in slot
// order, and the r-th of them for r = below(count) (random.ts): one draw when
// workers tie, none otherwise. The fast path finds the same r-th worker from
// its trees, so both paths (and the twin) pick the same worker from the same
// draw. Temperature T > 0: a softmax over normalised costs (pickSoftmax).

export const REASON_ELIGIBLE: u8 = 0;
export const REASON_ABSENT: u8 = 1;
export const REASON_UNAVAILABLE: u8 = 2;
export const REASON_NOT_ALLOWED: u8 = 3;
// 4..6: REASON_BUSY_* in cost/busy.ts

const COL_ELIGIBLE: u32 = 0;
const COL_REASON: u32 = 1;
const COL_COST: u32 = 2;
const COL_ALLOWED: u32 = 3;
const COL_TAINT: u32 = 4;

let capacity: u32 = 0;
let eligibleCol: usize = 0;
let reasonCol: usize = 0;
let costCol: usize = 0;
// Softmax weights of the last temperature pick, and the tied slots of the last
// temperature-0 pick (scratch).
let weightCol: usize = 0;
let ties: usize = 0;
const counts: usize = memory.data(20);
// The cost of the last pick (+Infinity when none).
let lastCost: f64 = Infinity;

/** Sizes the selector's columns to the ledger's rows. */
export function selectReserve(): void {
  const rows = rowCount();
  constraintsReserve(rows);
  if (rows <= capacity) return;
  const cap = grownCapacity(capacity, rows);
  eligibleCol = regrow(eligibleCol, capacity, cap, 1);
  reasonCol = regrow(reasonCol, capacity, cap, 1);
  costCol = regrow(costCol, capacity, cap, 8);
  weightCol = regrow(weightCol, capacity, cap, 8);
  ties = regrow(ties, capacity, cap, 4);
  capacity = cap;
}

export function selectLastCost(): f64 {
  return lastCost;
}

export function setLastCost(cost: f64): void {
  lastCost = cost;
}

export function selectColumn(id: u32): usize {
  selectReserve();
  switch (id) {
    case COL_ELIGIBLE: return eligibleCol;
    case COL_REASON: return reasonCol;
    case COL_COST: return costCol;
    case COL_ALLOWED: return allowedColumn();
    case COL_TAINT: return taintColumn();
  }
  return 0;
}

export function selectCountsPtr(): usize {
  return counts;
}

/** Writes the counts at selectCountsPtr (overloaded = allowed - eligible). */
export function storeCounts(present: u32, available: u32, allowed: u32, eligible: u32): void {
  store<u32>(counts, present, 0);
  store<u32>(counts, available, 4);
  store<u32>(counts, allowed, 8);
  store<u32>(counts, allowed - eligible, 12);
  store<u32>(counts, eligible, 16);
}

/** Why row w may not take the request under the constraints begun, or REASON_ELIGIBLE. */
@inline
function rowReason(w: u32, prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u8 {
  if (!isPresent(w)) return REASON_ABSENT;
  if (!isAvailable(w)) return REASON_UNAVAILABLE;
  if (!rowAllowed(w)) return REASON_NOT_ALLOWED;
  return busyReason(prefillOf(w), maxBatchedOf(w), decodeOf(w), totalBlocksOf(w), prefillTokens, prefillFraction, decodeFraction);
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

/** The cost of row w under the cost begun, times its multiplier. */
@inline
function rowCost(w: u32): f64 {
  return costTouched(w, costKey(w), overlapOf(w), heldOf(w)) * rowMultiplier(w);
}

// ---- the scan, on the constraints and cost begun ----

/** One pass over all rows into ELIGIBLE, REASON and the counts; returns the eligible count. */
export function scanEligibility(prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u32 {
  selectReserve();
  const n = rowCount();
  buildAllowedMask();
  for (let w: u32 = 0; w < n; w++) markRow(w, rowReason(w, prefillTokens, prefillFraction, decodeFraction));
  return writeCounts(n);
}

/** COST for every row marked ELIGIBLE (+Infinity for the rest). */
export function scanCost(): void {
  selectReserve();
  const n = rowCount();
  for (let w: u32 = 0; w < n; w++) {
    store<f64>(costCol + (<usize>w << 3), load<u8>(eligibleCol + w) != 0 ? rowCost(w) : Infinity);
  }
}

/** Eligibility, cost and pick in one pass over the rows (two more for a temperature > 0). */
export function scanDecide(prefillTokens: f64, prefillFraction: f64, decodeFraction: f64, temperature: f64): i32 {
  selectReserve();
  const n = rowCount();
  buildAllowedMask();
  const greedy = !(temperature > 0);
  resetCheapest();
  for (let w: u32 = 0; w < n; w++) {
    const reason = rowReason(w, prefillTokens, prefillFraction, decodeFraction);
    markRow(w, reason);
    let cost = Infinity;
    if (reason == REASON_ELIGIBLE) {
      cost = rowCost(w);
      if (greedy) offerCheapest(w, cost);
    }
    store<f64>(costCol + (<usize>w << 3), cost);
  }
  writeCounts(n);
  return recordPick(greedy ? drawCheapest() : pickSoftmax(temperature));
}

// The temperature-0 pick's running state: the cheapest cost so far and the
// slots at it, in slot order.
let cheapestCost: f64 = Infinity;
let cheapestCount: u32 = 0;

@inline
function resetCheapest(): void {
  cheapestCost = Infinity;
  cheapestCount = 0;
}

@inline
function offerCheapest(w: u32, cost: f64): void {
  if (cost < cheapestCost) {
    cheapestCost = cost;
    cheapestCount = 0;
  }
  if (cost == cheapestCost) {
    store<u32>(ties + (<usize>cheapestCount << 2), w);
    cheapestCount++;
  }
}

/** The r-th of the cheapest slots for r = below(count); -1 when none. */
function drawCheapest(): i32 {
  return cheapestCount == 0 ? -1 : <i32>load<u32>(ties + (<usize>below(cheapestCount) << 2));
}

/** Picks an eligible row by COST (see the pick rule above); -1 when none is eligible. */
export function scanPick(temperature: f64): i32 {
  selectReserve();
  return recordPick(temperature > 0 ? pickSoftmax(temperature) : pickCheapest());
}

@inline
function recordPick(slot: i32): i32 {
  lastCost = slot < 0 ? Infinity : load<f64>(costCol + (<usize>slot << 3));
  return slot;
}

function pickCheapest(): i32 {
  const n = rowCount();
  resetCheapest();
  for (let w: u32 = 0; w < n; w++) {
    if (load<u8>(eligibleCol + w) != 0) offerCheapest(w, load<f64>(costCol + (<usize>w << 3)));
  }
  return drawCheapest();
}

/**
 * Temperature T > 0: p_i proportional to exp(-(c_i - cmin) / ((cmax - cmin) T)),
 * uniform when all costs are equal, sampled against one uniform draw (the last
 * eligible row is the fallback for rounding).
 */
function pickSoftmax(temperature: f64): i32 {
  const n = rowCount();
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

// ---- the step API: an allow-list only, the kv cost, the TAINT column ----

/** Cost of the step API (the kv cost) on the last projection. */
export function beginStepCost(overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64): void {
  costBegin(COST_KV, prefillLoadScale, activeRequestWeight, 0, overlapCredit, ledgerProjectedBlockSize(), ledgerProjectedPromptTokens(), ledgerProjectedSeqCount());
}

/**
 * One pass over all rows into ELIGIBLE, REASON and the counts; returns the
 * eligible count. allowedCount < 0: no allow-list; else the first
 * allowedCount staged slots.
 */
export function selectEligibility(allowedCount: i32, prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u32 {
  constraintsBegin(allowedCount, 0, -1, MULT_NONE);
  const eligible = scanEligibility(prefillTokens, prefillFraction, decodeFraction);
  constraintsEnd();
  return eligible;
}

/**
 * COST for every row marked ELIGIBLE (+Infinity for the rest), with the
 * multipliers of `multipliers` (MULT_* in constraints.ts: none, the TAINT
 * column, or the group table of the last decision). The projection must use a
 * block size > 0.
 */
export function selectCost(overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64, multipliers: u32): void {
  selectCostKind(COST_KV, overlapCredit, prefillLoadScale, activeRequestWeight, 0, multipliers);
}

/** selectCost under any cost kind (cost/kind.ts), with that kind's three weights. */
export function selectCostKind(kind: u32, overlapCredit: f64, first: f64, second: f64, third: f64, multipliers: u32): void {
  costBegin(kind, first, second, third, overlapCredit, ledgerProjectedBlockSize(), ledgerProjectedPromptTokens(), ledgerProjectedSeqCount());
  setMultiplierSource(multipliers);
  scanCost();
}

export function selectPick(temperature: f64): i32 {
  return scanPick(temperature);
}
