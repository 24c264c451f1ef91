import { MULT_GROUP, MULT_NONE, allowListCount, allowedAt, buildAllowedMask, allowedColumn, constraintsBegin, constraintsEnd, groupAllowed } from './constraints';
import { costBegin, costBookedOverlap, costMatchesConfigured } from './cost/kind';
import { NIL, grownCapacity, regrow } from './grow';
import { hashLocalPtr, hashPrompt, hashSequencePtr } from './block-hash';
import { depthOf, heldOf, ledgerProject, overlapOf } from './ledger/projection';
import { ledgerAdd } from './ledger/requests';
import { groupOf, isRouted, rowCount } from './ledger/rows';
import { viewFind } from './ledger/views';
import { STORED, indexFailedUpdate, indexInput, indexInsertRouted } from './prefix-index';
import { RUN_BYTES, answerPairs, answerRuns, findMatches, outRunsPtr } from './prefix-match';
import { outDepthsPtr, outSlotsPtr } from './prefix-slots';
import { projectRuns, runAt, runDepth, runModelSlot, runNext } from './match-runs';
import { NO_SLOT } from './prefix-members';
import { FALLBACK, PATH_FAST, PATH_SCAN, decideFast, fusedDecision, fusedProjectionPartial, projectFused } from './select-fast';
import { scanDecide, scanEligibility, selectLastCost } from './select';

// The fused decision: one call finds the prompt's cached prefixes, projects it
// onto the workers it touches, picks a worker under the request's constraints
// and books it, with inputs and outputs in memory the core owns. Export prefix
// `decide`. A host stages the constraints (constraints.ts), fills the
// decision block and calls decideRun; `decidePrepare` is the step before, at
// request arrival: hash the tokens (both lists, block-hash.ts) and find their
// matches, so the matches are in the index's output for the decision.
//
// The decision block, at decideBlock() (184 bytes):
//   +0   promptTokens     f64  in
//   +8   overlapCredit    f64  in
//   +16  temperature      f64  in   0: the cheapest (fast path); > 0: softmax (scan)
//   +24  now              f64  in   booking time, ms on the host's clock
//   +32  prefillTokens    f64  in   busy thresholds (+Infinity: off)
//   +40  prefillFraction  f64  in
//   +48  decodeFraction   f64  in
//   +56  scale            f64  in   the cost's prefill load scale
//   +64  weight           f64  in   the cost's active request weight
//   +72  cost             f64  out  the pick's cost (+Infinity when none)
//   +80  blockSize        u32  in
//   +84  costKind         u32  in   (cost/kind.ts)
//   +88  flags            u32  in   FLAG_* below
//   +92  localPtr         u32  in   the prompt's local hashes (u64 each), e.g. hashLocalPtr()
//   +96  seqPtr           u32  in   its sequence hashes, e.g. hashSequencePtr()
//   +100 blocks           u32  in   hashes in each list
//   +104 listCount        i32  in   staged allow-list entries; -1: none
//   +108 excludedCount    u32  in   staged exclusions
//   +112 groupCount       i32  in   staged group-table entries; -1: none (every group, multiplier 1)
//   +116 matches          u32  in   (slot, depth) pairs at matchSlots/matchDepths; written by FLAG_FIND
//                                   (with the runs at +176: the pairs of the index's compact answer)
//   +120 slot             i32  out  the picked worker, -1 when none is eligible
//   +124 overlap          u32  out  its cached prefix depth, in blocks
//   +128 handle           u32  out  the booked request's ledger handle (FLAG_BOOK), NIL when none
//   +132 path             u32  out  PATH_FAST or PATH_SCAN (select-fast.ts)
//   +136 bestDepth        u32  out  decideBestDepth: the deepest match on an allowed worker
//   +140 routed           u32  out  1 when the booking recorded the prompt as routed in the index,
//                                   2 when it had no memory to (the worker's entries were cleared)
//   +144 partial          u32  out  1 when the fast path left workers it did not need out of
//                                   the projection (its columns then do not describe the request)
//   +148 matchSlots       u32  in   where the matches' slots are: the index's output (decideMatch,
//                                   FLAG_FIND) or the host's (decideUseMatches)
//   +152 matchDepths      u32  in   where their depths are
//   +156 matchCredits     u32  in   where their credited blocks are (f64 each; the host's, by
//                                   decideUseMatches), 0 when each match is credited its depth
//   +160 cachedBlocks     f64  out  the prefix the cost takes as cached on the picked worker, in
//                                   blocks (cost/kind.ts costBookedOverlap): what a booking books;
//                                   its credit where the matches had credits
//   +168 third            f64  in   the cost's third weight (ttft: its KV weight; kv: 0)
//   +176 runs             u32  in   runs of the index's answer (prefix-match.ts) besides the pairs;
//                                   written by decideMatch, 0 after decideUseMatches, the host's
//                                   by decideUseRuns
//   +180 runsPtr          u32  in   where they are
// The counts of the decision are at selectCountsPtr() (select.ts).

export const FLAG_FIND: u32 = 1;
export const FLAG_BOOK: u32 = 2;
export const FLAG_SCAN: u32 = 4;
export const FLAG_ELIGIBILITY: u32 = 8;

const block: usize = memory.data(184, 8);

// Matches found outside this core (a model's index sharded over several
// cores, or over storage tiers), staged by the host: room for `matchCapacity`
// (slot, depth, credit) triples: u32 slots, u32 depths, then f64 credits.
let hostMatches: usize = 0;
let matchCapacity: u32 = 0;
// Runs of answers found outside this core (a sharded index's cores' runs),
// staged by the host: run records (prefix-match.ts), then the member blocks
// they name, copied from their cores (the records hold their addresses here).
let hostRuns: usize = 0;
let hostRunBytes: usize = 0;

export function decideBlock(): usize {
  return block;
}

@inline
function f64At(offset: usize): f64 {
  return load<f64>(block + offset);
}

@inline
function u32At(offset: usize): u32 {
  return load<u32>(block + offset);
}

@inline
function setU32(offset: usize, value: u32): void {
  store<u32>(block + offset, value);
}

/**
 * Hashes the first tokenCount input tokens (hashReserveInput) into blocks of
 * blockSize, both lists, and finds their matches in the index; fills localPtr,
 * seqPtr, blocks and matches of the block. Returns the block count. May grow
 * memory.
 */
export function decidePrepare(tokenCount: u32, blockSize: u32, seed: u64): u32 {
  const blocks = hashPrompt(tokenCount, blockSize, seed);
  setU32(92, <u32>hashLocalPtr());
  setU32(96, <u32>hashSequencePtr());
  setU32(100, blocks);
  decideMatch();
  return blocks;
}

/**
 * Finds the matches of the block's local hashes (localPtr, blocks): the
 * index's answer, read where it is (its pairs and its runs); writes matches
 * and runs. Returns the pairs.
 */
export function decideMatch(): u32 {
  findMatches(<usize>u32At(92), u32At(100), false);
  const count = answerPairs();
  setU32(116, count);
  setU32(148, <u32>outSlotsPtr());
  setU32(152, <u32>outDepthsPtr());
  setU32(156, 0);
  setU32(176, answerRuns());
  setU32(180, <u32>outRunsPtr());
  return count;
}

/** Room for `count` host matches (u32 slots, u32 depths, then f64 credits) at the returned address. May grow memory. */
export function decideReserveMatches(count: u32): usize {
  if (count > matchCapacity) {
    const cap = grownCapacity(matchCapacity, count);
    hostMatches = regrow(hostMatches, matchCapacity * 4, cap * 4, 4);
    matchCapacity = cap;
  }
  return hostMatches;
}

/**
 * Uses the `count` matches the host staged at decideReserveMatches' address
 * (slots, then depths, then, when `credited`, their credits) instead of the index's.
 */
export function decideUseMatches(count: u32, credited: bool): void {
  setU32(116, count);
  setU32(148, <u32>hostMatches);
  setU32(152, <u32>(hostMatches + (<usize>count << 2)));
  setU32(156, credited ? <u32>(hostMatches + (<usize>count << 3)) : 0);
  setU32(176, 0);
}

/**
 * Room for `runs` run records and `words` u32 of member blocks after them,
 * at the returned address. May grow memory.
 */
export function decideReserveRuns(runs: u32, words: u32): usize {
  const bytes = <usize>runs * RUN_BYTES + (<usize>words << 2);
  if (bytes > hostRunBytes) {
    const cap = <usize>grownCapacity(<u32>hostRunBytes, <u32>bytes, 256);
    hostRuns = regrow(hostRuns, <u32>hostRunBytes, <u32>cap, 1);
    hostRunBytes = cap;
  }
  return hostRuns;
}

/** Uses the `runs` run records the host staged at decideReserveRuns' address beside the matches it staged (after decideUseMatches). */
export function decideUseRuns(runs: u32): void {
  setU32(176, runs);
  setU32(180, <u32>hostRuns);
}

/** Whether matched worker w (of n rows) is one decideBestDepth counts: its group and the allow-list (searched, or as a mask) allow it. */
@inline
function allowedMatch(w: u32, n: u32, list: i32, searched: bool, mask: usize): bool {
  if (w >= n || !groupAllowed(groupOf(w))) return false;
  return searched ? listed(w, <u32>list) : !(list > 16 && load<u8>(mask + w) == 0);
}

/**
 * The deepest cached prefix among the index's matches on workers the staged
 * allow-list (listCount) and group table (groupCount) allow; writes bestDepth.
 */
export function decideBestDepth(): u32 {
  constraintsBegin(<i32>u32At(104), 0, <i32>u32At(112), MULT_NONE);
  const list = allowListCount();
  // A short list (a pin) is searched; a longer one becomes a mask.
  const searched = list >= 0 && list <= 16;
  if (list > 16) buildAllowedMask();
  const slots = <usize>u32At(148);
  const depths = <usize>u32At(152);
  const count = u32At(116);
  const n = rowCount();
  const mask = allowedColumn();
  let best: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const w = load<u32>(slots + (<usize>i << 2));
    const depth = load<u32>(depths + (<usize>i << 2));
    if (depth > best && allowedMatch(w, n, list, searched, mask)) best = depth;
  }
  // Runs no deeper than the best so far are passed over unread.
  const runs = <usize>u32At(180);
  for (let r = u32At(176); r > 0; ) {
    const run = runAt(runs, --r);
    const depth = runDepth(run);
    if (depth <= best) continue;
    // Stepped through in place: this call allocates nothing.
    for (let s = runNext(run, 0); s != NO_SLOT; s = runNext(run, s + 1)) {
      if (!allowedMatch(runModelSlot(run, s), n, list, searched, mask)) continue;
      best = depth;
      break;
    }
  }
  constraintsEnd();
  setU32(136, best);
  return best;
}

@inline
function listed(w: u32, count: u32): bool {
  for (let i: u32 = 0; i < count; i++) if (allowedAt(i) == w) return true;
  return false;
}

/**
 * One decision from the block: (FLAG_FIND: find the matches;) project the
 * request onto the workers it touches; pick a worker under the staged
 * constraints, on the fast path where a view with these thresholds is open
 * and the cost is the configured one, else by the full scan (FLAG_SCAN forces
 * it, and it fills the selector's columns); (FLAG_BOOK: book the request on
 * the picked worker, and record its blocks as routed there when the worker
 * publishes no KV events). FLAG_ELIGIBILITY stops after the eligibility pass
 * (columns and counts) for a host that filters and scores itself. Returns the
 * slot (-1 when none is eligible).
 */
export function decideRun(): i32 {
  const flags = u32At(88);
  if (flags & FLAG_FIND) decideMatch();
  const promptTokens = <u32>f64At(0);
  const blockSize = u32At(80);
  const seqPtr = <usize>u32At(96);
  const blocks = u32At(100);
  const kind = u32At(84);
  const scale = f64At(56);
  const weight = f64At(64);
  const third = f64At(168);
  costBegin(kind, scale, weight, third, f64At(8), blockSize, promptTokens, blocks);
  const groups = <i32>u32At(112);
  constraintsBegin(<i32>u32At(104), u32At(108), groups, groups >= 0 ? MULT_GROUP : MULT_NONE);
  const prefillTokens = f64At(32);
  const prefillFraction = f64At(40);
  const decodeFraction = f64At(48);
  const temperature = f64At(16);
  setU32(128, NIL);
  setU32(140, 0);
  setU32(144, 0);
  let view = NIL;
  if ((flags & (FLAG_SCAN | FLAG_ELIGIBILITY)) == 0 && !(temperature > 0) && costMatchesConfigured(kind, scale, weight, third, blockSize)) {
    view = viewFind(prefillTokens, prefillFraction, decodeFraction);
  }
  const fused = view != NIL && fusedDecision();
  const credits = <usize>u32At(156);
  if (fused) projectFused(view, seqPtr, blocks, promptTokens, blockSize, <usize>u32At(148), <usize>u32At(152), u32At(116), credits, <usize>u32At(180), u32At(176));
  else project(seqPtr, blocks, promptTokens, blockSize, credits);
  if (flags & FLAG_ELIGIBILITY) {
    scanEligibility(prefillTokens, prefillFraction, decodeFraction);
    constraintsEnd();
    setU32(120, <u32>-1);
    setU32(132, PATH_SCAN);
    return -1;
  }
  const slot0 = view != NIL ? decideFast(view, fused) : FALLBACK;
  setU32(132, slot0 == FALLBACK ? PATH_SCAN : PATH_FAST);
  // The scan reads every worker's projection: make it whole again.
  if (slot0 == FALLBACK && fused && fusedProjectionPartial()) project(seqPtr, blocks, promptTokens, blockSize, credits);
  const slot = slot0 == FALLBACK ? scanDecide(prefillTokens, prefillFraction, decodeFraction, temperature) : slot0;
  setU32(144, fused && slot0 != FALLBACK && fusedProjectionPartial() ? 1 : 0);
  constraintsEnd();
  store<f64>(block + 72, selectLastCost());
  setU32(120, <u32>slot);
  if (slot < 0) {
    setU32(124, 0);
    store<f64>(block + 160, 0);
    return slot;
  }
  const cachedBlocks = costBookedOverlap(kind, overlapOf(<u32>slot), heldOf(<u32>slot));
  setU32(124, depthOf(<u32>slot));
  store<f64>(block + 160, cachedBlocks);
  if (flags & FLAG_BOOK) book(<u32>slot, cachedBlocks, promptTokens, blockSize, seqPtr, blocks);
  return slot;
}

/** The whole projection of the block's request: its pairs (ledger/projection.ts), then its runs. */
function project(seqPtr: usize, blocks: u32, promptTokens: u32, blockSize: u32, credits: usize): void {
  ledgerProject(seqPtr, blocks, promptTokens, blockSize, <usize>u32At(148), <usize>u32At(152), u32At(116), credits);
  projectRuns(<usize>u32At(180), u32At(176));
}

// A prefix credited less than its depth (offloaded blocks) books the tokens
// its credit leaves uncovered as prefill, the same share the cost charged,
// in whole tokens: a fraction of a token's credit saves none.
function book(slot: u32, overlap: f64, promptTokens: u32, blockSize: u32, seqPtr: usize, blocks: u32): void {
  const cached = Math.floor(min<f64>(overlap * <f64>blockSize, <f64>promptTokens));
  const now = f64At(24);
  setU32(128, ledgerAdd(slot, seqPtr, blocks, <u32>(<f64>promptTokens - cached), now));
  if (!isRouted(slot) || blocks == 0) return;
  const input = indexInput(blocks);
  if (input != 0) memory.copy(input, <usize>u32At(92), <usize>blocks << 3);
  // Without memory, as for any update that cannot complete, the worker's
  // entries are cleared and the failure counted (routed 2); the booking stands.
  if (input != 0 && indexInsertRouted(slot, blocks, now) == STORED) setU32(140, 1);
  else {
    indexFailedUpdate(slot);
    setU32(140, 2);
  }
}
