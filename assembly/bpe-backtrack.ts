// Byte-pair encoding of long pieces in time about linear in their length,
// with exactly the result of tiktoken's rule (bpe-merge.ts): the
// "backtracking" encoder.
//
// Why it works. Call a token *reachable* when merging its own bytes gives the
// token itself; merging any piece yields reachable tokens only (the merges
// inside a final part are those of its bytes merged alone). Call a pair of
// tokens (a, b) *joinable* when merging a's bytes followed by b's gives
// [a, b]. In the result of merging a piece every neighbouring pair is
// joinable, and conversely a cover of the piece by reachable tokens whose
// neighbours are all joinable is the result: the first merge across one of
// its boundaries would also happen in that pair's two tokens merged alone.
// So the result is the only such cover, and it is found by a depth-first
// search: at each position take the longest reachable token the rest of the
// piece starts with, keep it if it joins the previous token, else try the
// next shorter one; when none is left, the position is a dead end (marked,
// never entered again) and the previous token gives way to its next shorter
// one. Each prefix of the piece has at most one such cover, so a position is
// entered with the same previous token whenever it is entered, and each
// position's candidates are tried once: O(n x token length) lookups at worst.
//
// Whether (a, b) joins is decided from each token's *split*, the two tokens
// its last merge joined (found at load). When every token ranks above the two
// it is split into (checked at load), merging a and b's bytes performs the
// merges of both tokens' split trees in rank order, and the pair straddling
// the boundary changes only when the last part left of it (a node on a's
// right spine) or the first part right of it (on b's left spine) is merged.
// Walking back from (a, b): the straddle must be no token at all, and each
// earlier straddle must lose to the merge that replaced it, which is the
// later of the two tokens' own merges (ties: the right one, being further
// right, merges last). Losing to a merge on the left means ranking no lower
// (the leftmost of equal ranks merges first); on the right, ranking higher.
//
// Tables (per rank, built by backtrackBuild; rank == the token's merge priority):
//   splits    u64: the split (left | right << 24; zero for single bytes), the
//             length (bits 48..55; 0 for unreachable tokens and unused ranks)
//             and the left half's length (bits 56..63): one load per step of a walk
//   shorter   u32: the longest reachable token that is a proper prefix (NO_RANK: none)
// The byte trie of the reachable tokens; each node has a token word: the token
// its path spells (NO_TOKEN: none), bit 31 set when the node has children.
//   shallow   u32 per node of one or two bytes (1 + b; SHALLOW_TWO + (b0 | b1 << 8)): its token word
//   deep      the deeper nodes: u64 slots of a hash table, (parent << 8 | byte) << 32 | token word,
//             0 when empty; a node is named by its slot (DEEP + slot)
// Scratch:
//   holds     straddlesHold's answers by token pair
//   dead      bits per position of the piece being encoded: dead ends
//   reaches   u8 per token of the piece: the longest candidate at its start
import { alloc, release } from './alloc';
import { setU32, setU64, u32At, u64At } from './bpe-columns';
import { grownCapacity } from './grow';
import { mergesTo } from './bpe-merge';
import { NO_RANK, rankOf, vocabHighestRank, vocabTokenBytes, vocabTokenCount, vocabTokenLength, vocabTokenRank } from './bpe-vocab';

let rankCapacity: u32 = 0;
let splits: usize = 0;
let shorter: usize = 0;
let shallow: usize = 0;
let deep: usize = 0;
let deepMask: u32 = 0;
let deepUsed: u32 = 0;
let dead: usize = 0;
/** u8 per token of the piece being encoded: the longest candidate at its start. */
let reaches: usize = 0;
let reachBytes: usize = 0;
let ready = false;
/** Pieces encoded here since the core started. */
let pieces: u32 = 0;
/** Answers of straddlesHold by token pair: 2^HOLD_BITS slots of (x << 32 | y), bit 63 set when it holds. */
let holds: usize = 0;
const HOLD_BITS: u32 = 14;
const HOLD_BYTES: usize = (<usize>1 << HOLD_BITS) << 3;
const HOLDS: u64 = 1 << 63;
/** The pairs one walk passes (a walk undoes at most every merge of two tokens). */
let path: usize = 0;
/** Deep nodes are numbered in 24 bits (a slot's key keeps 8 for the byte). */
const MAX_DEEP: u32 = 1 << 23;

/** Frees the tables; long pieces take the heap merge until the next backtrackBuild. */
export function backtrackRelease(): void {
  if (splits) {
    release(splits, <usize>rankCapacity << 3);
    release(shorter, <usize>rankCapacity << 2);
  }
  if (shallow) release(shallow, <usize>DEEP << 2);
  if (deep) release(deep, (<usize>deepMask + 1) << 3);
  splits = shorter = shallow = deep = 0;
  rankCapacity = deepMask = deepUsed = 0;
  ready = false;
}

/** Pieces encoded by backtrackEncode since the core started. */
export function backtrackPieces(): u32 {
  return pieces;
}

/** Whether long pieces can take this encoder (the vocabulary passed backtrackBuild's checks). */
export function backtrackReady(): bool {
  return ready;
}

@inline
function lengthOf(token: u32): u32 {
  return <u32>load<u8>(splits + (<usize>token << 3) + 6);
}

/** The slot of pair (x, y) in the cache of straddlesHold's answers. */
@inline
function holdSlot(key: u64): usize {
  return holds + ((<usize>(<u32>((key * 0x9e3779b97f4a7c15) >> <u64>(64 - HOLD_BITS)))) << 3);
}

/**
 * Whether merging the bytes of x (ending at `mid`) followed by those of y
 * (from `mid`) at `p` reaches [x, y] without merging across `mid` before: the
 * walk back over the straddles described above, leaving out the last one.
 * The answer depends on the two tokens only, and every pair the walk passes
 * through has the same answer as the first; all of them are cached by pair
 * (the walks of long tokens share their short tails).
 */
function straddlesHold(p: usize, mid: u32, x: u32, y: u32): bool {
  let xSplit = u64At(splits, x);
  let ySplit = u64At(splits, y);
  let xs = mid - (<u32>(xSplit >> 48) & 0xff);
  let ye = mid + (<u32>(ySplit >> 48) & 0xff);
  let passed: u32 = 0;
  let answer = true;
  while (true) {
    const key = (<u64>x << 32) | <u64>y;
    const held = load<u64>(holdSlot(key));
    if ((held & ~HOLDS) == key) {
      answer = held != key;
      break;
    }
    setU64(path, passed++, key);
    const xSplits = xs + 1 < mid;
    const ySplits = ye > mid + 1;
    let limit = x;
    if (xSplits && (!ySplits || x > y)) {
      // x's merge came last: before it, its right half stood left of the boundary.
      xs += <u32>(xSplit >> 56);
      x = <u32>(xSplit >> 24) & 0xffffff;
      xSplit = u64At(splits, x);
    } else if (ySplits) {
      limit = y + 1;
      ye = mid + <u32>(ySplit >> 56);
      y = <u32>ySplit & 0xffffff;
      ySplit = u64At(splits, y);
    } else {
      break;
    }
    // NO_RANK (no token) is above every limit.
    if (rankOf(p + xs, ye - xs) < limit) {
      answer = false;
      break;
    }
  }
  for (let i: u32 = 0; i < passed; i++) {
    const key = u64At(path, i);
    store<u64>(holdSlot(key), answer ? key | HOLDS : key);
  }
  return answer;
}

/**
 * Whether tokens a (ending at `mid`) and b (from `mid`) at `p` merge to
 * [a, b]; no reachable token from a's start is longer than `reach`. (If a
 * and b together spell a token that is not reachable, merging them cannot
 * reach [a, b]: it would go on to that token. So only reachable ones need
 * looking up.)
 */
@inline
function joins(p: usize, mid: u32, a: u32, b: u32, reach: u32): bool {
  const start = mid - lengthOf(a);
  const n = mid + lengthOf(b) - start;
  return (n > reach || rankOf(p + start, n) == NO_RANK) && straddlesHold(p, mid, a, b);
}

/**
 * Finds the split of token `t` (the `n` bytes at `b`, n >= 2) among splits
 * into two reachable tokens of lower rank; records it and returns true, or
 * false when there is none.
 */
function findSplit(b: usize, n: u32, t: u32): bool {
  for (let k: u32 = 1; k < n; k++) {
    const l = rankOf(b, k);
    if (l >= t || lengthOf(l) == 0) continue;
    const r = rankOf(b + k, n - k);
    if (r >= t || lengthOf(r) == 0) continue;
    if (!straddlesHold(b, k, l, r)) continue;
    setU64(splits, t, <u64>l | (<u64>r << 24) | (<u64>n << 48) | (<u64>k << 56));
    return true;
  }
  return false;
}

/** Trie nodes spelling one byte b are 1 + b, two bytes b0 b1 are SHALLOW_TWO + (b0 | b1 << 8). */
const SHALLOW_TWO: u32 = 257;
/** Deeper nodes are DEEP + their slot. */
const DEEP: u32 = SHALLOW_TWO + 65536;
/** A node's token word: the token (NO_TOKEN: none) in the low 31 bits, this bit set when the node has children. */
const HAS_CHILDREN: u32 = 0x80000000;
const NO_TOKEN: u32 = 0x7fffffff;

/**
 * Where the child of `node` by `byte` is looked for first: a node's children
 * lie side by side (a run of letters reads one or two cache lines), nodes
 * apart.
 */
@inline
function deepSlot(node: u32, byte: u32): u32 {
  return (<u32>((<u64>node * 0x9e3779b97f4a7c15) >> 40) + byte) & deepMask;
}

/** The slot of the child of `node` by `byte`, or that of an empty slot where it would go. */
@inline
function childSlot(node: u32, byte: u32): usize {
  const key = (node << 8) | byte;
  let i = deepSlot(node, byte);
  while (true) {
    const at = deep + (<usize>i << 3);
    const slot = load<u64>(at);
    if (<u32>(slot >> 32) == key || slot == 0) return at;
    i = (i + 1) & deepMask;
  }
}

/** The address of the token word of `node`. */
@inline
function wordOf(node: u32): usize {
  return node < DEEP ? shallow + (<usize>node << 2) : deep + (<usize>(node - DEEP) << 3);
}

/**
 * Adds the path of the `n` bytes at `b` to the trie, ending at token `t`;
 * false when the deep table is too full (the caller rebuilds it larger).
 */
function trieAdd(b: usize, n: u32, t: u32): bool {
  let node: u32 = 1 + <u32>load<u8>(b);
  for (let i: u32 = 1; i < n; i++) {
    const parent = wordOf(node);
    store<u32>(parent, load<u32>(parent) | HAS_CHILDREN);
    const byte = <u32>load<u8>(b + i);
    if (i == 1) {
      node = SHALLOW_TWO + ((<u32>load<u8>(b) | (byte << 8)));
      continue;
    }
    const at = childSlot(node, byte);
    if (load<u64>(at) == 0) {
      if ((deepUsed + 1) * 10 > (deepMask + 1) * 7) return false;
      store<u64>(at, (<u64>((node << 8) | byte) << 32) | <u64>NO_TOKEN);
      deepUsed++;
    }
    node = DEEP + <u32>((at - deep) >> 3);
  }
  const word = wordOf(node);
  store<u32>(word, (load<u32>(word) & HAS_CHILDREN) | t);
  return true;
}

/** The token at `node` (NO_RANK: none). */
@inline
function tokenAt(node: u32): u32 {
  const t = load<u32>(wordOf(node)) & NO_TOKEN;
  return t == NO_TOKEN ? NO_RANK : t;
}

/** The longest reachable token that is a proper prefix of the `n` (>= 2) bytes at `b` (a path of the trie). */
function longestProperPrefix(b: usize, n: u32): u32 {
  let node: u32 = 1 + <u32>load<u8>(b);
  let best = tokenAt(node);
  for (let i: u32 = 1; i + 1 < n; i++) {
    const byte = <u32>load<u8>(b + i);
    node = i == 1 ? SHALLOW_TWO + (<u32>load<u8>(b) | (byte << 8)) : DEEP + <u32>((childSlot(node, byte) - deep) >> 3);
    const t = tokenAt(node);
    if (t != NO_RANK) best = t;
  }
  return best;
}

/**
 * Derives the tables from the built vocabulary (bpe-vocab.ts). Leaves the
 * encoder unused (long pieces take the heap merge) when ranks are sparse, or
 * some token is reached by merging yet ranks below a token it is split into.
 * Allocates.
 */
export function backtrackBuild(): void {
  backtrackRelease();
  const count = vocabTokenCount();
  const highest = vocabHighestRank();
  // Per-rank tables for a vocabulary with ranks far apart would be mostly empty.
  // Splits name ranks in 24 bits.
  if (highest >= 2 * count + 256 || highest >= 1 << 24) return;
  rankCapacity = highest + 1;
  if (holds == 0) {
    holds = alloc(HOLD_BYTES);
    path = alloc(512 << 3);
  }
  // No pair is (NO_RANK, NO_RANK).
  memory.fill(holds, 0xff, HOLD_BYTES);
  splits = alloc(<usize>rankCapacity << 3);
  memory.fill(splits, 0, <usize>rankCapacity << 3);
  shorter = alloc(<usize>rankCapacity << 2);
  memory.fill(shorter, 0xff, <usize>rankCapacity << 2);
  const indexOf = alloc(<usize>rankCapacity << 2);
  memory.fill(indexOf, 0xff, <usize>rankCapacity << 2);
  for (let i: u32 = 0; i < count; i++) setU32(indexOf, vocabTokenRank(i), i);
  const out = alloc(256 << 2);
  let usable = true;
  // In rank order, so a token's candidate halves (ranked lower) are settled before it.
  for (let t: u32 = 0; t < rankCapacity && usable; t++) {
    const i = u32At(indexOf, t);
    if (i == NO_RANK) continue;
    const b = vocabTokenBytes(i);
    const n = vocabTokenLength(i);
    if (n == 1) setU64(splits, t, <u64>1 << 48);
    else if (!findSplit(b, n, t) && mergesTo(b, n, t, out)) usable = false;
  }
  release(out, 256 << 2);
  if (usable) usable = buildTrie(indexOf);
  release(indexOf, <usize>rankCapacity << 2);
  if (!usable) {
    backtrackRelease();
    return;
  }
  ready = true;
}

/** Builds the trie of the reachable tokens and their shorter prefixes; false when it does not fit. */
function buildTrie(indexOf: usize): bool {
  shallow = alloc(<usize>DEEP << 2);
  // About two deep nodes per token in the tiktoken vocabularies: the table starts under half full.
  let slots = grownCapacity(1 << 16, 4 * vocabTokenCount());
  while (true) {
    for (let node: u32 = 0; node < DEEP; node++) setU32(shallow, node, NO_TOKEN);
    deepMask = slots - 1;
    deep = alloc(<usize>slots << 3);
    memory.fill(deep, 0, <usize>slots << 3);
    deepUsed = 0;
    let fits = true;
    for (let t: u32 = 0; t < rankCapacity && fits; t++) {
      const n = lengthOf(t);
      if (n != 0) fits = trieAdd(vocabTokenBytes(u32At(indexOf, t)), n, t);
    }
    if (fits) break;
    release(deep, <usize>slots << 3);
    deep = 0;
    // Slot numbers name the nodes, so a fuller table is built again from the tokens.
    if (slots >= MAX_DEEP) return false;
    slots <<= 1;
  }
  for (let t: u32 = 0; t < rankCapacity; t++) {
    const n = lengthOf(t);
    if (n > 1) setU32(shorter, t, longestProperPrefix(vocabTokenBytes(u32At(indexOf, t)), n));
  }
  return true;
}

/** The longest reachable token the `n - at` bytes at `p + at` start with. */
@inline
function longestAt(p: usize, at: u32, n: u32): u32 {
  const first = <u32>load<u8>(p + at);
  // Every byte is a reachable token.
  let word = u32At(shallow, 1 + first);
  let best = word & NO_TOKEN;
  if (at + 1 == n || (word & HAS_CHILDREN) == 0) return best;
  let node = SHALLOW_TWO + (first | (<u32>load<u8>(p + at + 1) << 8));
  word = u32At(shallow, node);
  if ((word & NO_TOKEN) != NO_TOKEN) best = word & NO_TOKEN;
  for (let i = at + 2; i < n && (word & HAS_CHILDREN) != 0; i++) {
    const slot = childSlot(node, <u32>load<u8>(p + i));
    const held = load<u64>(slot);
    if (held == 0) break;
    node = DEEP + <u32>((slot - deep) >> 3);
    word = <u32>held;
    if ((word & NO_TOKEN) != NO_TOKEN) best = word & NO_TOKEN;
  }
  return best;
}

/** Bytes of a piece's start that backtrackSuits looks at. */
const SAMPLE: u32 = 256;
let pairSeen: usize = 0;

/**
 * Whether the `n` bytes at `p` should take this encoder rather than the heap
 * merge (both give the same ranks). Measured on 1 MiB pieces: a piece that
 * repeats a few units (runs of spaces, "abab", a repeated phrase of CJK or
 * emoji) goes several times faster here, where the heap merges every copy
 * again; on varied text (random letters or characters) every lookup here
 * misses the cache and the heap is faster. The sign used is how many distinct
 * byte pairs the piece's first SAMPLE bytes hold: at most half of those
 * pairs.
 */
export function backtrackSuits(p: usize, n: u32): bool {
  if (!ready) return false;
  if (pairSeen == 0) {
    pairSeen = alloc(65536 >> 3);
    memory.fill(pairSeen, 0, 65536 >> 3);
  }
  const end = min(n, SAMPLE) - 1;
  let distinct: u32 = 0;
  for (let i: u32 = 0; i < end; i++) {
    const pair = <u32>load<u16>(p + i);
    const byte = pairSeen + (pair >> 3);
    const bit = <u32>1 << (pair & 7);
    const held = <u32>load<u8>(byte);
    if ((held & bit) == 0) {
      distinct++;
      store<u8>(byte, held | bit);
    }
  }
  for (let i: u32 = 0; i < end; i++) store<u8>(pairSeen + (<usize>load<u16>(p + i) >> 3), 0);
  return distinct * 2 <= end;
}

@inline
function isDead(at: u32): bool {
  return (load<u8>(dead + (at >> 3)) & (1 << (at & 7))) != 0;
}

@inline
function setDead(at: u32): void {
  const byte = dead + (at >> 3);
  store<u8>(byte, <u32>load<u8>(byte) | (<u32>1 << (at & 7)));
}

/**
 * Encodes the `n` bytes at `p` (one piece, no token by itself), writing ranks
 * at out[count..]; returns the new count. Allocates (the dead-end bits).
 */
export function backtrackEncode(p: usize, n: u32, out: usize, count: u32): u32 {
  const bytes = (<usize>n >> 3) + 1;
  if (<usize>n + 1 > reachBytes) {
    if (dead) {
      release(dead, (reachBytes >> 3) + 1);
      release(reaches, reachBytes);
    }
    reachBytes = <usize>grownCapacity(8192, n + 1);
    dead = alloc((reachBytes >> 3) + 1);
    reaches = alloc(reachBytes);
  }
  memory.fill(dead, 0, bytes);
  pieces++;
  let top = count;
  let at: u32 = 0;
  let candidate = longestAt(p, 0, n);
  // The longest candidate here: no pair with the previous token makes a longer reachable token.
  let reach = lengthOf(candidate);
  while (at < n) {
    if (candidate == NO_RANK) {
      // Every token from here failed: a dead end. The one before gives way to a shorter one.
      // (At the piece's start a single byte always leads on, so there is a token to go back to.)
      setDead(at);
      const last = u32At(out, --top);
      at -= lengthOf(last);
      candidate = u32At(shorter, last);
      reach = <u32>load<u8>(reaches + <usize>(top - count));
      continue;
    }
    const end = at + lengthOf(candidate);
    if (!isDead(end) && (top == count || joins(p, at, u32At(out, top - 1), candidate, <u32>load<u8>(reaches + <usize>(top - 1 - count))))) {
      store<u8>(reaches + <usize>(top - count), <u8>reach);
      setU32(out, top++, candidate);
      at = end;
      if (at < n) {
        candidate = longestAt(p, at, n);
        reach = lengthOf(candidate);
      }
    } else {
      candidate = u32At(shorter, candidate);
    }
  }
  return top;
}
