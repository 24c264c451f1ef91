// Token-block hashing: the local hash of each complete block of a prompt and
// the chained sequence hashes, in buffers the other kernels of this Core read
// without a copy.
//
// Buffers (all owned by this kernel, allocated through alloc.ts, grow-only):
//   input   bytes; the binding writes token ids here as u32 little-endian,
//           or raw bytes for hashXxh3. Pointer from hashReserveInput.
//   output  u64, room for 2 x capacity hashes (capacity in blocks):
//             local     output[0 .. n): local[i] = XXH3(bytes of block i, seed)
//             sequence  output[n .. 2n), right after the n local hashes:
//                       sequence[0] = local[0],
//                       sequence[i] = XXH3(LE64(sequence[i-1]) ++ LE64(local[i]), seed)
//           where n is the block count of the last call that wrote them, so a
//           prompt's two lists are one contiguous run of 2n hashes (a host
//           copies both out at once). hashLocalPtr() is the start of output;
//           hashSequencePtr() is where the last chained call put sequence[0].
//
// hashPrompt writes both lists in one pass, each sequence link computed as
// soon as its block's local hash is known, so the chain's latency hides
// behind the next block's hashing; blocks of 241..1024 bytes (block sizes
// 61..256 tokens) take the long path with the secret derived once per call.
//
// Calls that may grow memory (and move a buffer): hashReserveInput,
// hashReserveBlocks, hashBlocks, hashPrompt. Pointers and views taken before
// them must be fetched again afterwards. hashChain and hashXxh3 never allocate.
//
// Counts are clamped to the buffers' capacities so a bad count can never read
// or write outside them; the bindings validate inputs before calling.
import { alloc, release } from './alloc';
import { hashLongWith, longSecret, pairKeyFirst, pairKeySecond, xxh3, xxh3PairKeyed } from './xxh3';

const MIN_INPUT_BYTES: usize = 4096;
const MIN_BLOCKS: usize = 64;
/** Block sizes in bytes above the short classes (240) and below a scrambled block (1024). */
const LONG_MIN_BYTES: usize = 241;
const LONG_MAX_BYTES: usize = 1024;

let input: usize = 0;
let inputBytes: usize = 0;
let output: usize = 0;
let blockCapacity: usize = 0;
let sequence: usize = 0;

/** The smallest power of two that is at least need and at least floor. */
function capacityFor(need: usize, floor: usize): usize {
  let cap = floor;
  while (cap < need) cap <<= 1;
  return cap;
}

/** Makes the input buffer hold at least bytes bytes; returns its address. May grow memory. */
export function hashReserveInput(bytes: u32): usize {
  if (<usize>bytes > inputBytes) {
    // Contents are not kept: callers reserve before they write.
    if (input) release(input, inputBytes);
    inputBytes = capacityFor(bytes, MIN_INPUT_BYTES);
    input = alloc(inputBytes);
  }
  return input;
}

/** Makes the output hold count local and count sequence hashes; returns the local hashes' address. May grow memory. */
export function hashReserveBlocks(count: u32): usize {
  if (<usize>count > blockCapacity) {
    if (output) release(output, blockCapacity << 4);
    blockCapacity = capacityFor(count, MIN_BLOCKS);
    output = alloc(blockCapacity << 4);
    sequence = output;
  }
  return output;
}

export function hashLocalPtr(): usize {
  return output;
}

export function hashSequencePtr(): usize {
  return sequence;
}

/** Complete blocks among the first tokenCount input tokens; reserves the output for them. */
function blocksOf(tokenCount: u32, blockSize: u32): usize {
  const tokens = min(<usize>tokenCount, inputBytes >> 2);
  if (blockSize == 0 || <usize>blockSize > tokens) return 0;
  const count = tokens / blockSize;
  hashReserveBlocks(<u32>count);
  return count;
}

/**
 * Hashes each complete block of blockSize tokens among the first tokenCount
 * tokens of the input buffer into the local hashes; a trailing partial block
 * is skipped. Returns the number of blocks. May grow memory.
 */
export function hashBlocks(tokenCount: u32, blockSize: u32, seed: u64): u32 {
  const count = blocksOf(tokenCount, blockSize);
  const blockBytes = <usize>blockSize << 2;
  let at = input;
  for (let i: usize = 0; i < count; i++) {
    store<u64>(output + (i << 3), xxh3(at, blockBytes, seed));
    at += blockBytes;
  }
  return <u32>count;
}

/** Chains the first count local hashes into the sequence hashes, written right after them. */
export function hashChain(count: u32, seed: u64): void {
  const n = min(<usize>count, blockCapacity);
  sequence = output + (n << 3);
  if (n == 0) return;
  const keyFirst = pairKeyFirst(seed);
  const keySecond = pairKeySecond(seed);
  let previous = load<u64>(output);
  store<u64>(sequence, previous);
  for (let i: usize = 1; i < n; i++) {
    previous = xxh3PairKeyed(previous, load<u64>(output + (i << 3)), keyFirst, keySecond);
    store<u64>(sequence + (i << 3), previous);
  }
}

/**
 * hashBlocks and hashChain in one pass: the local hashes of the complete
 * blocks and their chained sequence hashes right after them. Returns the
 * number of blocks. May grow memory.
 */
export function hashPrompt(tokenCount: u32, blockSize: u32, seed: u64): u32 {
  const count = blocksOf(tokenCount, blockSize);
  sequence = output + (count << 3);
  if (count == 0) return 0;
  const blockBytes = <usize>blockSize << 2;
  const keyFirst = pairKeyFirst(seed);
  const keySecond = pairKeySecond(seed);
  // Two loops, the long path's with its secret derived once: a choice inside
  // one loop would cost every block a branch.
  if (blockBytes >= LONG_MIN_BYTES && blockBytes <= LONG_MAX_BYTES) {
    const secret = longSecret(seed);
    let previous = link(0, hashLongWith(input, blockBytes, secret), 0, keyFirst, keySecond);
    for (let i: usize = 1; i < count; i++) previous = link(i, hashLongWith(input + i * blockBytes, blockBytes, secret), previous, keyFirst, keySecond);
  } else {
    let previous = link(0, xxh3(input, blockBytes, seed), 0, keyFirst, keySecond);
    for (let i: usize = 1; i < count; i++) previous = link(i, xxh3(input + i * blockBytes, blockBytes, seed), previous, keyFirst, keySecond);
  }
  return <u32>count;
}

/** Stores block i's local hash and its sequence hash (chained to `previous`, the first block's is its own); returns the latter. */
@inline
function link(i: usize, local: u64, previous: u64, keyFirst: u64, keySecond: u64): u64 {
  const chained = i == 0 ? local : xxh3PairKeyed(previous, local, keyFirst, keySecond);
  store<u64>(output + (i << 3), local);
  store<u64>(sequence + (i << 3), chained);
  return chained;
}

/** XXH3-64 of the first len bytes of the input buffer. */
export function hashXxh3(len: u32, seed: u64): u64 {
  return xxh3(input, min(<usize>len, inputBytes), seed);
}
