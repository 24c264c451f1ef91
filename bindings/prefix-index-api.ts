// What the prefix index binding and its pure-TS twin share: the public types
// and the checks on caller input, so both reject the same input the same way.
import type { WorkerKey, WorkerSlots } from './workers.js';

/** Workers that hold a prompt's leading blocks: the first `count` entries, slot and matched blocks. */
export interface MatchResult {
  count: number;
  /**
   * Worker slots (see `PrefixIndex.workers`). From the wasm index the pairs
   * are derived from its compact answer when first read, and must be read
   * before the next call that changes the index or its answer (a later read
   * throws); the arrays are views valid until then.
   */
  slots: Uint32Array;
  /** Leading blocks each worker holds, same order as slots. */
  depths: Uint32Array;
  /**
   * The blocks each match is credited, same order (a prefix partly held in
   * offloaded tiers is worth less than its depth); absent: its depth.
   */
  credits?: Float64Array;
}

export interface PrefixIndexOptions {
  /**
   * Most bytes the index may hold; past it the least recently stored or
   * matched blocks are forgotten (counted per worker). Default: no bound.
   */
  memoryBoundBytes?: number;
  /** Time-to-live of a routed block, refreshed on reinsert (approximate mode). Default 120 s. */
  ttlMs?: number;
  /** Routed blocks kept at most; past it the earliest-expiring are pruned. Default 2^20. */
  maxRoutedBlocks?: number;
  /** A prune keeps floor(maxRoutedBlocks * ratio) routed blocks. Default 0.8. */
  pruneTargetRatio?: number;
}

export interface PrefixIndexStats {
  /** Tree nodes (distinct block positions), the root excluded. */
  nodes: number;
  /** (worker, block) pairs: each worker counted once per block it holds. */
  blocks: number;
  /** Blocks held only through approximate-mode inserts. */
  routedBlocks: number;
  /** Stored events skipped because the worker did not know their parent id. */
  unknownParents: number;
  /** Removed ids the worker did not hold. */
  unknownRemovals: number;
  /** Bytes the wasm core holds (all its kernels); 0 for the twin. */
  liveBytes: number;
  /** Bytes the index holds, its pools' free records included; 0 for the twin. */
  indexBytes: number;
  /** Ids forgotten under the memory bound (the twin: forgotten through forget()). */
  evictedBlocks: number;
  /** Updates the index could not complete for want of memory (their workers were cleared). */
  allocationFailures: number;
}

/**
 * An update the index could not complete: the core had no memory for it, or
 * trapped in the middle of it, or its worker is no longer registered. The
 * index is consistent again, and the workers named here hold nothing in it
 * (they were cleared, or are gone), so their event streams must be treated
 * as stale.
 */
export class IndexFailure extends Error {
  override name = 'IndexFailure';
  constructor(
    readonly kind: 'no-memory' | 'trap' | 'unknown-worker',
    readonly workers: readonly WorkerKey[],
    detail: string,
  ) {
    super(detail);
  }
}

/** An event that rebuilds index state: what `dump()` returns. */
export type IndexEvent =
  | { type: 'stored'; worker: WorkerKey; parent: bigint | null; external: bigint[]; local: bigint[] }
  | { type: 'removed'; worker: WorkerKey; external: bigint[] };

/** The prefix index as callers see it: the wasm PrefixIndex and its twin both implement it. */
export interface PrefixIndexApi {
  readonly workers: WorkerSlots;
  /** A stored event; false (and counted) when the worker does not know the parent id. */
  applyStored(worker: WorkerKey, parent: bigint | null, external: ArrayLike<bigint>, local: ArrayLike<bigint>): boolean;
  applyRemoved(worker: WorkerKey, external: ArrayLike<bigint>): void;
  applyCleared(worker: WorkerKey): void;
  /** Removes every rank of a worker id. */
  removeWorker(id: string): void;
  /**
   * For each worker holding the prompt's first block, how many leading blocks
   * it holds: d when it holds blocks 0..d-1 along the prompt's path and not
   * block d. Workers scoring 0 are not listed; order is unspecified.
   * earlyExit: the walk stops at the first depth d at which exactly one worker
   * still matches; that worker is reported with d, a lower bound on its
   * overlap, and every other worker's depth is exact. If a single survivor
   * never occurs, the result is the same as without earlyExit.
   */
  findMatches(local: ArrayLike<bigint>, earlyExit?: boolean): MatchResult;
  /**
   * Approximate mode: the worker was sent these blocks at nowMs. Each block
   * is held under its chained sequence hash (seq[0] = local[0],
   * seq[i] = chainMix(seq[i-1], local[i]), see assembly/prefix-bind.ts) until
   * nowMs + ttlMs; inserting it again refreshes that. Past maxRoutedBlocks,
   * the earliest-expiring routed blocks go (deepest first on ties, then by
   * slot and id) until floor(maxRoutedBlocks * pruneTargetRatio) remain.
   * A routed block met by a stored event becomes a stored block.
   */
  insertRouted(worker: WorkerKey, local: ArrayLike<bigint>, nowMs: number): void;
  /** Removes routed blocks whose expiry is at or before nowMs; returns how many. */
  expire(nowMs: number): number;
  /**
   * Events that rebuild this index's holdings (ids and references included)
   * when applied to an empty index (applyIndexEvents); see
   * bindings/prefix-index-dump.ts. Routed blocks come out as stored blocks.
   */
  dump(): IndexEvent[];
  stats(): PrefixIndexStats;
  /**
   * Ids of the worker forgotten under the memory bound since it was last
   * cleared (or the index was last empty): its overlap may be under-estimated.
   */
  evictedBlocks(worker: WorkerKey): number;
}

export interface ResolvedIndexOptions {
  /** 0: no bound. */
  memoryBoundBytes: number;
  ttlMs: number;
  maxRoutedBlocks: number;
  /** Routed blocks a prune keeps. */
  pruneTarget: number;
}

export const DEFAULT_TTL_MS = 120_000;
export const DEFAULT_MAX_ROUTED_BLOCKS = 2 ** 20;
export const DEFAULT_PRUNE_TARGET_RATIO = 0.8;


export function resolveIndexOptions(opts: PrefixIndexOptions): ResolvedIndexOptions {
  const ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS;
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new RangeError(`ttlMs must be a positive finite number of milliseconds, got ${String(ttlMs)}`);
  }
  const maxRoutedBlocks = opts.maxRoutedBlocks ?? DEFAULT_MAX_ROUTED_BLOCKS;
  if (!Number.isInteger(maxRoutedBlocks) || maxRoutedBlocks < 1 || maxRoutedBlocks > 2 ** 31) {
    throw new RangeError(`maxRoutedBlocks must be an integer in [1, 2^31], got ${String(maxRoutedBlocks)}`);
  }
  const ratio = opts.pruneTargetRatio ?? DEFAULT_PRUNE_TARGET_RATIO;
  if (typeof ratio !== 'number' || !(ratio > 0 && ratio <= 1)) {
    throw new RangeError(`pruneTargetRatio must be in (0, 1], got ${String(ratio)}`);
  }
  const memoryBoundBytes = opts.memoryBoundBytes ?? 0;
  if (typeof memoryBoundBytes !== 'number' || !Number.isSafeInteger(memoryBoundBytes) || memoryBoundBytes < 0) {
    throw new RangeError(`memoryBoundBytes must be a non-negative integer, got ${String(memoryBoundBytes)}`);
  }
  return { memoryBoundBytes, ttlMs, maxRoutedBlocks, pruneTarget: Math.floor(maxRoutedBlocks * ratio) };
}

export function checkWorker(worker: WorkerKey, field = 'worker'): void {
  if (typeof worker !== 'object' || worker === null) throw new TypeError(`${field} must be a { id, rank } object`);
  if (typeof worker.id !== 'string' || worker.id.length === 0) throw new TypeError(`${field}.id must be a non-empty string`);
  if (!Number.isInteger(worker.rank) || worker.rank < 0 || worker.rank > 0xffff) {
    throw new RangeError(`${field}.rank must be an integer in [0, 65535], got ${String(worker.rank)}`);
  }
}

/** Whether value is a bigint in [0, 2^64). */
export function isU64(value: unknown): value is bigint {
  return typeof value === 'bigint' && BigInt.asUintN(64, value) === value;
}

export function checkHash(value: bigint, field: string): void {
  if (typeof value !== 'bigint') throw new TypeError(`${field} must be a bigint, got ${typeof value}`);
  if (!isU64(value)) throw new RangeError(`${field} must be an unsigned 64-bit integer, got ${value}`);
}

export function checkArrayLike(values: ArrayLike<bigint>, field: string): void {
  if (typeof values !== 'object' || values === null || !Number.isInteger(values.length) || values.length < 0) {
    throw new TypeError(`${field} must be an array of bigint hashes`);
  }
}

/** Checks every element; a BigUint64Array is valid by construction. */
export function checkHashes(values: ArrayLike<bigint>, field: string): void {
  if (values instanceof BigUint64Array) return;
  checkArrayLike(values, field);
  for (let i = 0; i < values.length; i++) {
    if (!isU64(values[i])) checkHash(values[i]!, `${field}[${i}]`);
  }
}

export function checkChain(external: ArrayLike<bigint>, local: ArrayLike<bigint>): void {
  checkHashes(external, 'external');
  checkHashes(local, 'local');
  checkSameLength(external, local);
}

export function checkSameLength(external: ArrayLike<bigint>, local: ArrayLike<bigint>): void {
  if (external.length !== local.length) {
    throw new RangeError(`external and local must have one hash per block each, got ${external.length} and ${local.length}`);
  }
}

export function checkTime(nowMs: number): void {
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs)) throw new TypeError(`nowMs must be a finite number, got ${String(nowMs)}`);
}
