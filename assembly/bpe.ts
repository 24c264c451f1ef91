// Byte-pair encoding (tiktoken's rule) of pre-tokenized text: the host splits
// text into pieces with the encoding's regular expression and hands over the
// text as UTF-8 plus where each piece ends; the core encodes every piece with
// the vocabulary (bpe-vocab.ts) and writes the token ranks, in order.
//
// Buffers (owned here, grow-only):
//   text    UTF-8 bytes, 8 bytes of padding after the capacity (hashing reads
//           whole words). Pointer from bpeTextInput.
//   ends    u32 per piece: the piece's end as a UTF-16 offset into the text
//           (the host's string index), pieces in order and back to back; bit
//           31 set marks text that belongs to no piece (skipped, no tokens).
//           Pointer from bpePieceInput.
//   out     u32 token ranks; capacity at least the text's byte count (a
//           token covers at least one byte). Pointer from bpeOutPtr.
//
// A piece that is a token by itself is that token (as tiktoken does, even
// where merging would split it differently); otherwise it is merged.
import { alloc, release } from './alloc';
import { grownCapacity } from './grow';
import { mergeLong, mergeShort, mergeStats, mergeTune, SHORT_MAX } from './bpe-merge';
import { NO_RANK, rankOf, vocabBuild, vocabInput, vocabReady } from './bpe-vocab';

const GAP: u32 = 0x80000000;

let text: usize = 0;
let textCapacity: usize = 0;
let ends: usize = 0;
let endsCapacity: usize = 0;
let out: usize = 0;
let outCapacity: usize = 0;

/** The vocabulary load buffer for `count` tokens of `bytes` bytes (layout in bpe-vocab.ts). Allocates. */
export function bpeVocabInput(count: u32, bytes: u32): usize {
  return vocabInput(count, bytes);
}

/** Builds the vocabulary from the load buffer; returns the longest token in bytes, 0 if unusable. Allocates. */
export function bpeVocabBuild(count: u32, bytes: u32): u32 {
  return vocabBuild(count, bytes);
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

/**
 * Encodes the first `pieces` pieces of the first `bytes` bytes of text into
 * out; returns the number of ranks written. Allocates (out).
 */
export function bpeEncode(bytes: u32, pieces: u32): u32 {
  if (!vocabReady()) return 0;
  const length = min(<usize>bytes, textCapacity);
  if (length > outCapacity) {
    if (out) release(out, outCapacity << 2);
    outCapacity = <usize>grownCapacity(4096, <u32>length);
    out = alloc(outCapacity << 2);
  }
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
    if (n == 0) continue;
    const p = text + start;
    const whole = rankOf(p, n);
    if (whole != NO_RANK) {
      store<u32>(out + (<usize>written << 2), whole);
      written++;
    } else if (n <= SHORT_MAX) {
      written = mergeShort(p, n, out, written);
    } else {
      written = mergeLong(p, n, out, written);
    }
  }
  return written;
}

/** Sets the window and the context (bytes) long pieces are merged in; results never depend on them. */
export function bpeTune(window: u32, margin: u32): void {
  mergeTune(window, margin);
}

/** 0: windows merged; 1: long pieces merged again with wider windows (a cut failed its check). */
export function bpeStats(which: u32): u32 {
  return mergeStats(which);
}
