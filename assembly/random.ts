// The selector's randomness: xoshiro128** on u32 words, seeded by `selectSeed`,
// so a seed fixes every tie-break and softmax draw. The pure-TS twin
// (bindings/reference/selector.ts) implements the same generator bit for bit.

let s0: u32 = 1;
let s1: u32 = 2;
let s2: u32 = 3;
let s3: u32 = 4;

// Expands a seed into four state words: a Weyl sequence through the murmur3
// finalizer, a bijection, so at most one word is 0 and the state never is.
function seedWord(x: u32): u32 {
  x = (x ^ (x >>> 16)) * 0x85ebca6b;
  x = (x ^ (x >>> 13)) * 0xc2b2ae35;
  return x ^ (x >>> 16);
}

export function selectSeed(seed: u32): void {
  s0 = seedWord(seed + 0x9e3779b9);
  s1 = seedWord(seed + 0x3c6ef372);
  s2 = seedWord(seed + 0xdaa66d2b);
  s3 = seedWord(seed + 0x78dde6e4);
}

function nextU32(): u32 {
  const result = rotl<u32>(s1 * 5, 7) * 9;
  const t = s1 << 9;
  s2 ^= s0;
  s3 ^= s1;
  s1 ^= s2;
  s0 ^= s3;
  s2 ^= t;
  s3 = rotl<u32>(s3, 11);
  return result;
}

/** Uniform in [0, 1) with 32 random bits. */
@inline
export function unit(): f64 {
  return <f64>nextU32() / 4294967296.0;
}

/**
 * Exactly uniform in [0, n) for n >= 1: the high word of a 32 x 32-bit product,
 * redrawing the few products whose low word falls in the biased band
 * (Lemire's multiply-and-reject). n = 1 draws nothing.
 */
export function below(n: u32): u32 {
  if (n <= 1) return 0;
  let product = <u64>nextU32() * <u64>n;
  if (<u32>product < n) {
    const threshold: u32 = (<u32>0 - n) % n;
    while (<u32>product < threshold) product = <u64>nextU32() * <u64>n;
  }
  return <u32>(product >> 32);
}

// For tests of the generator itself: the next raw word.
export function selectNextRandom(): u32 {
  return nextU32();
}
