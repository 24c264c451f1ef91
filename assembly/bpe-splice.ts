// Byte-pair merging of a long piece in short windows, spliced where the
// result is proven to be the whole piece's.
//
// Why it is exact. Call a token sequence a *cover* of the piece when its
// tokens' bytes, one after another, are the piece's, and call two tokens
// *joined* when merging the first's bytes followed by the second's gives
// exactly those two tokens. A cover whose tokens each come out of some merge
// (merging its bytes alone gives the token) and whose neighbours are all
// joined is the merge of the whole piece: take the first merge of the whole
// piece that crosses a boundary of the cover; until then each token's bytes
// merged as they do alone, so the same merge, ahead of the same competitors
// or fewer, is also the first to cross in that pair's bytes merged alone, and
// the pair would not be joined. This uses only that whether two parts merge,
// and at what rank, depends on the two parts (the leftmost of equal ranks
// first), so it holds under tiktoken's rule and under a merge list alike.
//
// So the piece is merged window by window: a window of 64 bytes from a start
// s is merged alone (a SIMD scan for the lowest pair over scratch that stays
// in L1, cheaper per merge than the heap's queue), its tokens are kept up to
// its last boundary at least 8 bytes (the context) before its end (the cut),
// and the next window starts at the cut. Neighbours within a window's kept
// tokens are joined (they are neighbours in that window's merge); the one new
// pair at each cut is merged alone to check that it is joined. When it is
// not, the window before the cut is merged again twice as wide (more context
// for its end), and a window where no boundary leaves the context (a long
// token) is too, as long as it starts past every window widened before;
// otherwise the piece is refused and the caller merges it whole
// (bpe-merge.ts). Widened starts only increase, so a piece costs at most a few
// passes of windows before any refusal. A short piece (up to SHORT_MAX bytes)
// is one window, merged the same way (mergeWindow).
//
// A merge is a chain of dependent steps (the scan reads the keys the merge
// before it wrote), so the scan keeps four running minimums and the position
// rides in the key: the minimum names the pair without a second pass.
//
// Scratch (u32 per byte of a span, SPAN_MAX + 16, allocated once):
//   next    part i runs to next[i]
//   prev    the part before part i
//   keys    rank << 9 | i for part i merged with its successor (keyOf), so
//           the lowest key is the lowest rank and, of equal ranks, the
//           leftmost: the scan's minimum names the pair to merge. NO_RANK for
//           none, and for every position that starts no part (so the scan
//           skips it). A vocabulary whose ranks do not fit 23 bits is refused.
//   tokens  each part's token
import { alloc } from './alloc';
import { setU32, u32At } from './bpe-columns';
import { cachedPairRank } from './bpe-pair-cache';
import { byteRank, NO_RANK, pairRank2, vocabHighestRank } from './bpe-vocab';

/** Bytes merged at a time, and bytes of a window past its cut (spliceTune). */
let windowBytes: u32 = 64;
let context: u32 = 8;
/** The widest window spliceTune allows. */
const WINDOW_MAX: u32 = 128;
/** A window merged again is twice as wide; the check at a cut merges a token of each window beside it. */
const SPAN_MAX: u32 = 4 * WINDOW_MAX;
const COLUMN: usize = <usize>(SPAN_MAX + 16) << 2;
/** Bits of a key that hold the position; ranks must leave the key below NO_RANK. */
const POSITION_BITS: u32 = 9;
const RANK_LIMIT: u32 = (1 << (32 - POSITION_BITS)) - 1;

let next: usize = 0;
let prev: usize = 0;
let keys: usize = 0;
let tokens: usize = 0;
let spliced: u32 = 0;
let refused: u32 = 0;
let widenings: u32 = 0;

/** The key of the pair at `i` merging at `rank` (NO_RANK: none). */
@inline
function keyOf(rank: u32, i: u32): u32 {
  return rank == NO_RANK ? NO_RANK : (rank << POSITION_BITS) | i;
}

/**
 * The lowest of the `n` (rounded up to 16; the padding holds NO_RANK) u32 at
 * `at`. Four running minimums: each merge waits on this scan, and one chain
 * of minimums would take a step per vector.
 */
@inline
function lowestKey(at: usize, n: u32): u32 {
  let a = i32x4.splat(-1);
  let b = a;
  let c = a;
  let d = a;
  for (let i: u32 = 0; i < n; i += 16) {
    const v = at + (<usize>i << 2);
    a = i32x4.min_u(a, v128.load(v));
    b = i32x4.min_u(b, v128.load(v, 16));
    c = i32x4.min_u(c, v128.load(v, 32));
    d = i32x4.min_u(d, v128.load(v, 48));
  }
  const low = i32x4.min_u(i32x4.min_u(a, b), i32x4.min_u(c, d));
  return min(min(<u32>i32x4.extract_lane(low, 0), <u32>i32x4.extract_lane(low, 1)), min(<u32>i32x4.extract_lane(low, 2), <u32>i32x4.extract_lane(low, 3)));
}

/**
 * Sets keys[i] by rewriting the whole vector holding it: the scan loads
 * vectors, and a vector load over a narrower store still in flight waits for
 * that store to reach the cache instead of taking its value.
 */
@inline
function setKey(ky: usize, i: u32, key: u32): void {
  const at = ky + (<usize>(i & ~3) << 2);
  const lane = i32x4.eq(i32x4.splat(i & 3), i32x4(0, 1, 2, 3));
  v128.store(at, v128.bitselect(i32x4.splat(key), v128.load(at), lane));
}

/** Merges the `n` (1..SPAN_MAX) bytes at `p` alone; the parts are left in the scratch, the first at 0. */
function mergeSpan(p: usize, n: u32): void {
  if (next == 0) {
    next = alloc(COLUMN);
    prev = alloc(COLUMN);
    keys = alloc(COLUMN);
    tokens = alloc(COLUMN);
  }
  // Locals: the compiled loop would reload the globals at every access.
  const nx = next;
  const pv = prev;
  const ky = keys;
  const tk = tokens;
  for (let i: u32 = 0; i < n; i++) {
    setU32(nx, i, i + 1);
    setU32(pv, i, i - 1);
    setU32(tk, i, byteRank(p + i));
    setU32(ky, i, i + 1 < n ? keyOf(pairRank2(p + i), i) : NO_RANK);
  }
  for (let i = n; i < n + 16; i++) setU32(ky, i, NO_RANK);
  while (true) {
    const key = lowestKey(ky, n);
    if (key == NO_RANK) return;
    const best = key >> POSITION_BITS;
    const i = key & ((1 << POSITION_BITS) - 1);
    const j = u32At(nx, i);
    const k = u32At(nx, j);
    setU32(tk, i, best);
    setKey(ky, j, NO_RANK);
    setU32(nx, i, k);
    if (k < n) {
      setU32(pv, k, i);
      setKey(ky, i, keyOf(cachedPairRank(p, i, k, u32At(nx, k), best, u32At(tk, k)), i));
    } else {
      setKey(ky, i, NO_RANK);
    }
    if (i > 0) {
      const h = u32At(pv, i);
      setKey(ky, h, keyOf(cachedPairRank(p, h, i, k, u32At(tk, h), best), h));
    }
  }
}

/** Whether the token on bytes [x, c) and the one on [c, y) at `p` are joined. */
function joined(p: usize, x: u32, c: u32, y: u32): bool {
  mergeSpan(p + x, y - x);
  return u32At(next, 0) == c - x && u32At(next, c - x) == y - x;
}

/**
 * Merges the `n` bytes at `p` window by window, writing ranks at
 * out[count..]; returns the new count, or NO_RANK when a cut cannot be proven
 * (what was written then counts for nothing). A window whose cut finds no
 * boundary, or the window before a cut that fails its check, is merged again
 * twice as wide, if it starts past every window merged wide before; else the
 * piece is refused.
 */
export function mergeSpliced(p: usize, n: u32, out: usize, count: u32): u32 {
  if (vocabHighestRank() >= RANK_LIMIT) {
    refused++;
    return NO_RANK;
  }
  // The window starts at s; the token before it spans [lastStart, s).
  let s: u32 = 0;
  let lastStart: u32 = 0;
  // The window before, to merge again from: its start, the token before it, the count before it.
  let backStart: u32 = 0;
  let backLast: u32 = 0;
  let backCount = count;
  let widened = false;
  // Each window merged wide starts past the one before, so widening ends.
  let widest: i64 = -1;
  while (true) {
    const m = min(n - s, widened ? 2 * windowBytes : windowBytes);
    mergeSpan(p + s, m);
    const firstEnd = s + u32At(next, 0);
    let cut = m;
    if (s + m < n) {
      cut = 0;
      for (let i = u32At(next, 0); i < m && i + context <= m; i = u32At(next, i)) cut = i;
      if (cut == 0) {
        if (<i64>s <= widest) break;
        widenings++;
        widest = <i64>s;
        widened = true;
        continue;
      }
    }
    const before = count;
    let last: u32 = 0;
    for (let i: u32 = 0; i < cut; i = u32At(next, i)) {
      setU32(out, count++, u32At(tokens, i));
      last = i;
    }
    if (s > 0 && !joined(p, lastStart, s, firstEnd)) {
      if (<i64>backStart <= widest) break;
      widenings++;
      widest = <i64>backStart;
      widened = true;
      s = backStart;
      lastStart = backLast;
      count = backCount;
      continue;
    }
    backStart = s;
    backLast = lastStart;
    backCount = before;
    widened = false;
    lastStart = s + last;
    s += cut;
    if (s >= n) {
      spliced++;
      return count;
    }
  }
  refused++;
  return NO_RANK;
}

/**
 * Merges the `n` (2..WINDOW_MAX) bytes at `p` as one window, writing ranks at
 * out[count..]; returns the new count, or NO_RANK when the vocabulary's ranks
 * do not fit the keys (nothing is written then).
 */
export function mergeWindow(p: usize, n: u32, out: usize, count: u32): u32 {
  if (vocabHighestRank() >= RANK_LIMIT) return NO_RANK;
  mergeSpan(p, n);
  for (let i: u32 = 0; i < n; i = u32At(next, i)) setU32(out, count++, u32At(tokens, i));
  return count;
}

/** Sets the window (2..WINDOW_MAX bytes) and the context past its cut (below the window). Results do not depend on them. */
export function spliceTune(window: u32, past: u32): void {
  windowBytes = min(max(window, 2), WINDOW_MAX);
  context = min(past, windowBytes - 1);
}

/** Since the core started: 0 pieces merged here, 1 pieces refused, 2 windows merged again wider. */
export function spliceStats(which: u32): u32 {
  return which == 0 ? spliced : which == 1 ? refused : widenings;
}
