// Byte-pair merging of one pre-tokenized piece (bytes at `p`, length `n`)
// into token ranks: while some adjacent pair of parts merges, merge the pair
// of lowest rank, the leftmost of equal ones. Whether a pair merges, and at
// what rank, is the vocabulary's rule (bpe-vocab.ts mergedRank: tiktoken's,
// or a model's merge list). Every path below gives exactly that result; they
// differ in cost.
//
// - mergeShort: parts in an array, the lowest pair found by a scan. O(n^2),
//   for short pieces when the spliced merge's keys cannot hold the
//   vocabulary's ranks (bpe-splice.ts mergeWindow takes them otherwise).
// - runQueue: parts in a linked list, pair keys (rank << 32 | start) in a
//   priority queue (bpe-queue.ts), stale keys skipped when they come up.
//   O(n log n) for any piece.
// - mergeLong: a piece longer than a window is merged window by window, so
//   the list, the queue and the logs stay in cache. The window from b runs
//   over [b, b + window + margin) and is cut at c, the last boundary of its
//   result at or before b + window: no merge crossed c, so the merges left of
//   c are exactly those of [b, c) merged alone. Chunks merged alone give the
//   piece's result when no pair straddling a cut would ever be merged;
//   `straddles` checks that for each cut by replaying, in key order, the
//   merges of the two chunks beside it (each chunk's merges, in their own
//   order, are what the whole piece does as long as nothing straddles). If a
//   cut fails, the piece is merged again with windows four times as wide,
//   and finally in one run.
//
// Scratch (grow-only, reused by every call):
//   short  u32 x 3 x (SHORT_MAX + 1): part starts, pair ranks, part tokens
//   next, prev, pair, token, dirty  u32 x (n + 1) each, marks u8 x (n + 1):
//          the list (part i runs to next[i]), the rank of each part with its
//          successor (NO_RANK: none, or not a part), each part's token, and
//          the pairs changed since they were last queued
//   logs   two merge logs of a window each: u64 key (rank << 32 | start) and
//          u32 end of the part the merge made, positions within the piece
//   pair ranks come through the pair cache (bpe-pair-cache.ts)
import { alloc, release } from './alloc';
import { setU32, setU64, u32At, u64At } from './bpe-columns';
import { grownCapacity } from './grow';
import { cachedPairRank } from './bpe-pair-cache';
import { queueAdd, queuePeek, queuePop, queueReset, queueSeal, NO_KEY } from './bpe-queue';
import { byteRank, mergedRank, NO_RANK, pairRank2, vocabHighestRank } from './bpe-vocab';

/** Pieces up to this many bytes take the scan; longer ones the heap. */
export const SHORT_MAX: u32 = 16;
/** Bytes a window keeps, and the context it looks at past them (mergeTune). */
let windowBytes: u32 = 16384;
let margin: u32 = 256;
let windowRuns: u32 = 0;
let widenings: u32 = 0;
let logCapacity: u32 = 0;

let short: usize = 0;
let next: usize = 0;
let prev: usize = 0;
let pair: usize = 0;
let token: usize = 0;
let dirty: usize = 0;
let marks: usize = 0;
let dirtyCount: u32 = 0;
let dirtyLeast: u64 = 0;
let listCapacity: usize = 0;
let logKeys: usize = 0;
let logEnds: usize = 0;
let logLength: u32 = 0;
let leftKeys: usize = 0;
let leftEnds: usize = 0;
let leftLength: u32 = 0;

@inline
function emit(out: usize, count: u32, rank: u32): u32 {
  if (rank == NO_RANK) return count;
  setU32(out, count, rank);
  return count + 1;
}

@inline
function keyOf(rank: u32, start: u32): u64 {
  return (<u64>rank << 32) | <u64>start;
}

/** Merges `n` (>= 2, <= SHORT_MAX) bytes at `p`; writes ranks at out[count..]; returns the new count. */
export function mergeShort(p: usize, n: u32, out: usize, count: u32): u32 {
  if (short == 0) short = alloc(<usize>(SHORT_MAX + 1) * 12);
  const starts = short;
  const ranks = short + <usize>(SHORT_MAX + 1) * 4;
  const tokens = short + <usize>(SHORT_MAX + 1) * 8;
  // Part i spans starts[i]..starts[i + 1] and is token tokens[i]; ranks[i] is
  // the rank of parts i and i + 1 together.
  let parts = n + 1;
  for (let i: u32 = 0; i <= n; i++) {
    setU32(starts, i, i);
    setU32(ranks, i, i + 2 <= n ? pairRank2(p + i) : NO_RANK);
    setU32(tokens, i, i < n ? byteRank(p + i) : NO_RANK);
  }
  while (parts > 2) {
    let best = NO_RANK;
    let at: u32 = 0;
    for (let i: u32 = 0; i + 2 < parts; i++) {
      const r = u32At(ranks, i);
      if (r < best) {
        best = r;
        at = i;
      }
    }
    if (best == NO_RANK) break;
    // Part at + 1 joins part at; the pairs at - 1 and at now span one part more.
    const s = u32At(starts, at);
    setU32(tokens, at, best);
    const e = u32At(starts, at + 2);
    setU32(ranks, at, at + 3 < parts ? mergedRank(p + s, u32At(starts, at + 3) - s, e - s) : NO_RANK);
    if (at > 0) {
      const b = u32At(starts, at - 1);
      setU32(ranks, at - 1, mergedRank(p + b, e - b, s - b));
    }
    for (let i = at + 1; i + 1 < parts; i++) {
      setU32(starts, i, u32At(starts, i + 1));
      setU32(ranks, i, u32At(ranks, i + 1));
      setU32(tokens, i, u32At(tokens, i + 1));
    }
    parts--;
  }
  for (let i: u32 = 0; i + 1 < parts; i++) count = emit(out, count, u32At(tokens, i));
  return count;
}

function reserveList(n: u32): void {
  const need = <usize>n + 1;
  if (need <= listCapacity) return;
  if (next) {
    release(next, listCapacity << 2);
    release(prev, listCapacity << 2);
    release(pair, listCapacity << 2);
    release(token, listCapacity << 2);
    release(dirty, listCapacity << 2);
    release(marks, listCapacity);
  }
  const cap = <usize>grownCapacity(1024, <u32>need);
  listCapacity = cap;
  next = alloc(cap << 2);
  prev = alloc(cap << 2);
  pair = alloc(cap << 2);
  token = alloc(cap << 2);
  dirty = alloc(cap << 2);
  marks = alloc(cap);
  memory.fill(marks, 0, cap);
}

/** Notes that the pair at `start` changed; its new key enters the queue with the next batch. */
@inline
function touch(start: u32, rank: u32): void {
  if (rank != NO_RANK) {
    const key = keyOf(rank, start);
    if (key < dirtyLeast) dirtyLeast = key;
  }
  if (load<u8>(marks + start) == 0) {
    store<u8>(marks + start, 1);
    setU32(dirty, dirtyCount++, start);
  }
}

/** Moves the changed pairs into the queue as one batch. */
function flush(n: u32): void {
  for (let d: u32 = 0; d < dirtyCount; d++) {
    const start = u32At(dirty, d);
    store<u8>(marks + start, 0);
    const rank = u32At(pair, start);
    if (rank != NO_RANK) queueAdd(keyOf(rank, start));
  }
  dirtyCount = 0;
  dirtyLeast = NO_KEY;
  queueSeal(false, vocabHighestRank(), n);
}

/**
 * Merges the `n` bytes at `p`, leaving the parts in `next` (part i runs to
 * next[i]; n is the end). With `base` != NO_RANK, logs each merge (positions
 * offset by `base`) into the log. A pair whose neighbours merged is not
 * queued at once but marked; the marked pairs enter the queue together just
 * before the queue's next key would pass the least of them, so a pair that
 * changes several times in between is queued once. Allocates.
 */
function runQueue(p: usize, n: u32, base: u32): void {
  reserveList(n);
  queueReset(n);
  logLength = 0;
  dirtyCount = 0;
  dirtyLeast = NO_KEY;
  for (let i: u32 = 0; i < n; i++) {
    setU32(next, i, i + 1);
    setU32(prev, i, i - 1);
    const r = i + 2 <= n ? pairRank2(p + i) : NO_RANK;
    setU32(pair, i, r);
    setU32(token, i, byteRank(p + i));
    if (r != NO_RANK) queueAdd(keyOf(r, i));
  }
  queueSeal(true, vocabHighestRank(), n);
  while (true) {
    let key = queuePeek();
    // Stale: the part was merged away, or its pair changed since the key was queued.
    while (key != NO_KEY && u32At(pair, <u32>key) != <u32>(key >> 32)) {
      queuePop();
      key = queuePeek();
    }
    if (dirtyLeast < key) {
      flush(n);
      continue;
    }
    if (key == NO_KEY) break;
    queuePop();
    const i = <u32>key;
    const j = u32At(next, i);
    const k = u32At(next, j);
    setU32(next, i, k);
    if (k < n) setU32(prev, k, i);
    setU32(pair, j, NO_RANK);
    setU32(token, i, <u32>(key >> 32));
    if (base != NO_RANK) {
      setU64(logKeys, logLength, keyOf(<u32>(key >> 32), base + i));
      setU32(logEnds, logLength++, base + k);
    }
    const ti = <u32>(key >> 32);
    const right = k < n ? cachedPairRank(p, i, k, u32At(next, k), ti, u32At(token, k)) : NO_RANK;
    setU32(pair, i, right);
    touch(i, right);
    if (i > 0) {
      const h = u32At(prev, i);
      const left = cachedPairRank(p, h, i, k, u32At(token, h), ti);
      setU32(pair, h, left);
      touch(h, left);
    }
  }
  // Pairs left marked have no rank: unmark them for the next run.
  for (let d: u32 = 0; d < dirtyCount; d++) store<u8>(marks + u32At(dirty, d), 0);
}

/** Writes the ranks of the parts from `from` up to `to` (part boundaries of the last run) at out[count..]. */
function emitParts(from: u32, to: u32, out: usize, count: u32): u32 {
  for (let i = from; i < to; i = u32At(next, i)) count = emit(out, count, u32At(token, i));
  return count;
}

/**
 * Whether some pair straddling `cut` would be merged, given the merges of the
 * chunk left of it (the left log) and of the chunk right of it (the log), each
 * in the order that chunk merged alone. Replays both in key order, as the
 * whole piece would: the straddling pair (the left chunk's last part and the
 * right chunk's first part) is merged as soon as its key is below both
 * chunks' next merge.
 */
function straddles(p: usize, cut: u32): bool {
  let xStart = cut - 1;
  let yEnd = cut + 1;
  let cross = keyOfPair(p, xStart, cut, yEnd);
  let i: u32 = 0;
  let j: u32 = 0;
  while (true) {
    const left = i < leftLength ? u64At(leftKeys, i) : NO_KEY;
    const right = j < logLength ? u64At(logKeys, j) : NO_KEY;
    if (cross < left && cross < right) return true;
    if (left == NO_KEY && right == NO_KEY) return false;
    if (left < right) {
      if (u32At(leftEnds, i) == cut) {
        xStart = <u32>left;
        cross = keyOfPair(p, xStart, cut, yEnd);
      }
      i++;
    } else {
      if (<u32>right == cut) {
        yEnd = u32At(logEnds, j);
        cross = keyOfPair(p, xStart, cut, yEnd);
      }
      j++;
    }
  }
}

@inline
function keyOfPair(p: usize, start: u32, split: u32, end: u32): u64 {
  const r = mergedRank(p + start, end - start, split - start);
  return r == NO_RANK ? NO_KEY : keyOf(r, start);
}

function reserveLogs(entries: u32): void {
  if (entries <= logCapacity) return;
  if (logKeys) {
    release(logKeys, <usize>logCapacity << 3);
    release(logEnds, <usize>logCapacity << 2);
    release(leftKeys, <usize>logCapacity << 3);
    release(leftEnds, <usize>logCapacity << 2);
  }
  logCapacity = entries;
  logKeys = alloc(<usize>entries << 3);
  logEnds = alloc(<usize>entries << 2);
  leftKeys = alloc(<usize>entries << 3);
  leftEnds = alloc(<usize>entries << 2);
}

/**
 * Merges `n` bytes at `p` window by window (windows of `window` bytes plus
 * MARGIN), writing ranks at out[count..]; returns the new count, or NO_RANK
 * when a cut fails the straddle check (nothing written counts then).
 */
function mergeWindows(p: usize, n: u32, window: u32, out: usize, count: u32): u32 {
  reserveLogs(window + margin);
  let b: u32 = 0;
  while (true) {
    const end = min(n, b + window + margin);
    runQueue(p + b, end - b, b);
    windowRuns++;
    // The cut: the last part boundary at or before b + window, else the first one.
    let cut = end - b;
    if (end < n) {
      cut = u32At(next, 0);
      for (let i = cut; i <= window && i < end - b; i = u32At(next, i)) cut = i;
    }
    // Keep the merges left of the cut, in order.
    let kept: u32 = 0;
    for (let e: u32 = 0; e < logLength; e++) {
      if (u32At(logEnds, e) <= b + cut) {
        setU64(logKeys, kept, u64At(logKeys, e));
        setU32(logEnds, kept++, u32At(logEnds, e));
      }
    }
    logLength = kept;
    if (b > 0 && straddles(p, b)) return NO_RANK;
    count = emitParts(0, cut, out, count);
    b += cut;
    if (b >= n) return count;
    // This chunk's log is the left log of the next cut.
    const keys = leftKeys;
    const ends = leftEnds;
    leftKeys = logKeys;
    leftEnds = logEnds;
    leftLength = logLength;
    logKeys = keys;
    logEnds = ends;
  }
}

/**
 * Merges `n` (> SHORT_MAX) bytes at `p`; writes ranks at out[count..];
 * returns the new count. A piece whose cuts fail the check is merged again
 * with windows four times as wide, and at last in one run. Allocates.
 */
export function mergeLong(p: usize, n: u32, out: usize, count: u32): u32 {
  for (let window = <u64>windowBytes; window + <u64>margin < <u64>n; window <<= 2) {
    const written = mergeWindows(p, n, <u32>window, out, count);
    if (written != NO_RANK) return written;
    widenings++;
  }
  runQueue(p, n, NO_RANK);
  return emitParts(0, n, out, count);
}

/** Sets the window and margin of long merges (bytes; window >= 1). Results do not depend on them. */
export function mergeTune(window: u32, context: u32): void {
  windowBytes = max(window, 1);
  margin = context;
}

/** Windows merged, and pieces merged again with wider windows, since the core started. */
export function mergeStats(which: u32): u32 {
  return which == 0 ? windowRuns : widenings;
}

/** Whether merging the `n` (>= 2) bytes at `p` gives the one token `t`; `out` holds n ranks (scratch). */
export function mergesTo(p: usize, n: u32, t: u32, out: usize): bool {
  const count = n <= SHORT_MAX ? mergeShort(p, n, out, 0) : mergeLong(p, n, out, 0);
  return count == 1 && u32At(out, 0) == t;
}
