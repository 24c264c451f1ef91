import {
  MULT_NONE,
  MULT_TAINT,
  MARK_COUNTED,
  MARK_EXCLUDED,
  MARK_LISTED,
  MARK_OUTSIDE,
  allowListCount,
  allowedAt,
  allowedColumn,
  buildAllowedMask,
  clearMark,
  constraintsBegin,
  constraintsEnd,
  excludedAt,
  exclusionCount,
  groupAllowed,
  groupTableUsed,
  groupMultiplier,
  markOf,
  setMark,
} from './constraints';
import { COST_KV, costBound, costMatchesConfigured, costTouched, costUntouched } from './cost/kind';
import { NIL, grownCapacity, regrow } from './grow';
import { groupAvailable, groupCount, groupPosition, groupRank, groupSlotAt } from './ledger/groups';
import {
  COL_TOUCH,
  adoptTouched,
  creditAt,
  depthOf,
  freshRecord,
  heldOf,
  isCurrent,
  isTouched,
  recordDepth,
  recordHeld,
  recordOf,
  withDepth,
  overlapOf,
  projectionCredits,
  setCredit,
  ledgerProjectedBlockSize,
  ledgerTouchedCount,
  ledgerTouchedPtr,
  projectHeld,
  projectionColumn,
  projectionStart,
  touchedAt,
} from './ledger/projection';
import { availableTotal, groupOf, isAvailable, isPresent, keyOf, presentTotal, rowCount } from './ledger/rows';
import { viewFind, viewGroupMembers, viewMember, viewMemberKeys, viewTree } from './ledger/views';
import { runAt, runWorkers, runDepth, runHolds, runSlots } from './match-runs';
import { below } from './random';
import { beginStepCost, scanDecide, selectCountsPtr, setLastCost, storeCounts } from './select';
import { treeCount, treeCountBefore, treeIsMember, treeMin, treeNext, treeNthAtMin, treeSet } from './tie-tree';

// A temperature-0 decision without the full scan, exact: the same minimum
// cost, the same counts and the same pick from the same random draw as the
// scan (select.ts), on a view (ledger/views.ts) whose thresholds are the
// decision's, with the cost configured as the decision's.
//
// Every worker the request does not touch (no cached prefix, none of its
// hashes held) costs untouched(key) times its group's multiplier (cost/kind.ts),
// and the view keeps, per taint group, a tree of its members' keys. So:
//   1. the explicit workers are evaluated one by one: the touched ones (the
//      projection's list) are costed and collected as ties at the cheapest
//      cost, and touched or barred ones (excluded, or off a large allow-list)
//      at their group's minimum key are counted there;
//   2. per allowed group, the tree's minimum key m gives the cheapest
//      untouched members, `floor` = untouched(m) x multiplier, and the members
//      holding m that are not explicit; when every one of them is explicit, those
//      leaves are taken out of the tree (peeled) for the decision and the next
//      key is the group's floor; when rounding makes the next key cost the same
//      as m, the decision scans;
//   3. the workers at the overall minimum, in slot order, are the touched ties
//      and each cheapest group's untouched members at its minimum; the pick is
//      the r-th of them for r = below(count), found by counting in the trees
//      (positions follow slot order within a group), as the scan would pick.
// A small allow-list (at most 1/LIST_SHARE of the rows, e.g. a pin) is
// evaluated slot by slot instead; a large one bars the members off it (found
// by one pass over the rows' bytes), unless they are most of them.
// The fused decision (decide.ts) without an allow-list takes step 1 while it
// projects (projectFused): one pass over the index's matches, deepest first,
// in which a match whose cost bound already exceeds the best so far is not
// even recorded. Otherwise step 1 reads the projection's touched list.
// Its cost grows with the touched workers that can matter: a prefix cached on
// every worker touches them all, and the decision then costs a pass over them.
// Counts come from the groups' and views' running counts (plus one pass over
// an allow-list and the exclusions), so they are exact on both paths.

/** An allow-list of at most rows / LIST_SHARE slots is evaluated explicitly. */
const LIST_SHARE: u32 = 8;
/** Leaves a decision may peel before it scans instead. */
const PEEL_BUDGET: u32 = 256;
/** decideFast could not answer exactly: scan. */
export const FALLBACK: i32 = -2;

// Scratch sized to the rows: tied touched workers, explicit workers, members
// barred by a large allow-list, sorted explicit workers at a minimum, peeled leaves.
let scratchRows: u32 = 0;
let ties: usize = 0;
let explicit: usize = 0;
let outside: usize = 0;
let atMinList: usize = 0;
let peeled: usize = 0;
// One bit per slot: the workers holding the prompt's hashes, during projectFused.
let holderBits: usize = 0;
// Per group: explicit members at its minimum key, its floor, its untouched count at the floor.
let scratchGroups: u32 = 0;
let atMin: usize = 0;
let floors: usize = 0;
// Per group, the bound of the current depth (fusedMatches).
let bounds: usize = 0;
let untouched: usize = 0;
let candidates: usize = 0;

let tieCount: u32 = 0;
let tieCost: f64 = Infinity;
let explicitCount: u32 = 0;
/** projectFused counted the touched members without listing them as explicit. */
let explicitPending = false;
let outsideCount: u32 = 0;
let peeledCount: u32 = 0;
let candidateCount: u32 = 0;

function reserveScratch(rows: u32, groups: u32): void {
  if (rows > scratchRows) {
    const cap = grownCapacity(scratchRows, rows);
    ties = regrow(ties, scratchRows, cap, 4);
    explicit = regrow(explicit, scratchRows, cap, 4);
    outside = regrow(outside, scratchRows, cap, 4);
    atMinList = regrow(atMinList, scratchRows, cap, 4);
    holderBits = regrow(holderBits, scratchRows >> 3, cap >> 3, 1);
    scratchRows = cap;
  }
  if (peeled == 0) peeled = regrow(0, 0, PEEL_BUDGET, 4);
  if (groups > scratchGroups) {
    const cap = grownCapacity(scratchGroups, groups);
    atMin = regrow(atMin, scratchGroups, cap, 4);
    floors = regrow(floors, scratchGroups, cap, 8);
    bounds = regrow(bounds, scratchGroups, cap, 8);
    untouched = regrow(untouched, scratchGroups, cap, 4);
    candidates = regrow(candidates, scratchGroups, cap, 4);
    scratchGroups = cap;
  }
}

@inline
function u32At(list: usize, i: u32): u32 {
  return load<u32>(list + (<usize>i << 2));
}

@inline
function setU32(list: usize, i: u32, value: u32): void {
  store<u32>(list + (<usize>i << 2), value);
}

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
  if (cost == tieCost) setU32(ties, tieCount++, w);
}

@inline
function barred(w: u32): bool {
  return (markOf(w) & (MARK_EXCLUDED | MARK_OUTSIDE)) != 0;
}

@inline
function costOf(w: u32, group: u32): f64 {
  return costTouched(w, keyOf(w), overlapOf(w), heldOf(w)) * groupMultiplier(group);
}

/**
 * The decision on view v with the constraints and the cost begun: the picked
 * slot, -1 when no worker is eligible, or FALLBACK when only the scan can
 * answer exactly. Writes the counts and the last cost.
 */
export function decideFast(v: u32, collected: bool = false): i32 {
  const n = rowCount();
  reserveScratch(n, groupCount());
  const list = allowListCount();
  if (list >= 0 && <u32>list * LIST_SHARE <= n) return decideListed(v, <u32>list, n);
  outsideCount = 0;
  if (list >= 0) {
    walkList(v, <u32>list, n, false);
    if (!barOutside(v, n)) return FALLBACK;
  }
  const groups = groupCount();
  if (!collected) {
    prepareGroups(v);
    collectTouched(v);
  }
  collectExclusions(v, n, list < 0);
  collectOutside();
  if (load<u32>(selectCountsPtr(), 16) == 0) {
    releaseOutside();
    return pickNone();
  }
  peeledCount = 0;
  const result = pickFromGroups(v, groups);
  restorePeeled(v);
  releaseOutside();
  return result;
}

/** Each group's minimum key (step 2's start) and no explicit workers or ties yet. */
function prepareGroups(v: u32): void {
  reserveScratch(rowCount(), groupCount());
  const groups = groupCount();
  for (let g: u32 = 0; g < groups; g++) {
    setU32(atMin, g, 0);
    store<f64>(floors + (<usize>g << 3), groupAllowed(g) && viewGroupMembers(v, g) > 0 ? treeMin(viewTree(v, g)) : Infinity);
  }
  resetTies();
  explicitCount = 0;
  explicitPending = false;
}

/** Whether the fused decision may project and cost in one pass (projectFused): it has no allow-list. */
export function fusedDecision(): bool {
  return allowListCount() < 0;
}

/**
 * The fused decision's projection and step 1 in one pass, for a decision on
 * view v without an allow-list: the held counts first (ledger/projection.ts),
 * then each (slot, depth) of the index's matches (findMatches reports a slot
 * once) is recorded in its TOUCH record and, for a member of an allowed
 * group, noted as explicit and costed unless excluded, right away; last the
 * workers that only hold hashes. Then decideFast(v, true) takes the steps
 * after it. One pass over the matches, each touched worker's records read
 * once; workers that cannot matter are skipped (fusedMatches).
 */
export function projectFused(
  v: u32,
  seqPtr: usize,
  seqCount: u32,
  promptTokens: u32,
  blockSize: u32,
  slotsPtr: usize,
  depthsPtr: usize,
  count: u32,
  creditsPtr: usize,
  runsPtr: usize,
  runCount: u32,
): void {
  projectionCredits(creditsPtr);
  projectionStart(promptTokens, blockSize, seqCount);
  projectHeld(seqPtr, seqCount);
  prepareGroups(v);
  const holders = ledgerTouchedCount();
  const list = ledgerTouchedPtr();
  for (let i: u32 = 0; i < holders; i++) setHolder(load<u32>(list + (<usize>i << 2)), true);
  projectionPartial = false;
  // One group, all of it allowed at multiplier 1, nothing excluded: the
  // explicit workers are the touched members, listed only if needed.
  const plain = groupCount() == 1 && !groupTableUsed() && exclusionCount() == 0;
  fusedAnswer(v, slotsPtr, depthsPtr, count, runsPtr, runCount, holders, plain);
  // The workers that hold prompt hashes without a cached prefix.
  for (let i: u32 = 0; i < holders; i++) {
    const w = load<u32>(list + (<usize>i << 2));
    setHolder(w, false);
    if (depthOf(w) != 0 || !viewMember(v, w)) continue;
    const g = groupOf(w);
    if (!groupAllowed(g)) continue;
    if (plain) {
      if (keyOf(w) == load<f64>(floors)) setU32(atMin, 0, u32At(atMin, 0) + 1);
    } else {
      noteExplicit(w, g);
    }
    if (!barred(w)) offerTie(w, costOf(w, g));
  }
  explicitPending = plain;
}

let projectionPartial = false;

/**
 * A run with fewer than HOLDER_SHARE workers per holder, whose bound exceeds
 * the best, is expanded anyway: looking each holder up costs more.
 */
const HOLDER_SHARE: u32 = 4;
// One holder, as a list of one match.
const single: usize = memory.data(4, 4);

/**
 * The index's answer (its pairs, then its runs, prefix-match.ts) in
 * projectFused, deepest first where it can: one core's pairs and runs each
 * come in walk order, so the pairs deeper than a run go before it (a host's,
 * from several cores, come core after core: each entry is still taken once,
 * and exactly, only bounds bite later). A run whose bound at its depth
 * exceeds the best so far for every allowed group is not expanded: only the
 * holders among its workers can matter (see fusedMatches), and they are
 * looked up in its sets.
 */
function fusedAnswer(v: u32, slots: usize, depths: usize, count: u32, runs: usize, runCount: u32, holders: u32, plain: bool): void {
  let p = count;
  for (let r = runCount; r > 0; ) {
    const run = runAt(runs, --r);
    const depth = runDepth(run);
    let q = p;
    while (q > 0 && load<u32>(depths + (<usize>(q - 1) << 2)) > depth) q--;
    if (q < p) fusedSegment(v, slots, depths, q, p, 0, plain);
    p = q;
    const m = runWorkers(run);
    if (m == 0 || depth == 0) continue;
    if (holders * HOLDER_SHARE < m && boundsExceedBest(<f64>depth, plain)) {
      const list = ledgerTouchedPtr();
      let found: u32 = 0;
      for (let i: u32 = 0; i < holders; i++) {
        const h = load<u32>(list + (<usize>i << 2));
        if (!runHolds(run, h)) continue;
        found++;
        store<u32>(single, h);
        fusedSegment(v, single, 0, 0, 1, depth, plain);
      }
      if (found < m) projectionPartial = true;
      continue;
    }
    fusedSegment(v, runSlots(run), 0, 0, m, depth, plain);
  }
  if (p > 0) fusedSegment(v, slots, depths, 0, p, 0, plain);
}

/** Whether a worker holding no prompt hash, at this credited overlap, costs more than the best in every allowed group (fusedMatches' skip). */
function boundsExceedBest(overlap: f64, plain: bool): bool {
  if (plain) return costBound(load<f64>(floors), overlap) > tieCost;
  const groups = groupCount();
  for (let g: u32 = 0; g < groups; g++) {
    if (groupAllowed(g) && !(costBound(load<f64>(floors + (<usize>g << 3)), overlap) * groupMultiplier(g) > tieCost)) return false;
  }
  return true;
}

@inline
function fusedSegment(v: u32, slots: usize, depths: usize, from: u32, to: u32, depth: u32, plain: bool): void {
  if (plain) fusedMatchesPlain(v, slots, depths, from, to, depth);
  else fusedMatchesGrouped(v, slots, depths, from, to, depth);
}

// Two functions of their own, each a copy of the loop with its branches on
// `plain` folded away (and few enough live values to stay in registers).
function fusedMatchesPlain(v: u32, slots: usize, depths: usize, from: u32, to: u32, depth: u32): void {
  fusedMatches(v, slots, depths, from, to, depth, true);
}

function fusedMatchesGrouped(v: u32, slots: usize, depths: usize, from: u32, to: u32, depth: u32): void {
  fusedMatches(v, slots, depths, from, to, depth, false);
}

/**
 * Whether the last projectFused left matches out of the projection (skipped
 * ones): a scan after it needs the whole projection again.
 */
export function fusedProjectionPartial(): bool {
  return projectionPartial;
}

@inline
function isHolder(slot: u32): bool {
  return (load<u8>(holderBits + (<usize>slot >> 3)) & (<u8>1 << <u8>(slot & 7))) != 0;
}

@inline
function setHolder(slot: u32, on: bool): void {
  const p = holderBits + (<usize>slot >> 3);
  const bit = <u8>1 << <u8>(slot & 7);
  store<u8>(p, on ? load<u8>(p) | bit : load<u8>(p) & ~bit);
}

/**
 * projectFused over matches [from, to) at (slots, depths), last first (or,
 * with `fixed` nonzero, all at that depth: a run's): the index reports the
 * workers that match deepest last, and their costs bound the rest early. A worker holding none of the prompt's hashes whose bound
 * (costBound at its credited overlap and its group's minimum key, times its group's
 * multiplier) exceeds the cheapest so far costs more than the pick and no
 * less than its key's untouched floor, so no later step of a fast decision
 * needs it (an excluded one is taken up as untouched by collectExclusions):
 * it is skipped, and so are the workers of groups the request may not use,
 * leaving the projection partial. Every other match is recorded in its TOUCH
 * record and, for a member, costed. Running values are locals.
 */
@inline
function fusedMatches(v: u32, slots: usize, depths: usize, from: u32, to: u32, fixed: u32, plain: bool): void {
  const n = rowCount();
  const records = projectionColumn(COL_TOUCH);
  const list = ledgerTouchedPtr();
  let listed = ledgerTouchedCount();
  const keys = viewMemberKeys(v);
  const fresh = freshRecord(0);
  const tied = ties;
  let best = tieCost;
  let tiedCount = tieCount;
  let atMinimum: u32 = 0;
  let skipped = false;
  let boundOverlap: f64 = -1;
  let bound: f64 = -Infinity;
  const groups = groupCount();
  for (let i = to; i > from; ) {
    i--;
    const slot = load<u32>(slots + (<usize>i << 2));
    const depth = fixed != 0 ? fixed : load<u32>(depths + (<usize>i << 2));
    if (slot >= n || depth == 0) continue;
    const g = plain ? 0 : groupOf(slot);
    if (!plain && !groupAllowed(g)) {
      skipped = true;
      continue;
    }
    const overlap = creditAt(i, depth);
    if (!isHolder(slot)) {
      // Matches come in runs of one depth (one credit): the groups' bounds change with it.
      if (overlap != boundOverlap) {
        boundOverlap = overlap;
        if (plain) {
          bound = costBound(load<f64>(floors), overlap);
        } else {
          for (let h: u32 = 0; h < groups; h++) store<f64>(bounds + (<usize>h << 3), costBound(load<f64>(floors + (<usize>h << 3)), overlap) * groupMultiplier(h));
        }
      }
      if ((plain ? bound : load<f64>(bounds + (<usize>g << 3))) > best) {
        skipped = true;
        continue;
      }
    }
    const t = records + (<usize>slot << 3);
    let record = load<u64>(t);
    if (!isCurrent(record)) {
      store<u32>(list + (<usize>listed << 2), slot);
      listed++;
      record = fresh;
    } else if (recordDepth(record) != 0) {
      continue;
    }
    store<u64>(t, withDepth(record, depth));
    setCredit(slot, overlap);
    const key = load<f64>(keys + (<usize>slot << 3));
    if (key == Infinity) continue;
    if (plain) {
      if (key == load<f64>(floors)) atMinimum++;
    } else {
      noteExplicit(slot, g);
      if (barred(slot)) continue;
    }
    const cost = costTouched(slot, key, overlap, recordHeld(record)) * (plain ? 1.0 : groupMultiplier(g));
    if (cost < best) {
      best = cost;
      tiedCount = 0;
    }
    if (cost == best) {
      store<u32>(tied + (<usize>tiedCount << 2), slot);
      tiedCount++;
    }
  }
  adoptTouched(listed);
  tieCost = best;
  tieCount = tiedCount;
  if (plain) setU32(atMin, 0, u32At(atMin, 0) + atMinimum);
  if (skipped) projectionPartial = true;
}

/** Touched members of allowed groups: explicit, costed unless barred, counted at their group's minimum. */
function collectTouched(v: u32): void {
  const touched = ledgerTouchedCount();
  for (let i: u32 = 0; i < touched; i++) {
    const w = touchedAt(i);
    if (!viewMember(v, w)) continue;
    const g = groupOf(w);
    if (!groupAllowed(g)) continue;
    noteExplicit(w, g);
    if (!barred(w)) offerTie(w, costOf(w, g));
  }
}

/** Lists the explicit workers when projectFused left them implicit (the touched members). */
function ensureExplicit(v: u32): void {
  if (!explicitPending) return;
  explicitPending = false;
  const touched = ledgerTouchedCount();
  for (let i: u32 = 0; i < touched; i++) {
    const w = touchedAt(i);
    if (viewMember(v, w)) setU32(explicit, explicitCount++, w);
  }
}

@inline
function noteExplicit(w: u32, group: u32): void {
  setU32(explicit, explicitCount++, w);
  if (keyOf(w) == load<f64>(floors + (<usize>group << 3))) setU32(atMin, group, u32At(atMin, group) + 1);
}

/**
 * Each distinct exclusion once: untouched members of allowed groups become
 * explicit; without an allow-list the counts (from the groups' and the view's
 * running counts) lose the excluded available and member workers.
 */
function collectExclusions(v: u32, n: u32, countGroups: bool): void {
  let allowed: u32 = 0;
  let eligible: u32 = 0;
  if (countGroups) {
    const groups = groupCount();
    for (let g: u32 = 0; g < groups; g++) {
      if (!groupAllowed(g)) continue;
      allowed += groupAvailable(g);
      eligible += viewGroupMembers(v, g);
    }
  }
  const excluded = exclusionCount();
  for (let i: u32 = 0; i < excluded; i++) {
    const w = excludedAt(i);
    if (w >= n || (markOf(w) & MARK_COUNTED) != 0) continue;
    setMark(w, MARK_COUNTED);
    if (!isPresent(w) || !isAvailable(w)) continue;
    const g = groupOf(w);
    if (!groupAllowed(g)) continue;
    const member = viewMember(v, w);
    if (countGroups) {
      allowed--;
      if (member) eligible--;
    }
    if (member && !isTouched(w)) noteExplicit(w, g);
  }
  if (countGroups) storeCounts(presentTotal(), availableTotal(), allowed, eligible);
}

/** Members barred by a large allow-list become explicit (the excluded ones already are). */
function collectOutside(): void {
  for (let i: u32 = 0; i < outsideCount; i++) {
    const w = u32At(outside, i);
    if (isTouched(w) || (markOf(w) & MARK_EXCLUDED) != 0) continue;
    noteExplicit(w, groupOf(w));
  }
}

/**
 * Counts the distinct listed slots that are available, allowed and not
 * excluded, and those that are members (eligible), storing the counts; with
 * `evaluate`, also offers the eligible ones as ties.
 */
function walkList(v: u32, count: u32, n: u32, evaluate: bool): u32 {
  let allowed: u32 = 0;
  let eligible: u32 = 0;
  resetTies();
  for (let i: u32 = 0; i < count; i++) {
    const w = allowedAt(i);
    if (w >= n || (markOf(w) & MARK_LISTED) != 0) continue;
    setMark(w, MARK_LISTED);
    if (!isPresent(w) || !isAvailable(w) || (markOf(w) & MARK_EXCLUDED) != 0) continue;
    const g = groupOf(w);
    if (!groupAllowed(g)) continue;
    allowed++;
    if (!viewMember(v, w)) continue;
    eligible++;
    if (evaluate) offerTie(w, costOf(w, g));
  }
  for (let i: u32 = 0; i < count; i++) {
    const w = allowedAt(i);
    if (w < n) clearMark(w, MARK_LISTED);
  }
  storeCounts(presentTotal(), availableTotal(), allowed, eligible);
  return eligible;
}

/** A small allow-list: every listed worker evaluated exactly. */
function decideListed(v: u32, count: u32, n: u32): i32 {
  if (walkList(v, count, n, true) == 0) return pickNone();
  sortU32(ties, tieCount);
  return pick(<i32>u32At(ties, below(tieCount)), tieCost);
}

/**
 * Marks and lists the members of allowed groups off a large allow-list (one
 * pass over the rows' bytes); false (nothing marked) when they are more than
 * half the rows (and more than the peel budget), where barring them would cost
 * more than the scan.
 */
function barOutside(v: u32, n: u32): bool {
  buildAllowedMask();
  const mask = allowedColumn();
  const most = max(n >> 1, PEEL_BUDGET);
  for (let w: u32 = 0; w < n; w++) {
    if (load<u8>(mask + w) != 0 || !isPresent(w) || !viewMember(v, w) || !groupAllowed(groupOf(w))) continue;
    if (outsideCount == most) {
      releaseOutside();
      return false;
    }
    setMark(w, MARK_OUTSIDE);
    setU32(outside, outsideCount++, w);
  }
  return true;
}

function releaseOutside(): void {
  for (let i: u32 = 0; i < outsideCount; i++) clearMark(u32At(outside, i), MARK_OUTSIDE);
  outsideCount = 0;
}

/** Steps 2 and 3 over the allowed groups, after the explicit workers. */
function pickFromGroups(v: u32, groups: u32): i32 {
  let overall = tieCost;
  candidateCount = 0;
  for (let g: u32 = 0; g < groups; g++) {
    if (!groupAllowed(g) || viewGroupMembers(v, g) == 0) continue;
    const tree = viewTree(v, g);
    const multiplier = groupMultiplier(g);
    for (;;) {
      const m = treeMin(tree);
      if (m == Infinity) break;
      const floor = costUntouched(m) * multiplier;
      if (floor > overall) break;
      const next = treeNext(tree);
      const above = next == Infinity ? Infinity : costUntouched(next) * multiplier;
      if (above == floor) return FALLBACK;
      const count = treeCount(tree) - u32At(atMin, g);
      if (count > 0) {
        store<f64>(floors + (<usize>g << 3), floor);
        setU32(untouched, g, count);
        setU32(candidates, candidateCount++, g);
        if (floor < overall) overall = floor;
        break;
      }
      // Every member at m is explicit: the untouched ones cost at least `above`.
      if (above > overall) break;
      if (!peel(v, tree, g, m)) return FALLBACK;
    }
  }
  let total: u32 = tieCost == overall ? tieCount : 0;
  let atOverall: u32 = 0;
  for (let i: u32 = 0; i < candidateCount; i++) {
    const g = u32At(candidates, i);
    if (load<f64>(floors + (<usize>g << 3)) != overall) continue;
    setU32(candidates, atOverall++, g);
    total += u32At(untouched, g);
  }
  candidateCount = atOverall;
  if (total == 0) return pickNone();
  return pick(<i32>nthCandidate(v, below(total), tieCost == overall ? tieCount : 0), overall);
}

/**
 * Takes the explicit members of group g at key m out of its tree and counts
 * the explicit members at the new minimum; false when the budget is spent.
 */
function peel(v: u32, tree: usize, g: u32, m: f64): bool {
  ensureExplicit(v);
  for (let i: u32 = 0; i < explicitCount; i++) {
    const w = u32At(explicit, i);
    if (groupOf(w) != g || keyOf(w) != m) continue;
    const pos = groupPosition(w);
    if (!treeIsMember(tree, pos)) continue;
    if (peeledCount == PEEL_BUDGET) return false;
    treeSet(tree, pos, Infinity, false);
    setU32(peeled, peeledCount++, w);
  }
  const next = treeMin(tree);
  let count: u32 = 0;
  for (let i: u32 = 0; i < explicitCount; i++) {
    const w = u32At(explicit, i);
    if (groupOf(w) == g && keyOf(w) == next) count++;
  }
  setU32(atMin, g, count);
  return true;
}

function restorePeeled(v: u32): void {
  for (let i: u32 = 0; i < peeledCount; i++) {
    const w = u32At(peeled, i);
    treeSet(viewTree(v, groupOf(w)), groupPosition(w), keyOf(w), true);
  }
  peeledCount = 0;
}

/**
 * The r-th worker in slot order among the tied touched workers (the first
 * `tied` of `ties`) and the untouched members at the minimum of the candidate
 * groups: the largest slot s with fewer than or r candidates below it.
 */
function nthCandidate(v: u32, r: u32, tied: u32): u32 {
  if (candidateCount == 0) {
    sortU32(ties, tied);
    return u32At(ties, r);
  }
  // The explicit members at the candidate groups' minimum: in the trees, not candidates.
  ensureExplicit(v);
  let atMinCount: u32 = 0;
  for (let i: u32 = 0; i < explicitCount; i++) {
    const w = u32At(explicit, i);
    const g = groupOf(w);
    if (!isCandidate(g)) continue;
    if (keyOf(w) == treeMin(viewTree(v, g))) setU32(atMinList, atMinCount++, w);
  }
  if (candidateCount == 1 && tied == 0 && atMinCount == 0) {
    const g = u32At(candidates, 0);
    return groupSlotAt(g, treeNthAtMin(viewTree(v, g), r));
  }
  sortU32(ties, tied);
  sortU32(atMinList, atMinCount);
  let lo: u32 = 0;
  let hi: u32 = rowCount() - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (candidatesBelow(v, mid, tied, atMinCount) <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

@inline
function isCandidate(g: u32): bool {
  for (let i: u32 = 0; i < candidateCount; i++) if (u32At(candidates, i) == g) return true;
  return false;
}

/** Candidates with a slot below s. */
function candidatesBelow(v: u32, s: u32, tied: u32, atMinCount: u32): u32 {
  let count = lowerBound(ties, tied, s);
  for (let i: u32 = 0; i < candidateCount; i++) {
    const g = u32At(candidates, i);
    count += treeCountBefore(viewTree(v, g), groupRank(g, s));
  }
  return count - lowerBound(atMinList, atMinCount, s);
}

/** Entries of a sorted list below `value`. */
function lowerBound(list: usize, count: u32, value: u32): u32 {
  let lo: u32 = 0;
  let hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (u32At(list, mid) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Sorts count u32 at list ascending (heapsort: no scratch). */
function sortU32(list: usize, count: u32): void {
  if (count < 2) return;
  for (let i = (count >> 1); i > 0; ) siftDown(list, --i, count);
  for (let end = count - 1; end > 0; end--) {
    const top = u32At(list, 0);
    setU32(list, 0, u32At(list, end));
    setU32(list, end, top);
    siftDown(list, 0, end);
  }
}

function siftDown(list: usize, at: u32, count: u32): void {
  let i = at;
  for (;;) {
    const left: u32 = 2 * i + 1;
    if (left >= count) return;
    let child = left;
    if (left + 1 < count && u32At(list, left + 1) > u32At(list, left)) child = left + 1;
    if (u32At(list, child) <= u32At(list, i)) return;
    const value = u32At(list, i);
    setU32(list, i, u32At(list, child));
    setU32(list, child, value);
    i = child;
  }
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

// ---- the step API ----

export const PATH_SCAN: u32 = 0;
export const PATH_FAST: u32 = 1;

let lastPath: u32 = PATH_SCAN;

/** How the last selectDecide answered: PATH_FAST or PATH_SCAN. */
export function selectLastPath(): u32 {
  return lastPath;
}

/**
 * Eligibility, cost and pick in one call: the same columns, counts, random
 * draws and result as selectEligibility, selectCost and selectPick called in
 * turn, on the fast path when a view with these thresholds is open and the
 * cost is the configured one (at temperature 0, without TAINT weights);
 * `forceScan` makes it run the full scan (which also fills the selector's
 * columns).
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
  beginStepCost(overlapCredit, prefillLoadScale, activeRequestWeight);
  constraintsBegin(allowedCount, 0, -1, useTaint ? MULT_TAINT : MULT_NONE);
  let slot = FALLBACK;
  if (!forceScan && !useTaint && !(temperature > 0) && costMatchesConfigured(COST_KV, prefillLoadScale, activeRequestWeight, 0, ledgerProjectedBlockSize())) {
    const v = viewFind(prefillTokens, prefillFraction, decodeFraction);
    if (v != NIL) slot = decideFast(v);
  }
  lastPath = slot == FALLBACK ? PATH_SCAN : PATH_FAST;
  if (slot == FALLBACK) slot = scanDecide(prefillTokens, prefillFraction, decodeFraction, temperature);
  constraintsEnd();
  return slot;
}
