// Byte-pair encoding (tiktoken's rule, or a model's merge list) of text cut
// into pieces: each piece is encoded with the vocabulary (bpe-vocab.ts) and
// its token ranks written, in order. Pieces are cut either by the host (any
// encoding: it runs the encoding's regular expression and hands over where
// each piece ends) or here (o200k_base: bpe-split.ts; Qwen2/3 and Llama 3:
// bpe-split-hf.ts), so one call goes from text to tokens.
//
// Buffers (owned here, grow-only):
//   text    UTF-8 bytes, 8 bytes of padding after the capacity (hashing reads
//           whole words). Pointer from bpeTextInput.
//   ends    u32 per piece: the piece's end as a UTF-16 offset into the text
//           (the host's string index), pieces in order and back to back; bit
//           31 set marks text that belongs to no piece (skipped, no tokens).
//           Pointer from bpePieceInput. bpeSplit writes byte offsets here.
//   out     u32 token ranks; capacity at least the text's byte count (a
//           token covers at least one byte). Pointer from bpeOutPtr.
//
// A piece that is a token by itself is that token (as tiktoken does, even
// where merging would split it differently, and as Hugging Face BPE does with
// ignore_merges); otherwise it is merged.
import { alloc, release } from './alloc';
import { backtrackBuild, backtrackEncode, backtrackPieces, backtrackReady, backtrackRelease, backtrackSuits } from './bpe-backtrack';
import { grownCapacity } from './grow';
import { mergeLong, mergeShort, mergesTo, mergeStats, mergeTune, SHORT_MAX } from './bpe-merge';
import { pairCacheClear } from './bpe-pair-cache';
import { mergeSpliced, mergeWindow, spliceStats, spliceTune } from './bpe-splice';
import { splitBegin, splitNext, splitNextBy, NONE } from './bpe-split';
import { matchLlama3, matchQwen } from './bpe-split-hf';
import { NO_RANK, vocabBuild, vocabInput, vocabMarkWhole, vocabMergesBuild, vocabMergesInput, vocabReady, vocabTokenBytes, vocabTokenCount, vocabTokenLength, vocabTokenRank, wholeRank } from './bpe-vocab';

const GAP: u32 = 0x80000000;

let text: usize = 0;
let textCapacity: usize = 0;
let ends: usize = 0;
let endsCapacity: usize = 0;
let out: usize = 0;
let outCapacity: usize = 0;
/** Bytes of text bpeEncodeText encoded (the rest waits for more text). */
let taken: usize = 0;
/** How pieces over SHORT_MAX bytes are merged (bpeLongPieces); a refused splice falls back to the heap. */
const LONG_CHOSEN: u32 = 0;
const LONG_HEAP: u32 = 1;
const LONG_BACKTRACK: u32 = 2;
const LONG_SPLICE: u32 = 3;
let longPieces: u32 = LONG_CHOSEN;
/**
 * The backtracking encoder's tables are built at the first encoding (or
 * bpeStats) after bpeVocabBuild, so that a merge list loaded in between
 * (which turns the encoder off) costs no build.
 */
let backtrackPending = false;

function settleBacktrack(): void {
  if (!backtrackPending) return;
  backtrackPending = false;
  backtrackBuild();
}

/** The pattern the core cuts text by (bpeSplitPattern). */
let pattern: u32 = 0;

/** Where the piece from `s` ends under the chosen pattern, or NONE when it is not settled. */
@inline
function pieceEnd(s: usize): usize {
  if (pattern == 0) return splitNext(s);
  return splitNextBy(s, pattern == 1 ? matchQwen : matchLlama3);
}

/** The pattern bpeEncodeText and bpeSplit cut by: 0 o200k_base (default), 1 Qwen2/3's Split regex, 2 Llama 3's (bpe-split-hf.ts). */
export function bpeSplitPattern(which: u32): void {
  pattern = which <= 2 ? which : 0;
}

/** The vocabulary load buffer for `count` tokens of `bytes` bytes (layout in bpe-vocab.ts). Allocates. */
export function bpeVocabInput(count: u32, bytes: u32): usize {
  return vocabInput(count, bytes);
}

/** Builds the vocabulary from the load buffer; returns the longest token in bytes, 0 if unusable. Allocates. */
export function bpeVocabBuild(count: u32, bytes: u32): u32 {
  const longest = vocabBuild(count, bytes);
  pairCacheClear();
  backtrackRelease();
  backtrackPending = longest != 0;
  return longest;
}

/** The merge-list load buffer for `count` merges (layout in bpe-vocab.ts), 0 without a vocabulary. Allocates. */
export function bpeMergesInput(count: u32): usize {
  return vocabMergesInput(count);
}

/** Switches to the merge-list rule (Hugging Face BPE); `whole` = 1: pieces that are tokens are taken whole. 1 if done, 0 if unusable. Allocates. */
export function bpeMergesBuild(count: u32, whole: u32): u32 {
  if (vocabMergesBuild(count, whole) == 0) return 0;
  pairCacheClear();
  // The backtracking encoder's proof holds for tiktoken's rule (a pair merges
  // by its concatenation's rank), not for a merge list keyed by the split.
  backtrackPending = false;
  if (whole == 0) markWholeTokens();
  return 1;
}

/**
 * Marks every token whose bytes merge to itself: a piece that is such a
 * token is taken whole, as merging would give it (most pieces of ordinary
 * text are one token). Merges each token once. Allocates.
 */
function markWholeTokens(): void {
  const count = vocabTokenCount();
  let longest: u32 = 0;
  for (let i: u32 = 0; i < count; i++) longest = max(longest, vocabTokenLength(i));
  reserveOut(longest);
  for (let i: u32 = 0; i < count; i++) {
    const n = vocabTokenLength(i);
    const rank = vocabTokenRank(i);
    if (n == 1 || mergesTo(vocabTokenBytes(i), n, rank, out)) vocabMarkWhole(rank);
  }
}

/** Makes the text buffer hold `bytes` bytes; returns its address. Allocates. */
export function bpeTextInput(bytes: u32): usize {
  if (<usize>bytes > textCapacity) {
    if (text) release(text, textCapacity + 8);
    textCapacity = <usize>grownCapacity(4096, bytes);
    text = alloc(textCapacity + 8);
    store<u64>(text + textCapacity, 0);
  }
  return text;
}

/** Makes the piece-end buffer hold `count` ends; returns its address. Allocates. */
export function bpePieceInput(count: u32): usize {
  if (<usize>count > endsCapacity) {
    if (ends) release(ends, endsCapacity << 2);
    endsCapacity = <usize>grownCapacity(1024, count);
    ends = alloc(endsCapacity << 2);
  }
  return ends;
}

export function bpeOutPtr(): usize {
  return out;
}

/** Bytes of the UTF-8 sequence led by `lead`, and the UTF-16 units it stands for (low and high half). */
@inline
function sequenceOf(lead: u32): u32 {
  if (lead < 0xe0) return lead < 0x80 ? 0x10001 : 0x10002;
  return lead < 0xf0 ? 0x10003 : 0x20004;
}

/** Makes out hold the ranks of `bytes` bytes of text. Allocates. */
function reserveOut(bytes: usize): void {
  if (bytes <= outCapacity) return;
  if (out) release(out, outCapacity << 2);
  outCapacity = <usize>grownCapacity(4096, <u32>bytes);
  out = alloc(outCapacity << 2);
}

/** Writes the ranks of the `n` (> 0) bytes at `p`, one piece, at out[written..]; returns the new count. */
function encodePiece(p: usize, n: u32, written: u32): u32 {
  const whole = wholeRank(p, n);
  if (whole != NO_RANK) {
    store<u32>(out + (<usize>written << 2), whole);
    return written + 1;
  }
  if (n <= SHORT_MAX) {
    const merged = mergeWindow(p, n, out, written);
    return merged != NO_RANK ? merged : mergeShort(p, n, out, written);
  }
  const backtrack = longPieces == LONG_CHOSEN ? backtrackSuits(p, n) : longPieces == LONG_BACKTRACK && backtrackReady();
  if (backtrack) return backtrackEncode(p, n, out, written);
  if (longPieces == LONG_CHOSEN || longPieces == LONG_SPLICE) {
    const spliced = mergeSpliced(p, n, out, written);
    if (spliced != NO_RANK) return spliced;
  }
  return mergeLong(p, n, out, written);
}

/**
 * Encodes the first `pieces` pieces of the first `bytes` bytes of text into
 * out; returns the number of ranks written. Allocates (out).
 */
export function bpeEncode(bytes: u32, pieces: u32): u32 {
  if (!vocabReady()) return 0;
  settleBacktrack();
  const length = min(<usize>bytes, textCapacity);
  reserveOut(length);
  const count = min(<usize>pieces, endsCapacity);
  let at: usize = 0;
  let unit: u32 = 0;
  let written: u32 = 0;
  for (let k: usize = 0; k < count; k++) {
    const end = load<u32>(ends + (k << 2));
    const stop = end & ~GAP;
    const start = at;
    while (unit < stop && at < length) {
      const seq = sequenceOf(<u32>load<u8>(text + at));
      at += seq & 0xffff;
      unit += seq >> 16;
    }
    if (at > length) at = length;
    if (end & GAP) continue;
    const n = <u32>(at - start);
    if (n != 0) written = encodePiece(text + start, n, written);
  }
  return written;
}

/**
 * Cuts the first `bytes` bytes of text into pieces (the bpeSplitPattern) and encodes
 * them into out; returns the number of ranks written. With `more`, the text
 * goes on past them: a piece that could still change stops the encoding
 * before it (bpeTakenUnits says where). Allocates (out).
 */
export function bpeEncodeText(bytes: u32, more: bool): u32 {
  taken = 0;
  if (!vocabReady()) return 0;
  settleBacktrack();
  const length = min(<usize>bytes, textCapacity);
  reserveOut(length);
  splitBegin(text, length, more);
  let written: u32 = 0;
  let s: usize = 0;
  while (s < length) {
    const e = pieceEnd(s);
    if (e == NONE) break;
    written = encodePiece(text + s, <u32>(e - s), written);
    s = e;
  }
  taken = s;
  return written;
}

/** The UTF-16 units of the text the last bpeEncodeText encoded. */
export function bpeTakenUnits(): u32 {
  let units: u32 = 0;
  for (let at: usize = 0; at < taken; ) {
    const seq = sequenceOf(<u32>load<u8>(text + at));
    at += seq & 0xffff;
    units += seq >> 16;
  }
  return units;
}

/** Cuts the first `bytes` bytes of text into pieces (the bpeSplitPattern); writes each piece's end (a byte offset) to the piece-end buffer and returns their count. Allocates. */
export function bpeSplit(bytes: u32): u32 {
  const length = min(<usize>bytes, textCapacity);
  bpePieceInput(<u32>length);
  splitBegin(text, length, false);
  let count: u32 = 0;
  for (let s: usize = 0; s < length; count++) {
    s = pieceEnd(s);
    store<u32>(ends + (<usize>count << 2), <u32>s);
  }
  return count;
}

/** Sets the window and the context (bytes) long pieces are merged in; results never depend on them. */
export function bpeTune(window: u32, margin: u32): void {
  mergeTune(window, margin);
}

/** Sets the window and the context past its cut (bytes) that the spliced merge uses; results never depend on them. */
export function bpeSpliceTune(window: u32, context: u32): void {
  spliceTune(window, context);
}

/**
 * How pieces over SHORT_MAX bytes are merged: 0 each by the way that suits it
 * (the backtracking encoder where backtrackSuits, else spliced windows), 1
 * all by the heap, 2 all by the backtracking encoder where the vocabulary
 * allows it (else the heap), 3 all by spliced windows (bpe-splice.ts). A
 * piece the splice refuses takes the heap. Results never depend on it.
 */
export function bpeLongPieces(mode: u32): void {
  longPieces = mode <= LONG_SPLICE ? mode : LONG_CHOSEN;
}

/** 0: heap windows merged; 1: long pieces merged again with wider heap windows (a cut failed its check); 2: pieces the backtracking encoder encoded; 3: whether it can (the vocabulary passed its checks); 4: pieces merged in spliced windows; 5: pieces the splice refused (merged by the heap instead); 6: spliced windows merged again wider. */
export function bpeStats(which: u32): u32 {
  settleBacktrack();
  if (which == 2) return backtrackPieces();
  if (which == 3) return backtrackReady() ? 1 : 0;
  if (which >= 4 && which <= 6) return spliceStats(which - 4);
  return mergeStats(which);
}
