// Synthetic prompt tokens. A trace names each block of its prompts by an id
// (Mooncake: one hash id per 512 tokens), and generated workloads name each
// segment of their prompts by a key; replay turns a (namespace, key) pair
// into a run of token ids that depends on nothing else. Equal keys give equal
// tokens, so prompts that share ids share a real token prefix and the
// engine's and router's hashes see the sharing; distinct keys give distinct
// tokens, so nothing is shared by accident.
import { mix32 } from './random.js';

/** The namespace of Mooncake trace hash ids; generators use their own. */
export const TRACE_NAMESPACE = 0;

const GOLDEN = 0x9e3779b1;

/**
 * The seed of one key's tokens. For a fixed namespace and keys below 2^32 it
 * is a bijection of the key, so distinct keys give distinct first tokens.
 */
function blockSeed(namespace: number, key: number): number {
  const lo = key >>> 0;
  const hi = Math.floor(key / 4294967296) >>> 0;
  return mix32(lo ^ mix32(namespace ^ Math.imul(hi, 0x85ebca6b)));
}

// Position masks: a key's token at position p is its seed ^ MASKS[p mod 2^16]
// (^ a mix of p's high bits past 2^16). Distinct seeds then differ at every
// position, and no token repeats within 2^16 positions of one run. One load
// and one xor per token: replays build tens of millions of them.
const MASK_BITS = 16;
// Int32: the hot loop stays in small-integer arithmetic (u32 values over 2^31 would be doubles).
const MASKS = new Int32Array(1 << MASK_BITS).map((_, p) => mix32(Math.imul(p + 1, GOLDEN) >>> 0));

/**
 * Writes `count` tokens of key `key` into out[offset..], starting at position
 * `from` within the key's run (a block cut short is a prefix of the full one).
 */
export function writeKeyTokens(out: Uint32Array, offset: number, namespace: number, key: number, count: number, from = 0): void {
  if (!Number.isSafeInteger(key) || key < 0) throw new RangeError(`token key must be a non-negative safe integer, got ${key}`);
  const seed = blockSeed(namespace, key);
  const span = 1 << MASK_BITS;
  for (let pos = from, end = from + count; pos < end; ) {
    const high = pos >>> MASK_BITS;
    const base = high === 0 ? seed | 0 : seed ^ mix32(high);
    const stop = Math.min(end, (high + 1) * span);
    for (let at = offset + pos - from; pos < stop; pos++, at++) out[at] = base ^ MASKS[pos & (span - 1)]!;
  }
}

/** The prompt of a trace line into out[0..length): each id stands for `blockSize` tokens, the last cut to fit. */
export function writeTraceTokens(out: Uint32Array, ids: readonly number[], length: number, blockSize: number, namespace = TRACE_NAMESPACE): void {
  if (length > ids.length * blockSize) {
    throw new RangeError(`${length} tokens need ${Math.ceil(length / blockSize)} blocks of ${blockSize}, got ${ids.length} ids`);
  }
  for (let b = 0, offset = 0; offset < length; b++, offset += blockSize) {
    writeKeyTokens(out, offset, namespace, ids[b]!, Math.min(blockSize, length - offset));
  }
}
