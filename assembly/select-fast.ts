import { clampedCost, costConstant, prefillClamped, unclampedCost } from './cost-model';
import { grownCapacity, regrow } from './grow';
import {
  COL_ACTIVE_DECODE,
  COL_ACTIVE_PREFILL,
  COL_ACTIVE_REQUESTS,
  COL_AVAILABLE,
  COL_PRESENT,
  COL_TOUCH,
  ledgerAvailableCount,
  ledgerColumn,
  ledgerFastPathMatches,
  ledgerMemberCount,
  ledgerPresentCount,
  ledgerProjectedBlockSize,
  ledgerProjectedPromptTokens,
  ledgerProjectedSeqCount,
  ledgerRows,
  ledgerTouchedCount,
  ledgerTouchedPtr,
} from './load-table';
import { below } from './random';
import { COL_ALLOWED, buildAllowedMask, selectAllowedPtr, selectColumn, selectReserve, selectRun, setLastCost, storeCounts } from './select';
import { tieTreeCount, tieTreeIsMember, tieTreeKey, tieTreeMin, tieTreeNext, tieTreeNthAtMin } from './tie-tree';

// A temperature-0 decision without the full scan, exact: the same minimum
// cost, the same counts, and ties broken uniformly, as selectRun would.
//
// Every worker the request does not touch (no cached prefix, none of its hashes
// held) costs exactly key + K (cost-model.ts), and the ledger's tie tree holds
// the keys of the eligible workers. So a decision
//   1. evaluates exactly the workers the projection touched (ledgerTouchedPtr),
//      collecting the cheapest of them (k ties at cost `best`);
//   2. reads the tree's minimum key m, how many members hold it (c) and the next
//      larger key; the cheapest untouched workers cost `floor` = m + K, and are
//      the untouched members holding m, unless rounding makes next + K equal
//      floor too (then it scans);
//   3. picks uniformly among all workers at the overall minimum: when touched
//      and untouched ones tie it draws over the union (k + c outcomes, redrawing
//      a tree draw that lands on a touched or disallowed worker), so every
//      accepted outcome has the same probability.
// It falls back to selectRun (the full scan) when the parameters differ from
// the ones the tree was built for, for preferred taints and temperature > 0,
// where rounding could merge key levels, when every member holding m is
// touched and no touched worker is cheaper than next + K, and when the tie
// draws keep landing on touched workers (MAX_DRAWS). A small allow-list (at
// most 1/LIST_SHARE of the rows), or one the tie draws keep missing, is
// evaluated slot by slot instead of through the tree.
// Its cost grows with the touched workers: a prefix cached on every worker
// touches them all, and the decision is then as slow as the scan.
// Counts come from the ledger's running counts (plus one pass over an
// allow-list), so they are exact on both paths.

/** Tree draws before a decision gives up and scans. */
const MAX_DRAWS: u32 = 32;
/** An allow-list of at most rows / LIST_SHARE slots is evaluated explicitly. */
const LIST_SHARE: u32 = 8;
/** decideFast could not answer exactly. */
const FALLBACK: i32 = -2;

export const PATH_SCAN: u32 = 0;
export const PATH_FAST: u32 = 1;

let lastPath: u32 = PATH_SCAN;

// Scratch sized to the ledger's rows: the cheapest touched or listed workers,
// and a mark per slot to count a listed slot once.
let ties: usize = 0;
let seen: usize = 0;
let scratchCapacity: u32 = 0;

// Ledger columns and the request's terms for the current decision.
let prefill: usize = 0;
let decode: usize = 0;
let requests: usize = 0;
let touch: usize = 0;
let blockSize: f64 = 0;
let promptBlocks: f64 = 0;
let seqCount: u32 = 0;
let constant: f64 = 0;
let credit: f64 = 0;
let scale: f64 = 0;
let weight: f64 = 0;

// The cheapest workers offered so far (`tieCount` of them at `ties`, each at `tieCost`).
let tieCount: u32 = 0;
let tieCost: f64 = Infinity;

@inline
function resetTies(): void {
  tieCount = 0;
  tieCost = Infinity;
}

@inline
function offerTie(w: u32, cost: f64): void {
  if (cost < tieCost) {
    tieCost = cost;
    tieCount = 0;
  }
  if (cost == tieCost) {
    store<u32>(ties + (<usize>tieCount << 2), w);
    tieCount++;
  }
}

/** How the last selectDecide answered: PATH_FAST or PATH_SCAN. */
export function selectLastPath(): u32 {
  return lastPath;
}

/**
 * A decision with selectRun's parameters and result; `forceScan` makes it run
 * the full scan (which also fills the selector's columns).
 */
export function selectDecide(
  allowedCount: i32,
  prefillTokens: f64,
  prefillFraction: f64,
  decodeFraction: f64,
  overlapCredit: f64,
  prefillLoadScale: f64,
  activeRequestWeight: f64,
  useTaint: bool,
  temperature: f64,
  forceScan: bool,
): i32 {
  if (
    !forceScan &&
    !useTaint &&
    !(temperature > 0) &&
    ledgerFastPathMatches(prefillLoadScale, activeRequestWeight, ledgerProjectedBlockSize(), prefillTokens, prefillFraction, decodeFraction)
  ) {
    const slot = decideFast(allowedCount, overlapCredit, prefillLoadScale, activeRequestWeight);
    if (slot != FALLBACK) {
      lastPath = PATH_FAST;
      return slot;
    }
  }
  lastPath = PATH_SCAN;
  return selectRun(
    allowedCount,
    prefillTokens,
    prefillFraction,
    decodeFraction,
    overlapCredit,
    prefillLoadScale,
    activeRequestWeight,
    useTaint,
    temperature,
  );
}

function decideFast(allowedCount: i32, overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64): i32 {
  const n = ledgerRows();
  bindDecision(n, overlapCredit, prefillLoadScale, activeRequestWeight);
  if (allowedCount >= 0 && <u32>allowedCount * LIST_SHARE <= n) return decideListed(<u32>allowedCount, n);
  const useMask = allowedCount >= 0;
  let eligible = ledgerMemberCount();
  if (useMask) {
    selectReserve();
    buildAllowedMask(<u32>allowedCount, n);
    eligible = walkList(<u32>allowedCount, n, false);
  } else {
    storeCounts(ledgerPresentCount(), ledgerAvailableCount(), ledgerAvailableCount(), eligible);
  }
  if (eligible == 0) return pickNone();
  const mask = selectColumn(COL_ALLOWED);

  // 1. the touched workers, exactly
  const min = tieTreeMin();
  const touchedList = ledgerTouchedPtr();
  const touchedCount = ledgerTouchedCount();
  let touchedAtMin: u32 = 0;
  resetTies();
  for (let i: u32 = 0; i < touchedCount; i++) {
    const w = load<u32>(touchedList + (<usize>i << 2));
    if (!tieTreeIsMember(w)) continue;
    const key = tieTreeKey(w);
    if (key == min) touchedAtMin++;
    if (useMask && load<u8>(mask + w) == 0) continue;
    offerTie(w, costAt(w, key));
  }
  const best = tieCost;
  const k = tieCount;

  // 2. the cheapest untouched workers, from the tree
  const floor = min + constant;
  if (k > 0 && best < floor) return pickTie(k, best);
  const above = tieTreeNext() + constant;
  if (above == floor) return FALLBACK;
  const count = tieTreeCount();
  if (count == touchedAtMin) {
    // every member at the minimum is touched: untouched ones cost at least `above`
    return k > 0 && best < above ? pickTie(k, best) : FALLBACK;
  }

  // 3. uniform over the workers at the minimum
  const tiedTouched = k > 0 && best == floor ? k : 0;
  const outcomes = tiedTouched + count;
  for (let draw: u32 = 0; draw < MAX_DRAWS; draw++) {
    const r = below(outcomes);
    if (r < tiedTouched) return pick(<i32>load<u32>(ties + (<usize>r << 2)), best);
    const w = tieTreeNthAtMin(r - tiedTouched);
    if (isTouched(w)) continue;
    if (useMask && load<u8>(mask + w) == 0) continue;
    return pick(<i32>w, floor);
  }
  // An allow-list that misses most of the tie: its slots, one by one, still cost less than every row.
  return useMask ? decideListed(<u32>allowedCount, n) : FALLBACK;
}

/** A small allow-list: every listed worker evaluated exactly. */
function decideListed(count: u32, n: u32): i32 {
  const eligible = walkList(count, n, true);
  if (eligible == 0) return pickNone();
  return pickTie(tieCount, tieCost);
}

/**
 * Counts the distinct staged allow-list slots that are available and that are
 * eligible (tree members), storing the counts; with `evaluate`, also offers the
 * eligible ones as ties. Returns the eligible count.
 */
function walkList(count: u32, n: u32, evaluate: bool): u32 {
  const list = selectAllowedPtr();
  const present = ledgerColumn(COL_PRESENT);
  const available = ledgerColumn(COL_AVAILABLE);
  let allowed: u32 = 0;
  let eligible: u32 = 0;
  resetTies();
  for (let i: u32 = 0; i < count; i++) {
    const w = load<u32>(list + (<usize>i << 2));
    if (w >= n || load<u8>(seen + w) != 0) continue;
    store<u8>(seen + w, 1);
    if (load<u8>(present + w) == 0 || load<u8>(available + w) == 0) continue;
    allowed++;
    if (!tieTreeIsMember(w)) continue;
    eligible++;
    if (evaluate) offerTie(w, costAt(w, tieTreeKey(w)));
  }
  for (let i: u32 = 0; i < count; i++) {
    const w = load<u32>(list + (<usize>i << 2));
    if (w < n) store<u8>(seen + w, 0);
  }
  storeCounts(ledgerPresentCount(), ledgerAvailableCount(), allowed, eligible);
  return eligible;
}

function bindDecision(n: u32, overlapCredit: f64, prefillLoadScale: f64, activeRequestWeight: f64): void {
  if (n > scratchCapacity) {
    const cap = grownCapacity(scratchCapacity, n);
    ties = regrow(ties, scratchCapacity, cap, 4);
    seen = regrow(seen, scratchCapacity, cap, 1);
    scratchCapacity = cap;
  }
  prefill = ledgerColumn(COL_ACTIVE_PREFILL);
  decode = ledgerColumn(COL_ACTIVE_DECODE);
  requests = ledgerColumn(COL_ACTIVE_REQUESTS);
  touch = ledgerColumn(COL_TOUCH);
  blockSize = <f64>ledgerProjectedBlockSize();
  promptBlocks = Math.ceil(<f64>ledgerProjectedPromptTokens() / blockSize);
  seqCount = ledgerProjectedSeqCount();
  credit = overlapCredit;
  scale = prefillLoadScale;
  weight = activeRequestWeight;
  constant = costConstant(promptBlocks, seqCount, scale);
}

/** A worker's cost from its key: reads its load only where the prefill term may be clamped. */
@inline
function costAt(w: u32, key: f64): f64 {
  const t = touch + (<usize>w << 3);
  const credited = credit * <f64>load<u32>(t);
  const held = load<u32>(t, 4);
  if (credited > promptBlocks && prefillClamped(load<f64>(prefill + (<usize>w << 3)), blockSize, promptBlocks, credited)) {
    return clampedCost(load<u32>(decode + (<usize>w << 2)), seqCount, held, load<u32>(requests + (<usize>w << 2)), weight);
  }
  return unclampedCost(key, constant, credited, held, scale);
}

@inline
function isTouched(w: u32): bool {
  return load<u64>(touch + (<usize>w << 3)) != 0;
}

/** One of the k collected ties, uniformly. */
function pickTie(k: u32, cost: f64): i32 {
  return pick(<i32>load<u32>(ties + (<usize>below(k) << 2)), cost);
}

@inline
function pick(slot: i32, cost: f64): i32 {
  setLastCost(cost);
  return slot;
}

function pickNone(): i32 {
  setLastCost(Infinity);
  return -1;
}
