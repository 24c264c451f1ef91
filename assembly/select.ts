import { grownCapacity, regrow } from './grow';
import {
  COL_ACTIVE_DECODE,
  COL_ACTIVE_PREFILL,
  COL_ACTIVE_REQUESTS,
  COL_AVAILABLE,
  COL_MAX_BATCHED_TOKENS,
  COL_OVERLAP,
  COL_POTENTIAL_DECODE,
  COL_PRESENT,
  COL_TOTAL_BLOCKS,
  ledgerColumn,
  ledgerProjectedBlockSize,
  ledgerProjectedPromptTokens,
  ledgerRows,
} from './load-table';

// Worker selection over the load ledger's rows: eligibility, the default cost
// and the picker. Export prefix `select`. It reads the ledger's columns and its
// last projection (load-table.ts) and keeps its own per-slot columns, sized to
// the ledger's rows by `selectReserve()` (addresses move when rows grow):
//   id  column    type  meaning
//   0   ELIGIBLE  u8    1 when the worker may take the request (output of eligibility;
//                       callers may clear entries before cost and pick, e.g. custom filters)
//   1   REASON    u8    why a row is ineligible (REASON_* below; 0 = eligible)
//   2   COST      f64   the default cost, lower is better; +Infinity when not eligible
//   3   ALLOWED   u8    input: 1 for slots in the request's allow-list (read when asked)
//   4   TAINT     f64   input: summed weights of the preferred taints each worker matches
//                       (read when asked; 0 means no effect)
// `selectCountsPtr()` points at five u32 counts written by eligibility:
//   present, available (and present), allowed (and available), overloaded (allowed
//   but busy), eligible.
// The steps run as `selectEligibility`, `selectCost`, `selectPick` (so a caller
// can filter the ELIGIBLE column in between) or fused as `selectRun`.
// Randomness (tie-breaks, softmax draws) comes from xoshiro128** seeded by
// `selectSeed`, so a seed fixes every decision.

export const REASON_ELIGIBLE: u8 = 0;
export const REASON_ABSENT: u8 = 1;
export const REASON_UNAVAILABLE: u8 = 2;
export const REASON_NOT_ALLOWED: u8 = 3;
export const REASON_BUSY_PREFILL_TOKENS: u8 = 4;
export const REASON_BUSY_PREFILL_FRACTION: u8 = 5;
export const REASON_BUSY_DECODE_FRACTION: u8 = 6;

const COL_ELIGIBLE: u32 = 0;
const COL_REASON: u32 = 1;
const COL_COST: u32 = 2;
const COL_ALLOWED: u32 = 3;
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
let overlap: usize = 0;
let potentialDecode: usize = 0;
let requests: usize = 0;
// The cost's per-request terms, set by beginCost.
let blockSize: f64 = 0;
let promptBlocks: f64 = 0;

function bindLedger(): u32 {
  selectReserve();
  present = ledgerColumn(COL_PRESENT);
  available = ledgerColumn(COL_AVAILABLE);
  prefill = ledgerColumn(COL_ACTIVE_PREFILL);
  maxBatched = ledgerColumn(COL_MAX_BATCHED_TOKENS);
  decode = ledgerColumn(COL_ACTIVE_DECODE);
  total = ledgerColumn(COL_TOTAL_BLOCKS);
  overlap = ledgerColumn(COL_OVERLAP);
  potentialDecode = ledgerColumn(COL_POTENTIAL_DECODE);
  requests = ledgerColumn(COL_ACTIVE_REQUESTS);
  return ledgerRows();
}

function beginCost(): void {
  blockSize = <f64>ledgerProjectedBlockSize();
  promptBlocks = Math.ceil(<f64>ledgerProjectedPromptTokens() / blockSize);
}

/**
 * Why row w may not take the request, or REASON_ELIGIBLE. Busy means any of:
 * ACTIVE_PREFILL > prefillTokens; ACTIVE_PREFILL > prefillFraction x
 * MAX_BATCHED_TOKENS (rows with a known max only); ACTIVE_DECODE / TOTAL_BLOCKS
 * > decodeFraction (rows with a known capacity only). +Infinity disables one.
 */
@inline
function rowReason(w: u32, useAllowed: bool, prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u8 {
  if (load<u8>(present + w) == 0) return REASON_ABSENT;
  if (load<u8>(available + w) == 0) return REASON_UNAVAILABLE;
  if (useAllowed && load<u8>(allowedCol + w) == 0) return REASON_NOT_ALLOWED;
  const tokens = load<f64>(prefill + (<usize>w << 3));
  if (tokens > prefillTokens) return REASON_BUSY_PREFILL_TOKENS;
  const maxTokens = load<u32>(maxBatched + (<usize>w << 2));
  if (maxTokens > 0 && tokens > prefillFraction * <f64>maxTokens) return REASON_BUSY_PREFILL_FRACTION;
  const blocks = load<u32>(total + (<usize>w << 2));
  if (blocks > 0 && <f64>load<u32>(decode + (<usize>w << 2)) / <f64>blocks > decodeFraction) return REASON_BUSY_DECODE_FRACTION;
  return REASON_ELIGIBLE;
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
  const nAllowed = nAvailable - notAllowed;
  store<u32>(counts, nPresent, 0);
  store<u32>(counts, nAvailable, 4);
  store<u32>(counts, nAllowed, 8);
  store<u32>(counts, nAllowed - eligible, 12);
  store<u32>(counts, eligible, 16);
  return eligible;
}

/**
 * The default cost of row w from the ledger's last projection, lower is better:
 *   prefillLoadScale x max(ACTIVE_PREFILL / bs + ceil(prompt / bs) - overlapCredit x OVERLAP, 0)
 *   + POTENTIAL_DECODE + activeRequestWeight x ACTIVE_REQUESTS,
 * times exp(-tanh(TAINT)) when useTaint and the row's TAINT is not 0.
 */
@inline
function rowCost(w: u32, overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64, useTaint: bool): f64 {
  const at4 = <usize>w << 2;
  const at8 = <usize>w << 3;
  let prefillBlocks = load<f64>(prefill + at8) / blockSize + promptBlocks - overlapCredit * <f64>load<u32>(overlap + at4);
  if (prefillBlocks < 0) prefillBlocks = 0;
  let cost = prefillLoadScale * prefillBlocks + <f64>load<u32>(potentialDecode + at4) + activeRequestWeight * <f64>load<u32>(requests + at4);
  if (useTaint) {
    const weight = load<f64>(taintCol + at8);
    if (weight != 0) cost *= Math.exp(-Math.tanh(weight));
  }
  return cost;
}

/** One pass over all rows into ELIGIBLE, REASON and the counts; returns the eligible count. */
export function selectEligibility(useAllowed: bool, prefillTokens: f64, prefillFraction: f64, decodeFraction: f64): u32 {
  const n = bindLedger();
  for (let w: u32 = 0; w < n; w++) markRow(w, rowReason(w, useAllowed, prefillTokens, prefillFraction, decodeFraction));
  return writeCounts(n);
}

/**
 * COST for every row marked ELIGIBLE (+Infinity for the rest). The projection
 * must use a block size > 0.
 */
export function selectCost(overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64, useTaint: bool): void {
  const n = bindLedger();
  beginCost();
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
  useAllowed: bool,
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
  beginCost();
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
  return greedy ? cheapest.best : pickSoftmax(temperature);
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
  return temperature > 0 ? pickSoftmax(temperature) : pickCheapest();
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

// ---- randomness: xoshiro128** on u32 words ----

let s0: u32 = 1;
let s1: u32 = 2;
let s2: u32 = 3;
let s3: u32 = 4;

// Expands a seed into four state words: a Weyl sequence through the murmur3
// finalizer, a bijection, so at most one word is 0 and the state never is.
function seedWord(x: u32): u32 {
  x = (x ^ (x >>> 16)) * 0x85ebca6b;
  x = (x ^ (x >>> 13)) * 0xc2b2ae35;
  return x ^ (x >>> 16);
}

export function selectSeed(seed: u32): void {
  s0 = seedWord(seed + 0x9e3779b9);
  s1 = seedWord(seed + 0x3c6ef372);
  s2 = seedWord(seed + 0xdaa66d2b);
  s3 = seedWord(seed + 0x78dde6e4);
}

function nextU32(): u32 {
  const result = rotl<u32>(s1 * 5, 7) * 9;
  const t = s1 << 9;
  s2 ^= s0;
  s3 ^= s1;
  s1 ^= s2;
  s0 ^= s3;
  s2 ^= t;
  s3 = rotl<u32>(s3, 11);
  return result;
}

/** True with probability about 1/k (exactly ceil(2^32 / k) / 2^32). */
@inline
function chance(k: u32): bool {
  return (<u64>nextU32() * <u64>k) >> 32 == 0;
}

/** Uniform in [0, 1) with 32 random bits. */
@inline
function unit(): f64 {
  return <f64>nextU32() / 4294967296.0;
}

// For tests of the generator itself: the next raw word.
export function selectNextRandom(): u32 {
  return nextU32();
}
