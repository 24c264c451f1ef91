// The byte-pair vocabulary of one encoding: a map from a byte string to its
// token's rank, built once from the token list. One vocabulary per Core
// (module globals).
//
// Layout of the load buffer (bpeVocabInput), for `count` tokens and `bytes`
// bytes of token text:
//   +0                     offsets u32 x (count + 1): token i is blob[offsets[i]..offsets[i+1])
//   +4 (count + 1)         ranks   u32 x count
//   +4 (2 count + 1)       blob    `bytes` bytes, then 8 bytes of zero padding
// The buffer is kept: long tokens are compared against the blob.
//
// Lookups are latency-bound (a lookup per merge step), so each touches one
// cache line where it can, and the tables for short strings (the ones merging
// asks about most) are small enough to stay in cache:
//   single  u32 x 256    rank of each byte
//   double  u32 x 65536  rank of each two-byte string (NO_RANK: none), index = b0 | b1 << 8
//   triple, quad  u64 slots (bytes as a u32 << 32 | rank; rank NO_RANK marks an
//           empty slot), linear probing, filled up to 80%: tokens of 3 and 4 bytes
//   words   2^19 bits (64 KiB): bit wordBit(bytes, length) set for every token
//           in `triple` and `quad`. Most 3- and 4-byte strings merging asks
//           about are no token (on random letters 85% of them), and an
//           unsuccessful probe of a table that full runs long; the filter
//           turns most of them away from a table that stays in cache
//   slots   16 bytes each, linear probing, at most half full: tokens of 5 bytes or more
//     +0  u64  the token's first 8 bytes, zero-padded (a shorter token is all of it)
//     +8  u32  rank
//     +12 u32  length (low 8 bits; 0 marks an empty slot) | blob offset << 8
//   filter  2^21 bits: bit (hash >> 11) set for every token in `slots`, so most
//           longer strings that are no token (the common case while merging)
//           are turned away without touching the slots
// A token of up to 8 bytes is found by comparing one word, a longer one by
// the word and then its tail in the blob.
import { alloc, release } from './alloc';
import { grownCapacity } from './grow';

/** The rank of "no such token". */
export const NO_RANK: u32 = 0xffffffff;

const SLOT: usize = 16;
const FILTER_BYTES: usize = 1 << 18;
const WORD_FILTER_BYTES: usize = 1 << 16;
/** Lengths and blob offsets share a u32 in the slot. */
const MAX_TOKEN_BYTES: u32 = 255;
const MAX_BLOB_BYTES: u32 = 1 << 24;

let input: usize = 0;
let inputBytes: usize = 0;
let offsets: usize = 0;
let ranks: usize = 0;
let blob: usize = 0;
let tokenCount: u32 = 0;
let slots: usize = 0;
let slotMask: u32 = 0;
let single: usize = 0;
let double: usize = 0;
let triple: usize = 0;
let tripleMask: u32 = 0;
let quad: usize = 0;
let quadMask: u32 = 0;
let filter: usize = 0;
let wordFilter: usize = 0;
/** Longest token, in bytes: a longer string is no token without a lookup. */
let longest: u32 = 0;
let highestRank: u32 = 0;

/** Reserves the load buffer for `count` tokens of `bytes` bytes in all; returns its address. Allocates. */
export function vocabInput(count: u32, bytes: u32): usize {
  vocabRelease();
  tokenCount = count;
  inputBytes = (<usize>count * 2 + 1) * 4 + <usize>bytes + 8;
  input = alloc(inputBytes);
  memory.fill(input, 0, inputBytes);
  offsets = input;
  ranks = input + (<usize>count + 1) * 4;
  blob = ranks + <usize>count * 4;
  return input;
}

function vocabRelease(): void {
  if (input) release(input, inputBytes);
  if (slots) release(slots, (<usize>slotMask + 1) * SLOT);
  if (single) release(single, 256 << 2);
  if (double) release(double, 65536 << 2);
  if (filter) release(filter, FILTER_BYTES);
  if (wordFilter) release(wordFilter, WORD_FILTER_BYTES);
  if (triple) release(triple, (<usize>tripleMask + 1) << 3);
  if (quad) release(quad, (<usize>quadMask + 1) << 3);
  input = slots = single = double = filter = wordFilter = triple = quad = 0;
  tripleMask = quadMask = 0;
  inputBytes = 0;
  tokenCount = slotMask = longest = highestRank = 0;
}

/** The first min(n, 8) bytes at `p` as a word, zero-padded; reads 8 bytes (buffers carry 8 bytes of padding). */
@inline
function headWord(p: usize, n: u32): u64 {
  const word = load<u64>(p);
  return n >= 8 ? word : word & ((<u64>1 << (<u64>n << 3)) - 1);
}

/**
 * Hash of `n` bytes at `p` whose first word is `head`: the length, the first
 * word and, past 8 bytes, the last word. O(1) whatever the length; tokens
 * that agree on all three only share a probe sequence (compares tell them apart).
 */
@inline
function hashBytes(p: usize, n: u32, head: u64): u32 {
  let h: u64 = (head ^ (<u64>n * 0x9e3779b97f4a7c15)) * 0xff51afd7ed558ccd;
  if (n > 8) {
    h ^= h >> 29;
    h = (h ^ load<u64>(p + n - 8)) * 0xc4ceb9fe1a85ec53;
  }
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93;
  return <u32>(h >> 32);
}

/** Whether the `n` bytes at `a` and `b` are equal; reads whole words (both buffers are padded). */
@inline
function sameBytes(a: usize, b: usize, n: u32): bool {
  for (let at: u32 = 0; at < n; at += 8) {
    if (headWord(a + at, n - at) != headWord(b + at, n - at)) return false;
  }
  return true;
}

@inline
function slotAt(i: u32): usize {
  return slots + <usize>i * SLOT;
}

@inline
function bitHas(bits: usize, bit: u32): bool {
  return (load<u8>(bits + (bit >> 3)) & (1 << (bit & 7))) != 0;
}

@inline
function bitSet(bits: usize, bit: u32): void {
  const byte = bits + (bit >> 3);
  store<u8>(byte, <u32>load<u8>(byte) | (<u32>1 << (bit & 7)));
}

/** The slot holding the `n` (>= 5) bytes at `p`, or 0. */
function findSlot(p: usize, n: u32): usize {
  const head = headWord(p, n);
  const hash = hashBytes(p, n, head);
  if (!bitHas(filter, hash >> 11)) return 0;
  let i = hash & slotMask;
  while (true) {
    const s = slotAt(i);
    const meta = load<u32>(s, 12);
    if (meta == 0) return 0;
    if ((meta & 0xff) == n && load<u64>(s) == head) {
      if (n <= 8 || sameBytes(blob + (meta >> 8) + 8, p + 8, n - 8)) return s;
    }
    i = (i + 1) & slotMask;
  }
}

@inline
function wordSlot(word: u32, mask: u32): u32 {
  return <u32>((<u64>word * 0x9e3779b97f4a7c15) >> 40) & mask;
}

/** The bit of the word filter for the `n`-byte (3 or 4) string `word`. */
@inline
function wordBit(word: u32, n: u32): u32 {
  return <u32>((((<u64>n << 32) | <u64>word) * 0xc4ceb9fe1a85ec53) >> 45);
}

/** The rank of the 3- or 4-byte string `word` in a word table, or NO_RANK. */
@inline
function wordRank(table: usize, mask: u32, word: u32): u32 {
  let i = wordSlot(word, mask);
  while (true) {
    const slot = load<u64>(table + (<usize>i << 3));
    const rank = <u32>slot;
    if (rank == NO_RANK || <u32>(slot >> 32) == word) return rank;
    i = (i + 1) & mask;
  }
}

function wordInsert(table: usize, mask: u32, word: u32, rank: u32): bool {
  let i = wordSlot(word, mask);
  while (true) {
    const at = table + (<usize>i << 3);
    const slot = load<u64>(at);
    if (<u32>slot == NO_RANK) {
      store<u64>(at, (<u64>word << 32) | <u64>rank);
      return true;
    }
    if (<u32>(slot >> 32) == word) return false;
    i = (i + 1) & mask;
  }
}

/** The rank of the byte at `p` (every byte is a token). */
@inline
export function byteRank(p: usize): u32 {
  return load<u32>(single + (<usize>load<u8>(p) << 2));
}

/** The rank of the two bytes at `p`, or NO_RANK. */
@inline
export function pairRank2(p: usize): u32 {
  return load<u32>(double + (<usize>load<u16>(p) << 2));
}

/** The rank of the token whose bytes are the `n` bytes at `p`, or NO_RANK. */
export function rankOf(p: usize, n: u32): u32 {
  if (n <= 4) {
    if (n == 2) return load<u32>(double + (<usize>load<u16>(p) << 2));
    if (n == 3) {
      const word = load<u32>(p) & 0xffffff;
      return bitHas(wordFilter, wordBit(word, 3)) ? wordRank(triple, tripleMask, word) : NO_RANK;
    }
    if (n == 4) {
      const word = load<u32>(p);
      return bitHas(wordFilter, wordBit(word, 4)) ? wordRank(quad, quadMask, word) : NO_RANK;
    }
    return n == 1 ? load<u32>(single + (<usize>load<u8>(p) << 2)) : NO_RANK;
  }
  if (n > longest) return NO_RANK;
  const s = findSlot(p, n);
  return s == 0 ? NO_RANK : load<u32>(s, 8);
}

/**
 * Builds the lookup tables from the loaded tokens. Returns the longest token's
 * length in bytes, or 0 when the vocabulary is unusable: offsets out of order
 * or past the blob, an empty token or one over 255 bytes, a blob over 16 MiB,
 * a rank equal to NO_RANK, two tokens with the same bytes, or a byte value
 * that is no token by itself (every byte must be one, so any input can be
 * encoded). Allocates.
 */
export function vocabBuild(count: u32, bytes: u32): u32 {
  if (count != tokenCount || input == 0 || bytes >= MAX_BLOB_BYTES) return fail();
  longest = 0;
  let previous: u32 = 0;
  if (load<u32>(offsets) != 0) return fail();
  for (let i: u32 = 0; i < count; i++) {
    const end = load<u32>(offsets + ((<usize>i + 1) << 2));
    if (end <= previous || end > bytes || end - previous > MAX_TOKEN_BYTES) return fail();
    const rank = load<u32>(ranks + (<usize>i << 2));
    if (rank == NO_RANK) return fail();
    if (rank > highestRank) highestRank = rank;
    if (end - previous > longest) longest = end - previous;
    previous = end;
  }
  let threes: u32 = 0;
  let fours: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const n = load<u32>(offsets + ((<usize>i + 1) << 2)) - load<u32>(offsets + (<usize>i << 2));
    if (n == 3) threes++;
    else if (n == 4) fours++;
  }
  tripleMask = wordTableSize(threes) - 1;
  triple = alloc((<usize>tripleMask + 1) << 3);
  memory.fill(triple, 0xff, (<usize>tripleMask + 1) << 3);
  quadMask = wordTableSize(fours) - 1;
  quad = alloc((<usize>quadMask + 1) << 3);
  memory.fill(quad, 0xff, (<usize>quadMask + 1) << 3);
  const capacity = halfFull(count - threes - fours);
  slotMask = capacity - 1;
  slots = alloc(<usize>capacity * SLOT);
  memory.fill(slots, 0, <usize>capacity * SLOT);
  single = alloc(256 << 2);
  memory.fill(single, 0xff, 256 << 2);
  double = alloc(65536 << 2);
  memory.fill(double, 0xff, 65536 << 2);
  filter = alloc(FILTER_BYTES);
  memory.fill(filter, 0, FILTER_BYTES);
  wordFilter = alloc(WORD_FILTER_BYTES);
  memory.fill(wordFilter, 0, WORD_FILTER_BYTES);
  for (let i: u32 = 0; i < count; i++) {
    const start = load<u32>(offsets + (<usize>i << 2));
    const n = load<u32>(offsets + ((<usize>i + 1) << 2)) - start;
    const p = blob + start;
    const rank = load<u32>(ranks + (<usize>i << 2));
    if (n == 3) {
      if (!wordInsert(triple, tripleMask, load<u32>(p) & 0xffffff, rank)) return fail();
      bitSet(wordFilter, wordBit(load<u32>(p) & 0xffffff, 3));
    }
    if (n == 4) {
      if (!wordInsert(quad, quadMask, load<u32>(p), rank)) return fail();
      bitSet(wordFilter, wordBit(load<u32>(p), 4));
    }
    if (n >= 5) {
      if (findSlot(p, n) != 0) return fail();
      const head = headWord(p, n);
      const hash = hashBytes(p, n, head);
      bitSet(filter, hash >> 11);
      let s = hash & slotMask;
      while (load<u32>(slotAt(s), 12) != 0) s = (s + 1) & slotMask;
      const slot = slotAt(s);
      store<u64>(slot, head);
      store<u32>(slot, rank, 8);
      store<u32>(slot, n | (start << 8), 12);
    }
    if (n == 1) {
      if (load<u32>(single + (<usize>load<u8>(p) << 2)) != NO_RANK) return fail();
      store<u32>(single + (<usize>load<u8>(p) << 2), rank);
    }
    if (n == 2) {
      if (load<u32>(double + (<usize>load<u16>(p) << 2)) != NO_RANK) return fail();
      store<u32>(double + (<usize>load<u16>(p) << 2), rank);
    }
  }
  for (let b = 0; b < 256; b++) if (load<u32>(single + (<usize>b << 2)) == NO_RANK) return fail();
  return longest;
}

/**
 * A power-of-two size for a word table of `count` entries, filled up to 80%:
 * a probe rarely leaves the slot's cache line (8 slots), and the smaller
 * tables stay in cache while long pieces are merged.
 */
function wordTableSize(count: u32): u32 {
  return grownCapacity(16, count + (count >> 2));
}

/** A power-of-two table size at least twice `count` (and at least 16). */
function halfFull(count: u32): u32 {
  return grownCapacity(16, count * 2);
}

function fail(): u32 {
  vocabRelease();
  return 0;
}

/** The highest rank of the vocabulary. */
export function vocabHighestRank(): u32 {
  return highestRank;
}

/** Whether a vocabulary is built. */
export function vocabReady(): bool {
  return slots != 0;
}

/** The number of tokens loaded (index order of the load buffer). */
export function vocabTokenCount(): u32 {
  return tokenCount;
}

/** The rank of token `i` (load order). */
export function vocabTokenRank(i: u32): u32 {
  return load<u32>(ranks + (<usize>i << 2));
}

/** Where the bytes of token `i` (load order) start; 8 readable bytes follow the blob. */
export function vocabTokenBytes(i: u32): usize {
  return blob + <usize>load<u32>(offsets + (<usize>i << 2));
}

/** The length in bytes of token `i` (load order). */
export function vocabTokenLength(i: u32): u32 {
  return load<u32>(offsets + ((<usize>i + 1) << 2)) - load<u32>(offsets + (<usize>i << 2));
}
