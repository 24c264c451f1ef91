// The inputs of token-block hashing and their rules, shared by the wasm
// BlockHasher and its twin so both accept, reject and seed exactly alike.
import { xxh3 } from './xxh3.js';

/** The seed every block hash uses unless a request carries its own. */
export const DEFAULT_SEED = 1337n;
/** The seed under which a LoRA adapter name is hashed into the block seed. */
export const LORA_NAME_SEED = 0n;
/** The seed under which a cache salt is hashed; differs from LORA_NAME_SEED so a salt never collides with an adapter of the same name. */
export const CACHE_SALT_SEED = 1n;
/** The longest prompt hashed in one call: 64 MiB of token ids. */
export const MAX_TOKENS = 1 << 24;

const U64_MAX = (1n << 64n) - 1n;
const utf8 = new TextEncoder();

export interface SeedOptions {
  /** The base seed (default 1337). */
  seed?: bigint;
  /** LoRA adapter name; empty or absent means the base model. */
  lora?: string | null;
  /** Cache salt (tenant / namespace); empty or absent means none. */
  salt?: string | null;
}

export function checkSeed(seed: unknown, name = 'seed'): bigint {
  if (typeof seed !== 'bigint') throw new TypeError(`${name} must be a bigint, got ${typeof seed}`);
  if (seed < 0n || seed > U64_MAX) throw new RangeError(`${name} must be in [0, 2^64), got ${seed}`);
  return seed;
}

export function checkBlockSize(blockSize: unknown): number {
  if (typeof blockSize !== 'number') throw new TypeError(`blockSize must be a number, got ${typeof blockSize}`);
  if (!Number.isInteger(blockSize) || blockSize < 1 || blockSize > 0xffffffff) {
    throw new RangeError(`blockSize must be an integer in [1, 2^32), got ${blockSize}`);
  }
  return blockSize;
}

/** A count of tokens (or blocks) a caller asks for; name says which. */
export function checkCount(count: unknown, name: string, max = MAX_TOKENS): number {
  if (typeof count !== 'number') throw new TypeError(`${name} must be a number, got ${typeof count}`);
  if (!Number.isInteger(count) || count < 0 || count > max) {
    throw new RangeError(`${name} must be an integer in [0, ${max}], got ${count}`);
  }
  return count;
}

/** Checks that tokens is array-like and not longer than MAX_TOKENS; elements are checked by tokenAt. */
export function checkTokenList(tokens: unknown): ArrayLike<unknown> {
  if (typeof tokens !== 'object' || tokens === null || typeof (tokens as ArrayLike<unknown>).length !== 'number') {
    throw new TypeError('tokens must be an array of token ids');
  }
  checkCount((tokens as ArrayLike<unknown>).length, 'tokens.length');
  return tokens as ArrayLike<unknown>;
}

/** tokens[i] as a u32 token id, or an error naming it. */
export function tokenAt(tokens: ArrayLike<unknown>, i: number): number {
  const t = tokens[i];
  if (typeof t !== 'number') throw new TypeError(`tokens[${i}] must be a number, got ${typeof t}`);
  // `>>> 0` maps every integer in [0, 2^32) to itself and any other number to something different.
  if (t >>> 0 !== t) throw new RangeError(`tokens[${i}] must be an integer in [0, 2^32), got ${t}`);
  return t;
}

export function checkHashList(hashes: unknown, name: string): BigUint64Array {
  if (!(hashes instanceof BigUint64Array)) throw new TypeError(`${name} must be a BigUint64Array`);
  checkCount(hashes.length, `${name}.length`);
  return hashes;
}

export function checkBytes(bytes: unknown): Uint8Array {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('bytes must be a Uint8Array');
  checkCount(bytes.length, 'bytes.length', MAX_TOKENS * 4);
  return bytes;
}

function optionalName(value: unknown, name: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new TypeError(`${name} must be a string, got ${typeof value}`);
  return value;
}

/**
 * The block seed of a request: the base seed plus XXH3(LoRA name, seed 0) plus
 * XXH3(cache salt, seed 1), wrapping at 2^64. Empty strings count as absent,
 * so the same tokens under different adapters or tenants never share blocks.
 */
export function seedFor(options: SeedOptions = {}): bigint {
  let seed = options.seed === undefined ? DEFAULT_SEED : checkSeed(options.seed);
  const lora = optionalName(options.lora, 'lora');
  const salt = optionalName(options.salt, 'salt');
  if (lora) seed += xxh3(utf8.encode(lora), LORA_NAME_SEED);
  if (salt) seed += xxh3(utf8.encode(salt), CACHE_SALT_SEED);
  return seed & U64_MAX;
}
