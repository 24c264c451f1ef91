// The mock engine's own block identity: a chained 64-bit hash of (parent
// block's hash, this block's token ids), so equal hashes mean equal prefixes.
// A request's LoRA adapter and cache salt start the chain from another state,
// so an adapter's or a tenant's blocks never equal anyone else's: what vLLM
// gets by hashing the adapter into every block and the salt into the first.
// Like vLLM's, it is opaque to the router, which only uses it to link parents
// and name removals. It must be cheap (a trace replay hashes tens of millions
// of prompt tokens), so it runs two 32-bit multiply-rotate lanes instead of a
// BigInt hash. The lead can plug in the wasm hasher through `HashBlocks`.

/**
 * Chained hashes of the complete blocks of `tokens`: element i identifies
 * blocks 0..i. A trailing partial block gets no hash, so the result has
 * floor(tokens.length / blockSize) elements. The engine keeps the array for
 * the request's lifetime, so a hasher over wasm memory must return a copy.
 */
export type HashBlocks = (tokens: Uint32Array, blockSize: number, keys?: BlockKeys) => BigUint64Array;

/** What names a request's blocks besides their tokens. */
export interface BlockKeys {
  /** The LoRA adapter the request runs with; null for the base model. */
  lora: string | null;
  /** The request's cache salt; null for none. */
  salt: string | null;
}

/** Mixes a string into a 32-bit lane (its UTF-16 code units, then its length). */
function mixString(h: number, text: string, multiplier: number): number {
  for (let i = 0; i < text.length; i++) h = Math.imul(rotl(h ^ Math.imul(text.charCodeAt(i), multiplier), 15), 5) + 0x52dce729;
  return fmix(h ^ text.length);
}

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

export const chainedBlockHashes: HashBlocks = (tokens, blockSize, keys) => {
  const blocks = Math.floor(tokens.length / blockSize);
  const out = new BigUint64Array(blocks);
  // Little-endian halves of each u64 (every platform Node runs on is little-endian).
  const halves = new Uint32Array(out.buffer);
  let lo = 0x243f6a88;
  let hi = 0x85a308d3;
  // Absent, empty and null keys all leave the base model's starting state.
  if (keys?.lora) {
    lo = mixString(lo ^ 0x4c6f5241, keys.lora, 0xcc9e2d51) >>> 0;
    hi = mixString(hi ^ 0x4c6f5241, keys.lora, 0x1b873593) >>> 0;
  }
  if (keys?.salt) {
    lo = mixString(lo ^ 0x53616c74, keys.salt, 0x85ebca6b) >>> 0;
    hi = mixString(hi ^ 0x53616c74, keys.salt, 0xc2b2ae35) >>> 0;
  }
  for (let b = 0, p = 0; b < blocks; b++) {
    let a = lo ^ 0x9e3779b9;
    let c = hi ^ 0x7f4a7c15;
    for (const end = p + blockSize; p < end; p++) {
      const t = tokens[p]!;
      a = Math.imul(rotl(a ^ Math.imul(t, 0xcc9e2d51), 13), 5) + 0xe6546b64;
      c = Math.imul(rotl(c ^ Math.imul(t, 0x1b873593), 17), 0x27d4eb2f) + 0x165667b1;
    }
    a = fmix(a ^ blockSize);
    c = fmix(c ^ Math.imul(b + 1, 0x9e3779b1));
    lo = (a + c) >>> 0;
    hi = fmix(c ^ rotl(a, 11)) >>> 0;
    halves[2 * b] = lo;
    halves[2 * b + 1] = hi;
  }
  return out;
};
