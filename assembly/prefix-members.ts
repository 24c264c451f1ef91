import { blockCap, blockCapacity, blockGive, blockTake } from './prefix-memory';
import { markSlot } from './prefix-slots';

// The members of a node: the worker slots holding its block. The node record
// (prefix-nodes.ts) keeps the count in its info word and, at +28, either the
// one member's slot (count 1) or the address of a member block (count >= 2):
//   sorted array: header u32 = capacity c, then c u32 slots, the first
//                 `count` ascending
//   bitmap:       header u32 = BITMAP | words w, then w u32 words; bit s
//                 set when slot s is a member
// A set switches to the bitmap when a sorted array that must grow would be at
// least as large as a bitmap covering its highest slot (about one member in 32
// slots), and back once fewer than a quarter as many members as words remain.
// Blocks come from the index's slabs (prefix-memory.ts).
//
// Adding can fail for want of memory, and then changes nothing; removing
// never fails: a block that cannot be exchanged for a smaller one stays.

export const INFO: usize = 20;
export const MEMBERS: usize = 28;
export const COUNT_MASK: u32 = 0xffffff;
const BITMAP: u32 = 0x80000000;
export const NO_SLOT: u32 = 0xffffffff;
/** Entries memberCopy may write past the members it copies. */
export const COPY_SLACK: u32 = 8;

@inline
export function memberCount(p: usize): u32 {
  return load<u32>(p, INFO) & COUNT_MASK;
}

@inline
function setCount(p: usize, count: u32): void {
  store<u32>(p, (load<u32>(p, INFO) & ~COUNT_MASK) | count, INFO);
}

@inline
function block(p: usize): usize {
  return <usize>load<u32>(p, MEMBERS);
}

/** Whether a member block is a bitmap (for a node with two or more members). */
@inline
export function isBitmap(b: usize): bool {
  return (load<u32>(b) & BITMAP) != 0;
}

/** Position of the first array element >= slot. */
function lowerBound(b: usize, count: u32, slot: u32): u32 {
  let lo: u32 = 0;
  let hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (load<u32>(b + 4 + (<usize>mid << 2)) < slot) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function memberHas(p: usize, slot: u32): bool {
  return setHas(memberCount(p), load<u32>(p, MEMBERS), slot);
}

/**
 * Whether a member set, given as a node keeps it (count, and the MEMBERS
 * word: the one slot, or the member block), holds slot. The set-level
 * functions (set*) read a set where it is, in a node or copied from one
 * into another core (a match answer's runs, prefix-match.ts).
 */
export function setHas(count: u32, word: u32, slot: u32): bool {
  if (count <= 1) return count == 1 && word == slot;
  const b = <usize>word;
  if (isBitmap(b)) {
    const w = slot >> 5;
    return w < blockCap(b) && ((load<u32>(b + 4 + (<usize>w << 2)) >> (slot & 31)) & 1) != 0;
  }
  const at = lowerBound(b, count, slot);
  return at < count && load<u32>(b + 4 + (<usize>at << 2)) == slot;
}

/** Adds a slot that is not a member; false (nothing changed) when there is no memory. */
export function memberAdd(p: usize, slot: u32): bool {
  const count = memberCount(p);
  if (count == 0) {
    store<u32>(p, slot, MEMBERS);
  } else if (count == 1) {
    const b = blockTake(2);
    if (b == 0) return false;
    const other = load<u32>(p, MEMBERS);
    store<u32>(b, min(other, slot), 4);
    store<u32>(b, max(other, slot), 8);
    store<u32>(p, <u32>b, MEMBERS);
  } else {
    const b = block(p);
    if (isBitmap(b)) {
      if (!bitmapAdd(p, b, slot)) return false;
    } else if (!arrayAdd(p, b, count, slot)) {
      return false;
    }
  }
  setCount(p, count + 1);
  return true;
}

function bitmapAdd(p: usize, b: usize, slot: u32): bool {
  let bits = b;
  const words = blockCap(b);
  if (slot >> 5 >= words) {
    bits = blockTake((slot >> 5) + 1);
    if (bits == 0) return false;
    const wider = blockCap(bits);
    memory.copy(bits + 4, b + 4, <usize>words << 2);
    memory.fill(bits + 4 + (<usize>words << 2), 0, <usize>(wider - words) << 2);
    store<u32>(bits, BITMAP | wider);
    blockGive(b);
    store<u32>(p, <u32>bits, MEMBERS);
  }
  const w = bits + 4 + (<usize>(slot >> 5) << 2);
  store<u32>(w, load<u32>(w) | (1 << (slot & 31)));
  return true;
}

function arrayAdd(p: usize, b: usize, count: u32, slot: u32): bool {
  const at = lowerBound(b, count, slot);
  if (count < blockCap(b)) {
    const from = b + 4 + (<usize>at << 2);
    memory.copy(from + 4, from, <usize>(count - at) << 2);
    store<u32>(from, slot);
    return true;
  }
  const highest = max(slot, load<u32>(b + 4 + (<usize>(count - 1) << 2)));
  const words = (highest >> 5) + 1;
  if (count + 1 >= words) {
    // As a bitmap the set takes no more room than a grown array would.
    const bits = blockTake(words);
    if (bits == 0) return false;
    const cap = blockCap(bits);
    store<u32>(bits, BITMAP | cap);
    memory.fill(bits + 4, 0, <usize>cap << 2);
    for (let i: u32 = 0; i < count; i++) setBit(bits, load<u32>(b + 4 + (<usize>i << 2)));
    setBit(bits, slot);
    blockGive(b);
    store<u32>(p, <u32>bits, MEMBERS);
    return true;
  }
  const grown = blockTake(count + 1);
  if (grown == 0) return false;
  memory.copy(grown + 4, b + 4, <usize>at << 2);
  store<u32>(grown + 4 + (<usize>at << 2), slot);
  memory.copy(grown + 8 + (<usize>at << 2), b + 4 + (<usize>at << 2), <usize>(count - at) << 2);
  blockGive(b);
  store<u32>(p, <u32>grown, MEMBERS);
  return true;
}

@inline
function setBit(bits: usize, slot: u32): void {
  const w = bits + 4 + (<usize>(slot >> 5) << 2);
  store<u32>(w, load<u32>(w) | (1 << (slot & 31)));
}

/** Removes a member slot. Never fails. */
export function memberRemove(p: usize, slot: u32): void {
  const count = memberCount(p);
  const left = count - 1;
  setCount(p, left);
  if (count == 1) {
    store<u32>(p, 0, MEMBERS);
    return;
  }
  const b = block(p);
  if (isBitmap(b)) {
    const w = b + 4 + (<usize>(slot >> 5) << 2);
    store<u32>(w, load<u32>(w) & ~(1 << (slot & 31)));
    if (left == 1) {
      store<u32>(p, memberNext(p, 0, left + 1), MEMBERS);
      blockGive(b);
    } else if (left * 4 <= blockCap(b)) {
      toArray(p, b, left);
    }
    return;
  }
  const at = lowerBound(b, count, slot);
  const from = b + 4 + (<usize>at << 2);
  memory.copy(from, from + 4, <usize>(left - at) << 2);
  if (left == 1) {
    store<u32>(p, load<u32>(b, 4), MEMBERS);
    blockGive(b);
    return;
  }
  const cap = blockCap(b);
  if (left * 2 <= cap && blockCapacity(left) < cap) {
    const smaller = blockTake(left);
    if (smaller == 0) return;
    memory.copy(smaller + 4, b + 4, <usize>left << 2);
    blockGive(b);
    store<u32>(p, <u32>smaller, MEMBERS);
  }
}

// A sparse bitmap becomes a sorted array again, when memory allows.
function toArray(p: usize, bits: usize, count: u32): void {
  const arr = blockTake(count);
  if (arr == 0) return;
  let k: u32 = 0;
  const words = blockCap(bits);
  for (let w: u32 = 0; w < words; w++) {
    let word = load<u32>(bits + 4 + (<usize>w << 2));
    while (word != 0) {
      store<u32>(arr + 4 + (<usize>(k++) << 2), (w << 5) | ctz(word));
      word &= word - 1;
    }
  }
  blockGive(bits);
  store<u32>(p, <u32>arr, MEMBERS);
}

/**
 * The smallest member slot >= from, or NO_SLOT. `count` is the node's member
 * count (passed, so a caller changing it may still walk). For slow paths:
 * an array step is a binary search.
 */
export function memberNext(p: usize, from: u32, count: u32): u32 {
  return setNext(count, load<u32>(p, MEMBERS), from);
}

/** memberNext of a set given as (count, MEMBERS word). */
export function setNext(count: u32, word: u32, from: u32): u32 {
  if (count <= 1) return count == 1 && word >= from ? word : NO_SLOT;
  const b = <usize>word;
  if (isBitmap(b)) {
    const words = blockCap(b);
    let w = from >> 5;
    if (w >= words) return NO_SLOT;
    let bits = load<u32>(b + 4 + (<usize>w << 2)) & (0xffffffff << (from & 31));
    while (bits == 0) {
      if (++w >= words) return NO_SLOT;
      bits = load<u32>(b + 4 + (<usize>w << 2));
    }
    return (w << 5) | ctz(bits);
  }
  const at = lowerBound(b, count, from);
  return at < count ? load<u32>(b + 4 + (<usize>at << 2)) : NO_SLOT;
}

/** The position of a member slot among a set's members in ascending order (setCopy's order); the set given as (count, MEMBERS word). */
function setRank(count: u32, word: u32, slot: u32): u32 {
  if (count <= 1) return 0;
  const b = <usize>word;
  if (!isBitmap(b)) return lowerBound(b, count, slot);
  let rank: u32 = 0;
  const last = slot >> 5;
  for (let w: u32 = 0; w < last; w++) rank += popcnt(load<u32>(b + 4 + (<usize>w << 2)));
  return rank + popcnt(load<u32>(b + 4 + (<usize>last << 2)) & ((1 << (slot & 31)) - 1));
}

/**
 * Writes the members to `out` (u32 each) as `slot * stride + offset`, and
 * may write up to COPY_SLACK entries past them;
 * returns how many.
 */
export function memberCopy(p: usize, out: usize, stride: u32, offset: u32): u32 {
  return setCopy(memberCount(p), load<u32>(p, MEMBERS), out, stride, offset);
}

/** memberCopy of a set given as (count, MEMBERS word). */
export function setCopy(count: u32, word: u32, out: usize, stride: u32, offset: u32): u32 {
  if (count <= 1) {
    if (count == 1) store<u32>(out, word * stride + offset);
    return count;
  }
  const b = <usize>word;
  if (isBitmap(b)) {
    const words = blockCap(b);
    const dense = count >= words << 3;
    let at = out;
    for (let w: u32 = 0; w < words; w++) at = writeWord(at, load<u32>(b + 4 + (<usize>w << 2)), w << 5, stride, offset, dense);
    return count;
  }
  if (stride == 1 && offset == 0) {
    memory.copy(out, b + 4, <usize>count << 2);
  } else {
    for (let i: u32 = 0; i < count; i++) store<u32>(out + (<usize>i << 2), load<u32>(b + 4 + (<usize>i << 2)) * stride + offset);
  }
  return count;
}

// At most this many left out of a difference are taken out of a copy of the
// whole set by position (their ranks kept here), not by a lookup per member.
const FEW_LEFT_OUT: u32 = 32;
const leftOut: usize = memory.data(<i32>FEW_LEFT_OUT * 4, 4);

/**
 * Writes the members of set a that are not members of set b (b a subset of
 * a; each given as (count, MEMBERS word)) to `out` as `slot * stride +
 * offset`, up to COPY_SLACK entries past them; returns how many.
 */
export function setDiffCopy(countA: u32, wordA: u32, countB: u32, wordB: u32, out: usize, stride: u32, offset: u32): u32 {
  if (countB == 0) return setCopy(countA, wordA, out, stride, offset);
  const left = countA - countB;
  if (left == 0) return 0;
  if (countB >= 2 && isBitmap(<usize>wordA) && isBitmap(<usize>wordB)) {
    // Word by word: the bits of a that b lacks.
    const a = <usize>wordA;
    const b = <usize>wordB;
    const words = blockCap(a);
    const bWords = blockCap(b);
    const dense = left >= words << 3;
    let at = out;
    for (let w: u32 = 0; w < words; w++) {
      let bits = load<u32>(a + 4 + (<usize>w << 2));
      if (w < bWords) bits &= ~load<u32>(b + 4 + (<usize>w << 2));
      at = writeWord(at, bits, w << 5, stride, offset, dense);
    }
    return left;
  }
  if (countB <= FEW_LEFT_OUT) {
    // Copy a, then swap each of b's slots out, highest position first, so the
    // entry pulled in from the end is never one still to be removed.
    setCopy(countA, wordA, out, stride, offset);
    let end = countA;
    let slot = setNext(countB, wordB, 0);
    for (let i: u32 = 0; i < countB; i++) {
      store<u32>(leftOut + (<usize>i << 2), setRank(countA, wordA, slot));
      slot = setNext(countB, wordB, slot + 1);
    }
    for (let i = countB; i > 0; ) {
      const at = load<u32>(leftOut + (<usize>(--i) << 2));
      store<u32>(out + (<usize>at << 2), load<u32>(out + (<usize>(--end) << 2)));
    }
    return left;
  }
  // Copy a's slots (ascending), then keep those b lacks: b an array is
  // walked beside them, a bitmap looked up.
  setCopy(countA, wordA, out, 1, 0);
  let kept: u32 = 0;
  const b = <usize>wordB;
  if (!isBitmap(b)) {
    let j: u32 = 0;
    for (let i: u32 = 0; i < countA; i++) {
      const slot = load<u32>(out + (<usize>i << 2));
      while (j < countB && load<u32>(b + 4 + (<usize>j << 2)) < slot) j++;
      if (j < countB && load<u32>(b + 4 + (<usize>j << 2)) == slot) j++;
      else store<u32>(out + (<usize>(kept++) << 2), slot * stride + offset);
    }
    return left;
  }
  for (let i: u32 = 0; i < countA; i++) {
    const slot = load<u32>(out + (<usize>i << 2));
    if (!setHas(countB, wordB, slot)) store<u32>(out + (<usize>(kept++) << 2), slot * stride + offset);
  }
  return left;
}

/**
 * Writes the set bits of a bitmap word as slots (first + bit) * stride +
 * offset at `at`; returns the address after them. `dense` words go a byte at
 * a time (up to COPY_SLACK entries past the end are written), sparse ones a
 * bit at a time.
 */
@inline
export function writeWord(at: usize, word: u32, first: u32, stride: u32, offset: u32, dense: bool): usize {
  if (word == 0) return at;
  if (dense) return writeBytes(at, word, first, stride, offset);
  const base = first * stride + offset;
  while (word != 0) {
    store<u32>(at, base + ctz(word) * stride);
    at += 4;
    word &= word - 1;
  }
  return at;
}

// For each byte value, the positions of its set bits, ascending, as eight
// u32 lanes times a stride (lanes past its bit count are never used): one
// table for stride 1 and one for the other stride in use (a shard's, see
// prefix-slots.ts), so a byte's slots are two loads and two adds, no multiply.
const POSITIONS_BYTES: usize = 256 * 32;
const UNIT_POSITIONS: usize = memory.data(<i32>POSITIONS_BYTES, 16);
const SCALED_POSITIONS: usize = memory.data(<i32>POSITIONS_BYTES, 16);
let unitReady = false;
let scaledStride: u32 = 0; // 0: not filled

function fillPositions(table: usize, stride: u32): void {
  for (let v: u32 = 0; v < 256; v++) {
    let k: usize = 0;
    for (let bit: u32 = 0; bit < 8; bit++) if ((v >> bit) & 1) store<u32>(table + (<usize>v << 5) + (k++ << 2), bit * stride);
  }
}

function positionsFor(stride: u32): usize {
  if (stride == 1) {
    if (!unitReady) {
      fillPositions(UNIT_POSITIONS, 1);
      unitReady = true;
    }
    return UNIT_POSITIONS;
  }
  if (scaledStride != stride) {
    fillPositions(SCALED_POSITIONS, stride);
    scaledStride = stride;
  }
  return SCALED_POSITIONS;
}

// A byte's scaled positions plus the byte's first slot, stored whole (eight
// lanes); the output advances by the byte's bit count.
function writeBytes(at: usize, word: u32, first: u32, stride: u32, offset: u32): usize {
  const table = positionsFor(stride);
  for (let j: u32 = 0; j < 32; j += 8) {
    const byte = (word >> j) & 0xff;
    const row = table + (<usize>byte << 5);
    const base = i32x4.splat(<i32>((first + j) * stride + offset));
    v128.store(at, i32x4.add(v128.load(row), base));
    v128.store(at, i32x4.add(v128.load(row, 16), base), 16);
    at += <usize>popcnt(byte) << 2;
  }
  return at;
}

/** Marks every member with `stamp` in the slot marks (prefix-slots.ts). */
export function memberMark(p: usize, stamp: u32): void {
  const count = memberCount(p);
  if (count <= 1) {
    if (count == 1) markSlot(load<u32>(p, MEMBERS), stamp);
    return;
  }
  const b = block(p);
  if (isBitmap(b)) {
    const words = blockCap(b);
    for (let w: u32 = 0; w < words; w++) {
      let word = load<u32>(b + 4 + (<usize>w << 2));
      while (word != 0) {
        markSlot((w << 5) | ctz(word), stamp);
        word &= word - 1;
      }
    }
    return;
  }
  for (let i: u32 = 0; i < count; i++) markSlot(load<u32>(b + 4 + (<usize>i << 2)), stamp);
}

/** The node's member block, or 0 with fewer than two members. */
export function memberBlock(p: usize): usize {
  return memberCount(p) >= 2 ? block(p) : 0;
}
