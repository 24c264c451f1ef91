// XXH3-64 in plain TypeScript with BigInt arithmetic: the oracle the wasm
// core is checked against, written for clarity rather than speed. Every
// intermediate value is reduced to 64 bits with `u64` where it could overflow.

const MASK64 = (1n << 64n) - 1n;

const PRIME32_1 = 0x9e3779b1n;
const PRIME32_2 = 0x85ebca77n;
const PRIME32_3 = 0xc2b2ae3dn;
const PRIME64_1 = 0x9e3779b185ebca87n;
const PRIME64_2 = 0xc2b2ae3d27d4eb4fn;
const PRIME64_3 = 0x165667b19e3779f9n;
const PRIME64_4 = 0x85ebca77c2b2ae63n;
const PRIME64_5 = 0x27d4eb2f165667c5n;
const PRIME_MX1 = 0x165667919e3779f9n;
const PRIME_MX2 = 0x9fb21c651e98df25n;

/** The 192-byte default secret every XXH3 length class draws its keys from. */
export const XXH3_SECRET = Uint8Array.from([
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
]);

const SECRET_SIZE = XXH3_SECRET.length;
const STRIPE_BYTES = 64;
/** Each stripe of a long input moves 8 bytes further into the secret. */
const SECRET_STEP = 8;
const STRIPES_PER_BLOCK = (SECRET_SIZE - STRIPE_BYTES) / SECRET_STEP;
const BLOCK_BYTES = STRIPE_BYTES * STRIPES_PER_BLOCK;

const u64 = (x: bigint): bigint => x & MASK64;

function read32(b: Uint8Array, at: number): bigint {
  return BigInt((b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0);
}

function read64(b: Uint8Array, at: number): bigint {
  return read32(b, at) | (read32(b, at + 4) << 32n);
}

function rotl64(x: bigint, r: bigint): bigint {
  return u64((x << r) | (x >> (64n - r)));
}

function swap32(x: bigint): bigint {
  return ((x & 0xffn) << 24n) | ((x & 0xff00n) << 8n) | ((x >> 8n) & 0xff00n) | ((x >> 24n) & 0xffn);
}

function swap64(x: bigint): bigint {
  return (swap32(x & 0xffffffffn) << 32n) | swap32(x >> 32n);
}

/** The 128-bit product of two u64, folded to 64 bits by xoring its halves. */
function mulFold64(a: bigint, b: bigint): bigint {
  const product = a * b;
  return u64(product ^ (product >> 64n));
}

function xxh64Avalanche(h: bigint): bigint {
  h ^= h >> 33n;
  h = u64(h * PRIME64_2);
  h ^= h >> 29n;
  h = u64(h * PRIME64_3);
  return h ^ (h >> 32n);
}

function avalanche(h: bigint): bigint {
  h ^= h >> 37n;
  h = u64(h * PRIME_MX1);
  return h ^ (h >> 32n);
}

/** The finaliser of the 4-8 byte class, which mixes in the length. */
function rrmxmx(h: bigint, len: number): bigint {
  h ^= rotl64(h, 49n) ^ rotl64(h, 24n);
  h = u64(h * PRIME_MX2);
  h ^= u64((h >> 35n) + BigInt(len));
  h = u64(h * PRIME_MX2);
  return h ^ (h >> 28n);
}

function mix16(input: Uint8Array, at: number, secret: Uint8Array, key: number, seed: bigint): bigint {
  const lo = read64(input, at) ^ u64(read64(secret, key) + seed);
  const hi = read64(input, at + 8) ^ u64(read64(secret, key + 8) - seed);
  return mulFold64(lo, hi);
}

function hashEmpty(seed: bigint): bigint {
  return xxh64Avalanche(seed ^ read64(XXH3_SECRET, 56) ^ read64(XXH3_SECRET, 64));
}

function hash1to3(input: Uint8Array, seed: bigint): bigint {
  const len = input.length;
  const combined = BigInt(((input[0]! << 16) | (input[len >> 1]! << 24) | input[len - 1]! | (len << 8)) >>> 0);
  const flip = u64((read32(XXH3_SECRET, 0) ^ read32(XXH3_SECRET, 4)) + seed);
  return xxh64Avalanche(combined ^ flip);
}

function hash4to8(input: Uint8Array, seed: bigint): bigint {
  const len = input.length;
  const mixedSeed = seed ^ (swap32(seed & 0xffffffffn) << 32n);
  const flip = u64((read64(XXH3_SECRET, 8) ^ read64(XXH3_SECRET, 16)) - mixedSeed);
  const joined = read32(input, len - 4) + (read32(input, 0) << 32n);
  return rrmxmx(joined ^ flip, len);
}

function hash9to16(input: Uint8Array, seed: bigint): bigint {
  const len = input.length;
  const flipLo = u64((read64(XXH3_SECRET, 24) ^ read64(XXH3_SECRET, 32)) + seed);
  const flipHi = u64((read64(XXH3_SECRET, 40) ^ read64(XXH3_SECRET, 48)) - seed);
  const lo = read64(input, 0) ^ flipLo;
  const hi = read64(input, len - 8) ^ flipHi;
  return avalanche(u64(BigInt(len) + swap64(lo) + hi + mulFold64(lo, hi)));
}

function hash17to128(input: Uint8Array, seed: bigint): bigint {
  const len = input.length;
  let acc = u64(BigInt(len) * PRIME64_1);
  // Pairs of 16-byte lanes from the front and the back, 32 bytes further in per size step.
  const pairs = len > 96 ? 4 : len > 64 ? 3 : len > 32 ? 2 : 1;
  for (let i = pairs - 1; i >= 0; i--) {
    acc += mix16(input, 16 * i, XXH3_SECRET, 32 * i, seed);
    acc += mix16(input, len - 16 * (i + 1), XXH3_SECRET, 32 * i + 16, seed);
  }
  return avalanche(u64(acc));
}

function hash129to240(input: Uint8Array, seed: bigint): bigint {
  const len = input.length;
  const rounds = Math.floor(len / 16);
  let acc = u64(BigInt(len) * PRIME64_1);
  for (let i = 0; i < 8; i++) acc += mix16(input, 16 * i, XXH3_SECRET, 16 * i, seed);
  acc = avalanche(u64(acc));
  // Later rounds reuse the secret from byte 3 on; the last 16 bytes take a key near the end of its first 136.
  for (let i = 8; i < rounds; i++) acc += mix16(input, 16 * i, XXH3_SECRET, 16 * (i - 8) + 3, seed);
  acc += mix16(input, len - 16, XXH3_SECRET, 136 - 17, seed);
  return avalanche(u64(acc));
}

/** The secret a seeded long hash uses: the default one with the seed added to and subtracted from alternate words. */
export function derivedSecret(seed: bigint): Uint8Array {
  const out = new Uint8Array(SECRET_SIZE);
  const view = new DataView(out.buffer);
  for (let i = 0; i < SECRET_SIZE; i += 16) {
    view.setBigUint64(i, u64(read64(XXH3_SECRET, i) + seed), true);
    view.setBigUint64(i + 8, u64(read64(XXH3_SECRET, i + 8) - seed), true);
  }
  return out;
}

function accumulateStripe(acc: bigint[], input: Uint8Array, at: number, secret: Uint8Array, key: number): void {
  for (let lane = 0; lane < 8; lane++) {
    const data = read64(input, at + 8 * lane);
    const keyed = data ^ read64(secret, key + 8 * lane);
    acc[lane ^ 1] = u64(acc[lane ^ 1]! + data);
    acc[lane] = u64(acc[lane]! + (keyed & 0xffffffffn) * (keyed >> 32n));
  }
}

function scramble(acc: bigint[], secret: Uint8Array): void {
  for (let lane = 0; lane < 8; lane++) {
    let a = acc[lane]!;
    a ^= a >> 47n;
    a ^= read64(secret, SECRET_SIZE - STRIPE_BYTES + 8 * lane);
    acc[lane] = u64(a * PRIME32_1);
  }
}

function hashLong(input: Uint8Array, seed: bigint): bigint {
  const len = input.length;
  const secret = seed === 0n ? XXH3_SECRET : derivedSecret(seed);
  const acc = [PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1];
  const blocks = Math.floor((len - 1) / BLOCK_BYTES);
  for (let b = 0; b < blocks; b++) {
    for (let s = 0; s < STRIPES_PER_BLOCK; s++) {
      accumulateStripe(acc, input, b * BLOCK_BYTES + s * STRIPE_BYTES, secret, s * SECRET_STEP);
    }
    scramble(acc, secret);
  }
  const tailStart = blocks * BLOCK_BYTES;
  const tailStripes = Math.floor((len - 1 - tailStart) / STRIPE_BYTES);
  for (let s = 0; s < tailStripes; s++) {
    accumulateStripe(acc, input, tailStart + s * STRIPE_BYTES, secret, s * SECRET_STEP);
  }
  // The final stripe always ends at the input's end, keyed 7 bytes before the secret's last stripe.
  accumulateStripe(acc, input, len - STRIPE_BYTES, secret, SECRET_SIZE - STRIPE_BYTES - 7);
  let result = u64(BigInt(len) * PRIME64_1);
  for (let i = 0; i < 4; i++) {
    const lo = acc[2 * i]! ^ read64(secret, 11 + 16 * i);
    const hi = acc[2 * i + 1]! ^ read64(secret, 11 + 16 * i + 8);
    result += mulFold64(lo, hi);
  }
  return avalanche(u64(result));
}

/** XXH3-64 of bytes under a u64 seed (callers validate the seed's range). */
export function xxh3(input: Uint8Array, seed = 0n): bigint {
  const len = input.length;
  if (len === 0) return hashEmpty(seed);
  if (len <= 3) return hash1to3(input, seed);
  if (len <= 8) return hash4to8(input, seed);
  if (len <= 16) return hash9to16(input, seed);
  if (len <= 128) return hash17to128(input, seed);
  if (len <= 240) return hash129to240(input, seed);
  return hashLong(input, seed);
}
