// The priority queue of pair keys (rank << 32 | start) that byte-pair merging
// pops in order. Keys come in batches: the pairs of a fresh piece, then
// the pairs merges changed. Each batch is sorted once into a run; a binary
// heap holds one entry per run, keyed by the run's next key. Merging sweeps
// through ranks mostly in order, so the top run usually stays on top and a
// pop costs a comparison or two instead of a full sift through every key.
//
// Buffers (grow-only):
//   keys     u64, every batch back to back (a run is a stretch of it)
//   sorting  u64 scratch for radix sorting a batch
//   cursor, end  u32 per run: its next key and its end, as indices into keys
//   heapKey u64, heapRun u32: the heap of runs
import { alloc, release } from './alloc';
import { setU32, setU64, u32At, u64At } from './bpe-columns';
import { grownCapacity } from './grow';

export const NO_KEY: u64 = 0xffffffffffffffff;

/** Batches up to this many keys are insertion-sorted; larger ones radix-sorted. */
const INSERTION_MAX: u32 = 32;

let keys: usize = 0;
let sorting: usize = 0;
let keyCapacity: u32 = 0;
let keyCount: u32 = 0;
let batchStart: u32 = 0;
let cursor: usize = 0;
let end: usize = 0;
let heapKey: usize = 0;
let heapRun: usize = 0;
let runCapacity: u32 = 0;
let runCount: u32 = 0;
let heapSize: u32 = 0;
let counts: usize = 0;
/** Radix digits are at most this wide. */
const DIGIT_MAX: u32 = 11;


/**
 * Empties the queue and makes room for merging `n` bytes: n - 1 first pairs,
 * two more per merge (at most n - 1 merges), and a run per batch. Allocates.
 */
export function queueReset(n: u32): void {
  const needKeys: u32 = 3 * n + 1;
  if (needKeys > keyCapacity) {
    if (keys) {
      release(keys, <usize>keyCapacity << 3);
      release(sorting, <usize>keyCapacity << 3);
    }
    keyCapacity = grownCapacity(1024, needKeys);
    keys = alloc(<usize>keyCapacity << 3);
    sorting = alloc(<usize>keyCapacity << 3);
  }
  const needRuns: u32 = n + 2;
  if (needRuns > runCapacity) {
    if (cursor) {
      release(cursor, <usize>runCapacity << 2);
      release(end, <usize>runCapacity << 2);
      release(heapKey, <usize>runCapacity << 3);
      release(heapRun, <usize>runCapacity << 2);
    }
    runCapacity = grownCapacity(1024, needRuns);
    cursor = alloc(<usize>runCapacity << 2);
    end = alloc(<usize>runCapacity << 2);
    heapKey = alloc(<usize>runCapacity << 3);
    heapRun = alloc(<usize>runCapacity << 2);
  }
  if (counts == 0) counts = alloc(<usize>(1 << DIGIT_MAX) << 2);
  keyCount = batchStart = runCount = heapSize = 0;
}

/** Adds a key to the batch being gathered. */
@inline
export function queueAdd(key: u64): void {
  setU64(keys, keyCount++, key);
}

/** Stably sorts `count` keys by the `width` bits at `shift`, from `from` into `to`. */
function radixPass(from: usize, to: usize, count: u32, shift: u64, width: u32): void {
  const buckets: u32 = 1 << width;
  const mask: u32 = buckets - 1;
  memory.fill(counts, 0, <usize>buckets << 2);
  for (let i: u32 = 0; i < count; i++) {
    const d = <u32>(u64At(from, i) >> shift) & mask;
    setU32(counts, d, u32At(counts, d) + 1);
  }
  let sum: u32 = 0;
  for (let d: u32 = 0; d < buckets; d++) {
    const c = u32At(counts, d);
    setU32(counts, d, sum);
    sum += c;
  }
  for (let i: u32 = 0; i < count; i++) {
    const key = u64At(from, i);
    const d = <u32>(key >> shift) & mask;
    const at = u32At(counts, d);
    setU32(counts, d, at + 1);
    setU64(to, at, key);
  }
}

@inline
function bitsOf(x: u32): u32 {
  return 32 - clz(x);
}

/**
 * Sorts the gathered batch into a run and puts it in the queue. `rankOnly`:
 * the batch was added in ascending start order, so a stable sort by rank
 * alone orders it. `maxRank` and `maxStart` bound the keys' two halves.
 */
export function queueSeal(rankOnly: bool, maxRank: u32, maxStart: u32): void {
  const start = batchStart;
  const count = keyCount - start;
  batchStart = keyCount;
  if (count == 0) return;
  const base = keys + (<usize>start << 3);
  let sorted = true;
  for (let i: u32 = 1; i < count; i++) {
    if (u64At(base, i) < u64At(base, i - 1)) {
      sorted = false;
      break;
    }
  }
  if (!sorted) {
    if (count <= INSERTION_MAX) {
      for (let i: u32 = 1; i < count; i++) {
        const key = u64At(base, i);
        let j = i;
        while (j > 0 && u64At(base, j - 1) > key) {
          setU64(base, j, u64At(base, j - 1));
          j--;
        }
        setU64(base, j, key);
      }
    } else {
      // LSD passes over the bits that vary: the start's, then the rank's.
      let from = base;
      let to = sorting;
      for (let half: u32 = rankOnly ? 1 : 0; half < 2; half++) {
        const bits = bitsOf(half == 0 ? maxStart : maxRank);
        const passes = (bits + DIGIT_MAX - 1) / DIGIT_MAX;
        if (passes == 0) continue;
        const width = (bits + passes - 1) / passes;
        for (let pass: u32 = 0; pass < passes; pass++) {
          radixPass(from, to, count, <u64>(half * 32 + pass * width), width);
          const t = from;
          from = to;
          to = t;
        }
      }
      if (from != base) memory.copy(base, from, <usize>count << 3);
    }
  }
  const run = runCount++;
  setU32(cursor, run, start);
  setU32(end, run, start + count);
  heapInsert(u64At(base, 0), run);
}

function heapInsert(key: u64, run: u32): void {
  let i = heapSize++;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const up = u64At(heapKey, parent);
    if (up <= key) break;
    setU64(heapKey, i, up);
    setU32(heapRun, i, u32At(heapRun, parent));
    i = parent;
  }
  setU64(heapKey, i, key);
  setU32(heapRun, i, run);
}

/** Moves (key, run) down from the root to its place. */
@inline
function heapSiftRoot(key: u64, run: u32): void {
  const size = heapSize;
  let i: u32 = 0;
  while (true) {
    let child: u32 = 2 * i + 1;
    if (child >= size) break;
    let c = u64At(heapKey, child);
    if (child + 1 < size) {
      const d = u64At(heapKey, child + 1);
      if (d < c) {
        c = d;
        child++;
      }
    }
    if (c >= key) break;
    setU64(heapKey, i, c);
    setU32(heapRun, i, u32At(heapRun, child));
    i = child;
  }
  setU64(heapKey, i, key);
  setU32(heapRun, i, run);
}

/** The smallest key, or NO_KEY when the queue is empty. */
@inline
export function queuePeek(): u64 {
  return heapSize > 0 ? u64At(heapKey, 0) : NO_KEY;
}

/** Removes the smallest key (the queue must not be empty). Inlined: merging pops about twice per merge. */
@inline
export function queuePop(): void {
  const run = u32At(heapRun, 0);
  const at = u32At(cursor, run) + 1;
  if (at < u32At(end, run)) {
    setU32(cursor, run, at);
    heapSiftRoot(u64At(keys, at), run);
    return;
  }
  heapSize--;
  if (heapSize > 0) heapSiftRoot(u64At(heapKey, heapSize), u32At(heapRun, heapSize));
}
