// Token-block hashing on the wasm core (assembly/block-hash.ts).
//
// Two ways in:
// - copying: localHashes / sequenceHashes / xxh3 validate every input and
//   return values the caller owns;
// - zero-copy, for the router's hot path: write token ids into tokenView(n),
//   call hashInto, and read localView / sequenceView (or hand localPtr /
//   sequencePtr to another kernel of the same Core). Those views stay valid
//   until the next call on this hasher or anything else that may grow the
//   Core's memory. A chained hashInto computes both lists in one pass, the
//   sequence hashes right after the local ones in core memory.
import { Core } from './core.js';
import {
  DEFAULT_SEED,
  checkBlockSize,
  checkBytes,
  checkCount,
  checkHashList,
  checkSeed,
  checkTokenList,
  tokenAt,
} from './reference/hash-inputs.js';

export { DEFAULT_SEED, MAX_TOKENS, seedFor, type SeedOptions } from './reference/hash-inputs.js';

/** The core's hash* exports (assembly/block-hash.ts). */
export interface HashExports {
  hashReserveInput(bytes: number): number;
  hashReserveBlocks(count: number): number;
  hashLocalPtr(): number;
  hashSequencePtr(): number;
  hashBlocks(tokenCount: number, blockSize: number, seed: bigint): number;
  hashChain(count: number, seed: bigint): void;
  hashPrompt(tokenCount: number, blockSize: number, seed: bigint): number;
  hashXxh3(len: number, seed: bigint): bigint;
}

export class BlockHasher {
  readonly core: Core;
  private readonly k: HashExports;
  /** Tokens the last tokenView reserved; 0 once anything else has used the input buffer. */
  private viewTokens = 0;
  private localCount = 0;
  private sequenceCount = 0;

  constructor(options: { core?: Core } = {}) {
    this.core = options.core ?? new Core();
    this.core.claim('hash');
    this.k = this.core.kernel<HashExports>();
  }

  /** XXH3 of each complete block of blockSize tokens; a trailing partial block is not hashed. */
  localHashes(tokens: ArrayLike<number>, blockSize: number, seed = DEFAULT_SEED): BigUint64Array {
    const list = checkTokenList(tokens);
    checkBlockSize(blockSize);
    checkSeed(seed);
    const view = this.reserveTokens(list.length);
    if (list instanceof Uint32Array) view.set(list);
    else for (let i = 0; i < list.length; i++) view[i] = tokenAt(list, i);
    const count = this.k.hashBlocks(list.length, blockSize, seed);
    this.core.wrote('hashes');
    return this.core.u64(this.k.hashLocalPtr(), count).slice();
  }

  /** seq[0] = local[0]; seq[i] = XXH3(LE64(seq[i-1]) ++ LE64(local[i]), seed). */
  sequenceHashes(local: BigUint64Array, seed = DEFAULT_SEED): BigUint64Array {
    checkHashList(local, 'local');
    checkSeed(seed);
    this.localCount = this.sequenceCount = 0;
    const ptr = this.k.hashReserveBlocks(local.length);
    this.core.u64(ptr, local.length).set(local);
    this.k.hashChain(local.length, seed);
    this.core.wrote('hashes');
    return this.core.u64(this.k.hashSequencePtr(), local.length).slice();
  }

  /** Raw XXH3-64 of bytes (seed 0 unless given). */
  xxh3(bytes: Uint8Array, seed = 0n): bigint {
    checkBytes(bytes);
    checkSeed(seed);
    this.viewTokens = 0;
    this.core.u8(this.k.hashReserveInput(bytes.length), bytes.length).set(bytes);
    // i64 results cross as signed BigInts.
    return BigInt.asUintN(64, this.k.hashXxh3(bytes.length, seed));
  }

  /**
   * A view of n token slots in the core for hashInto to read. Writes through
   * it are coerced to u32 by the typed array, not validated.
   */
  tokenView(n: number): Uint32Array {
    checkCount(n, 'n');
    const view = this.reserveTokens(n);
    this.viewTokens = n;
    return view;
  }

  /**
   * Hashes the first n tokens written through tokenView into the local buffer
   * (and the sequence buffer when chained); returns the block count.
   */
  hashInto(n: number, blockSize: number, seed: bigint, chained: boolean): number {
    checkCount(n, 'n', this.viewTokens);
    checkBlockSize(blockSize);
    checkSeed(seed);
    const count = chained ? this.k.hashPrompt(n, blockSize, seed) : this.k.hashBlocks(n, blockSize, seed);
    this.core.wrote('hashes');
    this.localCount = count;
    this.sequenceCount = chained ? count : 0;
    return count;
  }

  /** The first count local hashes of the last hashInto, in core memory. */
  localView(count: number): BigUint64Array {
    checkCount(count, 'count', this.localCount);
    return this.core.u64(this.k.hashLocalPtr(), count);
  }

  /** The first count sequence hashes of the last chained hashInto, in core memory. */
  sequenceView(count: number): BigUint64Array {
    checkCount(count, 'count', this.sequenceCount);
    return this.core.u64(this.k.hashSequencePtr(), count);
  }

  /** Address of the local hashes (u64 each) for other kernels of this Core. */
  get localPtr(): number {
    return this.k.hashLocalPtr();
  }

  /** Address of the sequence hashes (u64 each) for other kernels of this Core. */
  get sequencePtr(): number {
    return this.k.hashSequencePtr();
  }

  private reserveTokens(n: number): Uint32Array {
    this.viewTokens = this.localCount = this.sequenceCount = 0;
    return this.core.u32(this.k.hashReserveInput(n * 4), n);
  }
}
