// XXH3-64: the hash every KV block key is built from (tokens, LoRA names,
// cache salts, chained sequence hashes).
//
// Memory: two static data segments, no heap.
//   SECRET   192 bytes, the algorithm's default secret (read only).
//   DERIVED  192 bytes, the secret of inputs over 240 bytes under a non-zero
//            seed; derived from SECRET and the seed on the first such input and
//            reused while the seed stays the same (derivedSeed), so hashing the
//            many blocks of one request derives it once.
// Nothing here allocates, so no call can grow memory.
//
// Inputs are read with unaligned little-endian loads (wasm is little-endian).

const PRIME32_1: u64 = 0x9e3779b1;
const PRIME32_2: u64 = 0x85ebca77;
const PRIME32_3: u64 = 0xc2b2ae3d;
const PRIME64_1: u64 = 0x9e3779b185ebca87;
const PRIME64_2: u64 = 0xc2b2ae3d27d4eb4f;
const PRIME64_3: u64 = 0x165667b19e3779f9;
const PRIME64_4: u64 = 0x85ebca77c2b2ae63;
const PRIME64_5: u64 = 0x27d4eb2f165667c5;
const PRIME_MX1: u64 = 0x165667919e3779f9;
const PRIME_MX2: u64 = 0x9fb21c651e98df25;

const SECRET_SIZE: usize = 192;
const STRIPE_BYTES: usize = 64;
/** Each stripe of a long input moves this many bytes further into the secret. */
const SECRET_STEP: usize = 8;
const STRIPES_PER_BLOCK: usize = (SECRET_SIZE - STRIPE_BYTES) / SECRET_STEP;
/** Key offsets of the long path: scramble, last stripe, merge. */
const SCRAMBLE_KEY: usize = SECRET_SIZE - STRIPE_BYTES;
const LAST_STRIPE_KEY: usize = SECRET_SIZE - STRIPE_BYTES - 7;
const MERGE_KEY: usize = 11;

const SECRET: usize = memory.data<u8>([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
], 16);

const DERIVED: usize = memory.data(<i32>SECRET_SIZE, 16);
/** The seed DERIVED was made for; 0 means none yet (seed 0 uses SECRET itself). */
let derivedSeed: u64 = 0;

/** The 128-bit product of two u64, folded to 64 bits by xoring its halves. */
@inline
function mulFold64(a: u64, b: u64): u64 {
  const aLo = a & 0xffffffff;
  const aHi = a >> 32;
  const bLo = b & 0xffffffff;
  const bHi = b >> 32;
  const loLo = aLo * bLo;
  const hiLo = aHi * bLo;
  const loHi = aLo * bHi;
  const hiHi = aHi * bHi;
  const cross = (loLo >> 32) + (hiLo & 0xffffffff) + loHi;
  const upper = (hiLo >> 32) + (cross >> 32) + hiHi;
  const lower = (cross << 32) | (loLo & 0xffffffff);
  return lower ^ upper;
}

@inline
function xxh64Avalanche(h: u64): u64 {
  h ^= h >> 33;
  h *= PRIME64_2;
  h ^= h >> 29;
  h *= PRIME64_3;
  return h ^ (h >> 32);
}

@inline
function avalanche(h: u64): u64 {
  h ^= h >> 37;
  h *= PRIME_MX1;
  return h ^ (h >> 32);
}

/** The finaliser of the 4-8 byte class, which mixes in the length. */
@inline
function rrmxmx(h: u64, len: u64): u64 {
  h ^= rotl<u64>(h, 49) ^ rotl<u64>(h, 24);
  h *= PRIME_MX2;
  h ^= (h >> 35) + len;
  h *= PRIME_MX2;
  return h ^ (h >> 28);
}

@inline
function mix16(input: usize, key: usize, seed: u64): u64 {
  const lo = load<u64>(input) ^ (load<u64>(key) + seed);
  const hi = load<u64>(input, 8) ^ (load<u64>(key, 8) - seed);
  return mulFold64(lo, hi);
}

function hashEmpty(seed: u64): u64 {
  return xxh64Avalanche(seed ^ load<u64>(SECRET, 56) ^ load<u64>(SECRET, 64));
}

function hash1to3(input: usize, len: usize, seed: u64): u64 {
  const first = <u32>load<u8>(input);
  const middle = <u32>load<u8>(input + (len >> 1));
  const last = <u32>load<u8>(input + len - 1);
  const combined = (first << 16) | (middle << 24) | last | (<u32>len << 8);
  const flip = <u64>(load<u32>(SECRET) ^ load<u32>(SECRET, 4)) + seed;
  return xxh64Avalanche(<u64>combined ^ flip);
}

function hash4to8(input: usize, len: usize, seed: u64): u64 {
  const mixedSeed = seed ^ (<u64>bswap<u32>(<u32>seed) << 32);
  const flip = (load<u64>(SECRET, 8) ^ load<u64>(SECRET, 16)) - mixedSeed;
  const joined = <u64>load<u32>(input + len - 4) + (<u64>load<u32>(input) << 32);
  return rrmxmx(joined ^ flip, <u64>len);
}

/** The 9-16 byte class over its first and last 8 bytes (they overlap below 16). */
@inline
function hashWords(first: u64, last: u64, len: u64, seed: u64): u64 {
  const lo = first ^ ((load<u64>(SECRET, 24) ^ load<u64>(SECRET, 32)) + seed);
  const hi = last ^ ((load<u64>(SECRET, 40) ^ load<u64>(SECRET, 48)) - seed);
  return avalanche(len + bswap<u64>(lo) + hi + mulFold64(lo, hi));
}

function hash17to128(input: usize, len: usize, seed: u64): u64 {
  let acc = <u64>len * PRIME64_1;
  // Pairs of 16-byte lanes from the front and the back, one more pair per 32 bytes.
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(input + 48, SECRET + 96, seed);
        acc += mix16(input + len - 64, SECRET + 112, seed);
      }
      acc += mix16(input + 32, SECRET + 64, seed);
      acc += mix16(input + len - 48, SECRET + 80, seed);
    }
    acc += mix16(input + 16, SECRET + 32, seed);
    acc += mix16(input + len - 32, SECRET + 48, seed);
  }
  acc += mix16(input, SECRET, seed);
  acc += mix16(input + len - 16, SECRET + 16, seed);
  return avalanche(acc);
}

function hash129to240(input: usize, len: usize, seed: u64): u64 {
  let acc = <u64>len * PRIME64_1;
  for (let i: usize = 0; i < 128; i += 16) acc += mix16(input + i, SECRET + i, seed);
  acc = avalanche(acc);
  // Later rounds reuse the secret from byte 3 on; the last 16 bytes take the key at 119.
  const rounds = len & ~(<usize>15);
  for (let i: usize = 128; i < rounds; i += 16) acc += mix16(input + i, SECRET + i - 125, seed);
  acc += mix16(input + len - 16, SECRET + 119, seed);
  return avalanche(acc);
}

/** The secret for long inputs under seed, derived once per seed. */
function longSecret(seed: u64): usize {
  if (seed == 0) return SECRET;
  if (seed != derivedSeed) {
    for (let i: usize = 0; i < SECRET_SIZE; i += 16) {
      store<u64>(DERIVED + i, load<u64>(SECRET + i) + seed);
      store<u64>(DERIVED + i, load<u64>(SECRET + i, 8) - seed, 8);
    }
    derivedSeed = seed;
  }
  return DERIVED;
}

/**
 * One pair of the eight 64-bit accumulators over 16 input bytes: each lane
 * gains the other lane's input word and the product of the low and high
 * halves of its own keyed word.
 */
@inline
function accumulatePair(acc: v128, input: usize, key: usize): v128 {
  const data = v128.load(input);
  const keyed = v128.xor(data, v128.load(key));
  const swapped = i64x2.shuffle(data, data, 1, 0);
  const lows = i32x4.shuffle(keyed, keyed, 0, 2, 0, 2);
  const highs = i32x4.shuffle(keyed, keyed, 1, 3, 1, 3);
  return i64x2.add(i64x2.add(acc, swapped), i64x2.extmul_low_i32x4_u(lows, highs));
}

@inline
function scramblePair(acc: v128, key: usize): v128 {
  const mixed = v128.xor(v128.xor(acc, i64x2.shr_u(acc, 47)), v128.load(key));
  return i64x2.mul(mixed, i64x2.splat(PRIME32_1));
}

@inline
function mergePair(acc: v128, key: usize): u64 {
  return mulFold64(i64x2.extract_lane(acc, 0) ^ load<u64>(key), i64x2.extract_lane(acc, 1) ^ load<u64>(key, 8));
}

function hashLong(input: usize, len: usize, seed: u64): u64 {
  const secret = longSecret(seed);
  let acc01 = i64x2(PRIME32_3, PRIME64_1);
  let acc23 = i64x2(PRIME64_2, PRIME64_3);
  let acc45 = i64x2(PRIME64_4, PRIME32_2);
  let acc67 = i64x2(PRIME64_5, PRIME32_1);
  // Stripes of 64 bytes, 16 to a block with a scramble after each full block;
  // the final stripe always ends at the input's end and has its own key.
  const lastStripe = (len - 1) / STRIPE_BYTES;
  let inBlock: usize = 0;
  for (let n: usize = 0; n <= lastStripe; n++) {
    const last = n == lastStripe;
    const at = last ? input + len - STRIPE_BYTES : input + n * STRIPE_BYTES;
    const key = last ? secret + LAST_STRIPE_KEY : secret + inBlock * SECRET_STEP;
    acc01 = accumulatePair(acc01, at, key);
    acc23 = accumulatePair(acc23, at + 16, key + 16);
    acc45 = accumulatePair(acc45, at + 32, key + 32);
    acc67 = accumulatePair(acc67, at + 48, key + 48);
    if (!last && ++inBlock == STRIPES_PER_BLOCK) {
      acc01 = scramblePair(acc01, secret + SCRAMBLE_KEY);
      acc23 = scramblePair(acc23, secret + SCRAMBLE_KEY + 16);
      acc45 = scramblePair(acc45, secret + SCRAMBLE_KEY + 32);
      acc67 = scramblePair(acc67, secret + SCRAMBLE_KEY + 48);
      inBlock = 0;
    }
  }
  let result = <u64>len * PRIME64_1;
  result += mergePair(acc01, secret + MERGE_KEY);
  result += mergePair(acc23, secret + MERGE_KEY + 16);
  result += mergePair(acc45, secret + MERGE_KEY + 32);
  result += mergePair(acc67, secret + MERGE_KEY + 48);
  return avalanche(result);
}

/** XXH3-64 of len bytes at input, under seed. */
export function xxh3(input: usize, len: usize, seed: u64): u64 {
  if (len <= 16) {
    if (len > 8) return hashWords(load<u64>(input), load<u64>(input + len - 8), <u64>len, seed);
    if (len >= 4) return hash4to8(input, len, seed);
    if (len > 0) return hash1to3(input, len, seed);
    return hashEmpty(seed);
  }
  if (len <= 128) return hash17to128(input, len, seed);
  if (len <= 240) return hash129to240(input, len, seed);
  return hashLong(input, len, seed);
}

/** XXH3-64 of the 16 bytes LE64(first) followed by LE64(second): one link of a hash chain. */
export function xxh3Pair(first: u64, second: u64, seed: u64): u64 {
  return hashWords(first, second, 16, seed);
}
