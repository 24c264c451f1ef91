// The ranks of part pairs merging asked about lately: a direct-mapped cache
// keyed by the two parts' tokens, in front of the vocabulary (bpe-vocab.ts
// mergedRank). Long pieces ask about the same few pairs again and again, and a
// hit costs one load where the vocabulary's tables cost several. Two tokens
// fix the bytes and the split, so a hit is always right.
//
//   slots  ENTRIES x 16 bytes: u64 (left token << 32 | right token), u32 rank;
//          all ones when empty (no token pair is (NO_RANK, NO_RANK))
import { alloc } from './alloc';
import { mergedRank } from './bpe-vocab';

const ENTRIES: usize = 1 << 12;
const INDEX_SHIFT: u64 = 64 - 12;

let slots: usize = 0;

/** Empties the cache (a new vocabulary or rule gives pairs other ranks). Allocates. */
export function pairCacheClear(): void {
  if (slots == 0) slots = alloc(ENTRIES << 4);
  memory.fill(slots, 0xff, ENTRIES << 4);
}

/**
 * The rank of the part from `start` (token `ta`) merged with its successor
 * (from `split`, token `tb`, up to `end`), the bytes at `p`; pairCacheClear
 * must have run since the vocabulary was loaded.
 */
@inline
export function cachedPairRank(p: usize, start: u32, split: u32, end: u32, ta: u32, tb: u32): u32 {
  const key = (<u64>ta << 32) | <u64>tb;
  const slot = slots + ((<usize>(<u32>((key * 0x9e3779b97f4a7c15) >> INDEX_SHIFT))) << 4);
  if (load<u64>(slot) == key) return load<u32>(slot, 8);
  const rank = mergedRank(p + start, end - start, split - start);
  store<u64>(slot, key);
  store<u32>(slot, rank, 8);
  return rank;
}
