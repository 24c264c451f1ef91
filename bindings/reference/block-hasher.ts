// The pure-TS twin of BlockHasher: block hashes computed block by block with
// the BigInt XXH3, and the zero-copy members simulated with plain arrays.
import {
  DEFAULT_SEED,
  checkBlockSize,
  checkBytes,
  checkCount,
  checkHashList,
  checkSeed,
  checkTokenList,
  tokenAt,
} from './hash-inputs.js';
import { xxh3 } from './xxh3.js';

export { DEFAULT_SEED, seedFor, type SeedOptions } from './hash-inputs.js';

function tokenBytes(tokens: ArrayLike<unknown>, from: number, count: number): Uint8Array {
  const bytes = new Uint8Array(count * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < count; i++) view.setUint32(i * 4, tokenAt(tokens, from + i), true);
  return bytes;
}

function chainLink(previous: bigint, local: bigint, seed: bigint): bigint {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, previous, true);
  view.setBigUint64(8, local, true);
  return xxh3(bytes, seed);
}

export class BlockHasher {
  private tokens: Uint32Array = new Uint32Array(0);
  private local: BigUint64Array = new BigUint64Array(0);
  private sequence: BigUint64Array = new BigUint64Array(0);
  private localCount = 0;
  private sequenceCount = 0;

  /** XXH3 of each complete block of blockSize tokens; a trailing partial block is not hashed. */
  localHashes(tokens: ArrayLike<number>, blockSize: number, seed = DEFAULT_SEED): BigUint64Array {
    const list = checkTokenList(tokens);
    checkBlockSize(blockSize);
    checkSeed(seed);
    for (let i = 0; i < list.length; i++) tokenAt(list, i);
    const count = Math.floor(list.length / blockSize);
    const out = new BigUint64Array(count);
    for (let b = 0; b < count; b++) out[b] = xxh3(tokenBytes(list, b * blockSize, blockSize), seed);
    return out;
  }

  /** seq[0] = local[0]; seq[i] = XXH3(LE64(seq[i-1]) ++ LE64(local[i]), seed). */
  sequenceHashes(local: BigUint64Array, seed = DEFAULT_SEED): BigUint64Array {
    checkHashList(local, 'local');
    checkSeed(seed);
    const out = new BigUint64Array(local.length);
    for (let i = 0; i < local.length; i++) out[i] = i === 0 ? local[0]! : chainLink(out[i - 1]!, local[i]!, seed);
    return out;
  }

  /** Raw XXH3-64 of bytes (seed 0 unless given). */
  xxh3(bytes: Uint8Array, seed = 0n): bigint {
    return xxh3(checkBytes(bytes), checkSeed(seed));
  }

  /** A buffer of n tokens for hashInto, valid until the next call. */
  tokenView(n: number): Uint32Array {
    checkCount(n, 'n');
    this.tokens = new Uint32Array(n);
    return this.tokens;
  }

  hashInto(n: number, blockSize: number, seed: bigint, chained: boolean): number {
    checkCount(n, 'n', this.tokens.length);
    this.local = this.localHashes(this.tokens.subarray(0, n), blockSize, seed);
    this.localCount = this.local.length;
    this.sequenceCount = chained ? this.localCount : 0;
    if (chained) this.sequence = this.sequenceHashes(this.local, seed);
    return this.localCount;
  }

  localView(count: number): BigUint64Array {
    checkCount(count, 'count', this.localCount);
    return this.local.subarray(0, count);
  }

  sequenceView(count: number): BigUint64Array {
    checkCount(count, 'count', this.sequenceCount);
    return this.sequence.subarray(0, count);
  }
}
