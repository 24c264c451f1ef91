// XXH3-64: the hash every KV block key is built from (tokens, LoRA names,
// cache salts, chained sequence hashes).
//
// Memory: three static data segments, no heap.
//   SECRET     192 bytes, the algorithm's default secret (read only).
//   DERIVED    192 bytes, the secret of inputs over 240 bytes under a non-zero
//              seed; derived from SECRET and the seed on the first such input
//              and reused while the seed stays the same (derivedSeed), so
//              hashing the many blocks of one request derives it once.
//   ACC_START  64 bytes, the long path's starting accumulators (read only).
// Nothing here allocates, so no call can grow memory.
//
// Inputs are read with unaligned little-endian loads (wasm is little-endian).
// The long path and the 33-240 byte classes run in SIMD: wasm has no 64 x 64
// -> 128-bit multiply, so their 128-bit folds are built from 32-bit products,
// four folds at a time (foldFour).

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

/**
 * The sum of four 128-bit folds, each of the two u64 lanes of one vector,
 * computed two lanes at a time from 32-bit halves: the same value as
 * mulFold64 on each pair, summed, with a quarter of the scalar multiplies.
 * Lanes (0, 0) make a fold of 0, so callers pad with zero vectors.
 */
@inline
export function foldFour(p0: v128, p1: v128, p2: v128, p3: v128): u64 {
  const a01 = i64x2.shuffle(p0, p1, 0, 2);
  const b01 = i64x2.shuffle(p0, p1, 1, 3);
  const a23 = i64x2.shuffle(p2, p3, 0, 2);
  const b23 = i64x2.shuffle(p2, p3, 1, 3);
  // The four first factors' low and high halves, and the second factors'.
  const aLo = i32x4.shuffle(a01, a23, 0, 2, 4, 6);
  const aHi = i32x4.shuffle(a01, a23, 1, 3, 5, 7);
  const bLo = i32x4.shuffle(b01, b23, 0, 2, 4, 6);
  const bHi = i32x4.shuffle(b01, b23, 1, 3, 5, 7);
  const low = foldHalves(
    i64x2.extmul_low_i32x4_u(aLo, bLo),
    i64x2.extmul_low_i32x4_u(aHi, bLo),
    i64x2.extmul_low_i32x4_u(aLo, bHi),
    i64x2.extmul_low_i32x4_u(aHi, bHi),
  );
  const high = foldHalves(
    i64x2.extmul_high_i32x4_u(aLo, bLo),
    i64x2.extmul_high_i32x4_u(aHi, bLo),
    i64x2.extmul_high_i32x4_u(aLo, bHi),
    i64x2.extmul_high_i32x4_u(aHi, bHi),
  );
  const sum = i64x2.add(low, high);
  return i64x2.extract_lane(sum, 0) + i64x2.extract_lane(sum, 1);
}

/** mulFold64 per lane from the four partial products (as mulFold64 combines them). */
@inline
function foldHalves(loLo: v128, hiLo: v128, loHi: v128, hiHi: v128): v128 {
  const mask = i64x2.splat(0xffffffff);
  const cross = i64x2.add(i64x2.add(i64x2.shr_u(loLo, 32), v128.and(hiLo, mask)), loHi);
  const upper = i64x2.add(i64x2.add(i64x2.shr_u(hiLo, 32), i64x2.shr_u(cross, 32)), hiHi);
  const lower = v128.or(i64x2.shl(cross, 32), v128.and(loLo, mask));
  return v128.xor(lower, upper);
}

/** The keyed pair of mix16 as one vector: input words xor (key + seed, key - seed). */
@inline
function keyedPair(input: usize, key: usize, seedPair: v128): v128 {
  return v128.xor(v128.load(input), i64x2.add(v128.load(key), seedPair));
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
  if (len <= 32) {
    acc += mix16(input, SECRET, seed);
    acc += mix16(input + len - 16, SECRET + 16, seed);
    return avalanche(acc);
  }
  // Pairs of 16-byte lanes from the front and the back, one more pair per 32
  // bytes, folded four at a time (zero vectors pad the last group).
  const seedPair = i64x2(seed, 0 - seed);
  const zero = i64x2.splat(0);
  const front0 = keyedPair(input, SECRET, seedPair);
  const back0 = keyedPair(input + len - 16, SECRET + 16, seedPair);
  const front1 = keyedPair(input + 16, SECRET + 32, seedPair);
  const back1 = keyedPair(input + len - 32, SECRET + 48, seedPair);
  acc += foldFour(front0, back0, front1, back1);
  if (len > 64) {
    const front2 = keyedPair(input + 32, SECRET + 64, seedPair);
    const back2 = keyedPair(input + len - 48, SECRET + 80, seedPair);
    if (len > 96) {
      acc += foldFour(front2, back2, keyedPair(input + 48, SECRET + 96, seedPair), keyedPair(input + len - 64, SECRET + 112, seedPair));
    } else {
      acc += foldFour(front2, back2, zero, zero);
    }
  }
  return avalanche(acc);
}

function hash129to240(input: usize, len: usize, seed: u64): u64 {
  const seedPair = i64x2(seed, 0 - seed);
  const zero = i64x2.splat(0);
  let acc = <u64>len * PRIME64_1;
  for (let i: usize = 0; i < 128; i += 64) {
    acc += foldFour(
      keyedPair(input + i, SECRET + i, seedPair),
      keyedPair(input + i + 16, SECRET + i + 16, seedPair),
      keyedPair(input + i + 32, SECRET + i + 32, seedPair),
      keyedPair(input + i + 48, SECRET + i + 48, seedPair),
    );
  }
  acc = avalanche(acc);
  // Later rounds reuse the secret from byte 3 on; the last 16 bytes take the key at 119.
  const rounds = len & ~(<usize>15);
  let i: usize = 128;
  for (; i + 64 <= rounds; i += 64) {
    acc += foldFour(
      keyedPair(input + i, SECRET + i - 125, seedPair),
      keyedPair(input + i + 16, SECRET + i - 109, seedPair),
      keyedPair(input + i + 32, SECRET + i - 93, seedPair),
      keyedPair(input + i + 48, SECRET + i - 77, seedPair),
    );
  }
  // At most three rounds are left, then the last 16 bytes: one more group of four.
  const last = keyedPair(input + len - 16, SECRET + 119, seedPair);
  const r0 = i < rounds ? keyedPair(input + i, SECRET + i - 125, seedPair) : zero;
  const r1 = i + 16 < rounds ? keyedPair(input + i + 16, SECRET + i - 109, seedPair) : zero;
  const r2 = i + 32 < rounds ? keyedPair(input + i + 32, SECRET + i - 93, seedPair) : zero;
  acc += foldFour(r0, r1, r2, last);
  return avalanche(acc);
}

/** The secret for long inputs under seed, derived once per seed. */
export function longSecret(seed: u64): usize {
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

// The algorithm's starting accumulators, lane-swapped (see hashLongWith).
const ACC_START: usize = memory.data<u64>([PRIME64_1, PRIME32_3, PRIME64_3, PRIME64_2, PRIME32_2, PRIME64_4, PRIME32_1, PRIME64_5], 16);

/** One accumulator vector gains its lanes' input words and the products of a gathered pair. */
@inline
function gainLow(acc: v128, data: v128, lows: v128, highs: v128): v128 {
  return i64x2.add(i64x2.add(acc, data), i64x2.extmul_low_i32x4_u(lows, highs));
}

@inline
function gainHigh(acc: v128, data: v128, lows: v128, highs: v128): v128 {
  return i64x2.add(i64x2.add(acc, data), i64x2.extmul_high_i32x4_u(lows, highs));
}

/** The two u64 at key, in swapped order (the accumulators' layout). */
@inline
function swapped(key: usize): v128 {
  const k = v128.load(key);
  return i64x2.shuffle(k, k, 1, 0);
}

@inline
function scrambled(acc: v128, key: usize): v128 {
  const mixed = v128.xor(v128.xor(acc, i64x2.shr_u(acc, 47)), swapped(key));
  return i64x2.mul(mixed, i64x2.splat(PRIME32_1));
}

/**
 * XXH3-64 of len > 240 bytes under the long-input secret `secret`
 * (longSecret(seed)). The eight accumulators are kept lane-swapped, (acc[1],
 * acc[0]) in each vector, so the algorithm's add of the neighbouring lane's
 * input word needs no shuffle; each stripe gathers the low and the high
 * 32-bit halves of two keyed vectors at once, in the swapped order, for the
 * products. The scramble and the merge read their keys swapped to match, and
 * the merge's folds do not care about the order of their factors.
 */
@inline
export function hashLongWith(input: usize, len: usize, secret: usize): u64 {
  let a01 = v128.load(ACC_START);
  let a23 = v128.load(ACC_START, 16);
  let a45 = v128.load(ACC_START, 32);
  let a67 = v128.load(ACC_START, 48);
  // Stripes of 64 bytes, 16 to a block with a scramble after each full block;
  // the final stripe always ends at the input's end and has its own key.
  const stripes = (len - 1) / STRIPE_BYTES;
  let at = input;
  let inBlock: usize = 0;
  let n: usize = 0;
  let p = input;
  let key = secret;
  for (;;) {
    const d0 = v128.load(p);
    const d1 = v128.load(p, 16);
    const d2 = v128.load(p, 32);
    const d3 = v128.load(p, 48);
    const k0 = v128.xor(d0, v128.load(key));
    const k1 = v128.xor(d1, v128.load(key, 16));
    const k2 = v128.xor(d2, v128.load(key, 32));
    const k3 = v128.xor(d3, v128.load(key, 48));
    const lo01 = i32x4.shuffle(k0, k1, 2, 0, 6, 4);
    const hi01 = i32x4.shuffle(k0, k1, 3, 1, 7, 5);
    const lo23 = i32x4.shuffle(k2, k3, 2, 0, 6, 4);
    const hi23 = i32x4.shuffle(k2, k3, 3, 1, 7, 5);
    a01 = gainLow(a01, d0, lo01, hi01);
    a23 = gainHigh(a23, d1, lo01, hi01);
    a45 = gainLow(a45, d2, lo23, hi23);
    a67 = gainHigh(a67, d3, lo23, hi23);
    if (n == stripes) break;
    n++;
    if (++inBlock == STRIPES_PER_BLOCK) {
      const scrambleKey = secret + SCRAMBLE_KEY;
      a01 = scrambled(a01, scrambleKey);
      a23 = scrambled(a23, scrambleKey + 16);
      a45 = scrambled(a45, scrambleKey + 32);
      a67 = scrambled(a67, scrambleKey + 48);
      inBlock = 0;
    }
    at += STRIPE_BYTES;
    p = at;
    key = secret + inBlock * SECRET_STEP;
    if (n == stripes) {
      p = input + len - STRIPE_BYTES;
      key = secret + LAST_STRIPE_KEY;
    }
  }
  const merge = secret + MERGE_KEY;
  const folds = foldFour(
    v128.xor(a01, swapped(merge)),
    v128.xor(a23, swapped(merge + 16)),
    v128.xor(a45, swapped(merge + 32)),
    v128.xor(a67, swapped(merge + 48)),
  );
  return avalanche(<u64>len * PRIME64_1 + folds);
}

function hashLong(input: usize, len: usize, seed: u64): u64 {
  return hashLongWith(input, len, longSecret(seed));
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

/** The key xxh3Pair mixes into its first word under seed (hoisted out of chain loops). */
export function pairKeyFirst(seed: u64): u64 {
  return (load<u64>(SECRET, 24) ^ load<u64>(SECRET, 32)) + seed;
}

/** The key xxh3Pair mixes into its second word under seed. */
export function pairKeySecond(seed: u64): u64 {
  return (load<u64>(SECRET, 40) ^ load<u64>(SECRET, 48)) - seed;
}

/** xxh3Pair with its keys computed ahead (pairKeyFirst, pairKeySecond of the same seed). */
@inline
export function xxh3PairKeyed(first: u64, second: u64, keyFirst: u64, keySecond: u64): u64 {
  const lo = first ^ keyFirst;
  const hi = second ^ keySecond;
  return avalanche(16 + bswap<u64>(lo) + hi + mulFold64(lo, hi));
}
