import { grownCapacity, regrow } from '../grow';

// Input staging for hosts with no buffer of their own: `ledgerReserveInput(
// seqCount, overlapCount)` sizes it, `ledgerInputSeqPtr()` holds u64 sequence
// hashes, `ledgerInputSlotsPtr()` and `ledgerInputDepthsPtr()` the u32 pairs of
// a sparse overlap list. Any u64 buffer and u32 pair list in this memory will
// do, e.g. the block hasher's and the prefix index's outputs.

let inputSeq: usize = 0;
let inputSeqCapacity: u32 = 0;
let inputSlots: usize = 0;
let inputDepths: usize = 0;
let inputOverlapCapacity: u32 = 0;

export function ledgerReserveInput(seqCount: u32, overlapCount: u32): void {
  if (seqCount > inputSeqCapacity) {
    const cap = grownCapacity(inputSeqCapacity, seqCount);
    inputSeq = regrow(inputSeq, inputSeqCapacity, cap, 8);
    inputSeqCapacity = cap;
  }
  if (overlapCount > inputOverlapCapacity) {
    const cap = grownCapacity(inputOverlapCapacity, overlapCount);
    inputSlots = regrow(inputSlots, inputOverlapCapacity, cap, 4);
    inputDepths = regrow(inputDepths, inputOverlapCapacity, cap, 4);
    inputOverlapCapacity = cap;
  }
}

export function ledgerInputSeqPtr(): usize {
  return inputSeq;
}

export function ledgerInputSlotsPtr(): usize {
  return inputSlots;
}

export function ledgerInputDepthsPtr(): usize {
  return inputDepths;
}
