// Token-block hashing: the local hash of each complete block of a prompt and
// the chained sequence hashes, in buffers the other kernels of this Core read
// without a copy.
//
// Buffers (all owned by this kernel, allocated through alloc.ts, grow-only):
//   input     bytes; the binding writes token ids here as u32 little-endian,
//             or raw bytes for hashXxh3. Pointer from hashReserveInput.
//   local     u64 per block: local[i] = XXH3(bytes of block i, seed).
//   sequence  u64 per block: sequence[0] = local[0],
//             sequence[i] = XXH3(LE64(sequence[i-1]) ++ LE64(local[i]), seed).
// local and sequence always have the same capacity (in blocks).
//
// Calls that may grow memory (and move a buffer): hashReserveInput,
// hashReserveBlocks, hashBlocks. Pointers and views taken before them must be
// fetched again afterwards. hashChain and hashXxh3 never allocate.
//
// Counts are clamped to the buffers' capacities so a bad count can never read
// or write outside them; the bindings validate inputs before calling.
import { alloc, release } from './alloc';
import { xxh3, xxh3Pair } from './xxh3';

const MIN_INPUT_BYTES: usize = 4096;
const MIN_BLOCKS: usize = 64;

let input: usize = 0;
let inputBytes: usize = 0;
let local: usize = 0;
let sequence: usize = 0;
let blockCapacity: usize = 0;

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

/** Makes local and sequence hold at least count hashes; returns local's address. May grow memory. */
export function hashReserveBlocks(count: u32): usize {
  if (<usize>count > blockCapacity) {
    if (local) {
      release(local, blockCapacity << 3);
      release(sequence, blockCapacity << 3);
    }
    blockCapacity = capacityFor(count, MIN_BLOCKS);
    local = alloc(blockCapacity << 3);
    sequence = alloc(blockCapacity << 3);
  }
  return local;
}

export function hashLocalPtr(): usize {
  return local;
}

export function hashSequencePtr(): usize {
  return sequence;
}

/**
 * Hashes each complete block of blockSize tokens among the first tokenCount
 * tokens of the input buffer into local; a trailing partial block is skipped.
 * Returns the number of blocks. May grow memory (local and sequence).
 */
export function hashBlocks(tokenCount: u32, blockSize: u32, seed: u64): u32 {
  const tokens = min(<usize>tokenCount, inputBytes >> 2);
  if (blockSize == 0 || <usize>blockSize > tokens) return 0;
  const count = <u32>(tokens / blockSize);
  hashReserveBlocks(count);
  const blockBytes = <usize>blockSize << 2;
  let at = input;
  for (let i: usize = 0; i < <usize>count; i++) {
    store<u64>(local + (i << 3), xxh3(at, blockBytes, seed));
    at += blockBytes;
  }
  return count;
}

/** Fills sequence[0..count) from local[0..count). */
export function hashChain(count: u32, seed: u64): void {
  const n = min(<usize>count, blockCapacity);
  if (n == 0) return;
  let previous = load<u64>(local);
  store<u64>(sequence, previous);
  for (let i: usize = 1; i < n; i++) {
    previous = xxh3Pair(previous, load<u64>(local + (i << 3)), seed);
    store<u64>(sequence + (i << 3), previous);
  }
}

/** XXH3-64 of the first len bytes of the input buffer. */
export function hashXxh3(len: u32, seed: u64): u64 {
  return xxh3(input, min(<usize>len, inputBytes), seed);
}
