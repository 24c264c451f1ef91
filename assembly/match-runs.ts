import { grownCapacity, regrow } from './grow';
import { COPY_SLACK, NO_SLOT, setHas, setNext } from './prefix-members';
import { RUN_BYTES, runCopy } from './prefix-match';
import { projectOverlaps } from './ledger/projection';
import { rowCount } from './ledger/rows';

// The runs of a match answer (prefix-match.ts), as a decision reads them: a
// run is the members of one node less those of its child, at one depth, its
// sets read where they are (in the index's nodes). A decision that need not
// look at each worker of a run (its cost bound already exceeds the best,
// select-fast.ts) reads only its depth and count.

// The last run's workers as model slots (runSlots).
let scratch: usize = 0;
let scratchCapacity: u32 = 0;

@inline
export function runAt(runs: usize, i: u32): usize {
  return runs + <usize>i * RUN_BYTES;
}

@inline
export function runDepth(run: usize): u32 {
  return load<u32>(run);
}

/** The run's workers. */
@inline
export function runWorkers(run: usize): u32 {
  return load<u32>(run, 4);
}

/**
 * The run's workers as model slots, in a list valid until the next call. May
 * grow memory: the list is sized to the rows (or the run's set, if larger),
 * so it grows with the fleet, not with each larger run.
 */
export function runSlots(run: usize): usize {
  const countA = load<u32>(run, 8);
  const need = max(countA, rowCount()) + COPY_SLACK;
  if (need > scratchCapacity) {
    const cap = grownCapacity(scratchCapacity, need);
    scratch = regrow(scratch, scratchCapacity, cap, 4);
    scratchCapacity = cap;
  }
  runCopy(run, scratch);
  return scratch;
}

/** The run's first worker at or past shard slot `from`, as a shard slot (NO_SLOT: none); allocates nothing. */
export function runNext(run: usize, from: u32): u32 {
  const countA = load<u32>(run, 8);
  const wordA = load<u32>(run, 12);
  const countB = load<u32>(run, 16);
  const wordB = load<u32>(run, 20);
  // An empty set B holds nothing (setHas of count 0).
  let slot = setNext(countA, wordA, from);
  while (slot != NO_SLOT && setHas(countB, wordB, slot)) slot = setNext(countA, wordA, slot + 1);
  return slot;
}

/** The model slot of one of the run's shard slots. */
@inline
export function runModelSlot(run: usize, slot: u32): u32 {
  const map = load<u32>(run, 24);
  return slot * (map >> 16) + (map & 0xffff);
}

/** Whether model slot w is one of the run's workers. */
export function runHolds(run: usize, w: u32): bool {
  const map = load<u32>(run, 24);
  const stride = map >> 16;
  const offset = map & 0xffff;
  if (w < offset || (w - offset) % stride != 0) return false;
  const slot = (w - offset) / stride;
  return setHas(load<u32>(run, 8), load<u32>(run, 12), slot) && !setHas(load<u32>(run, 16), load<u32>(run, 20), slot);
}

/** Adds the runs' workers to the projection ledgerProject started, as it adds pairs (ledger/projection.ts). */
export function projectRuns(runs: usize, count: u32): void {
  for (let r: u32 = 0; r < count; r++) {
    const run = runAt(runs, r);
    projectOverlaps(runSlots(run), 0, runWorkers(run), runDepth(run));
  }
}
