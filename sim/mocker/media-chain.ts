// The mock engine's block identity for prompts with media: the chained hash
// of the tokens, folded with each block's media keys along the chain, so two
// prompts share a block only when their tokens and their media up to it are
// the same (placeholder runs are the same tokens for every image).
import type { MediaKey } from '../../router/kv-events.js';

const MASK = (1n << 64n) - 1n;
const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;

/** Chained hashes with media folded in: element i depends on hashes[i] and the keys of blocks 0..i. */
export function foldMediaChain(hashes: BigUint64Array, media: readonly (readonly MediaKey[] | null)[]): BigUint64Array {
  const out = new BigUint64Array(hashes.length);
  let carried = 0n;
  for (let i = 0; i < hashes.length; i++) {
    const keys = media[i];
    if (keys && keys.length > 0) carried = mix(carried ^ digest(keys));
    out[i] = carried === 0n ? hashes[i]! : mix(hashes[i]! ^ carried);
  }
  return out;
}

function digest(keys: readonly MediaKey[]): bigint {
  let h = FNV_OFFSET;
  for (const ch of keys.map((k) => `${k.id}\u0000${k.offset}`).join('\u0001')) {
    h = ((h ^ BigInt(ch.codePointAt(0)!)) * FNV_PRIME) & MASK;
  }
  return h;
}

// splitmix64's finalizer: a bijection of u64 that spreads every input bit.
function mix(x: bigint): bigint {
  let z = x & MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return z ^ (z >> 31n);
}
