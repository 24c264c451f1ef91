// The public contract of the selection kernels (LoadTable, Selector,
// Rendezvous): their shapes, the eligibility reason codes, and the checks every
// input goes through. The wasm bindings and their twins in bindings/reference/
// share it, so both reject the same inputs with the same messages.
import type { WorkerSlots } from './workers.js';

/** A prompt's chained sequence hashes (u64). */
export type SeqHashes = BigUint64Array | readonly bigint[];

export interface WorkerCapacity {
  /** KV cache capacity in blocks (0 = unknown: the decode busy threshold skips the worker). */
  totalBlocks: number;
  /** The engine's max batched tokens (0 = unknown: the fractional prefill threshold skips it). */
  maxBatchedTokens: number;
}

/** The ledger's per-worker columns, indexed by slot. Views: valid until the next call on the Core. */
export interface LedgerColumns {
  present: Uint8Array;
  available: Uint8Array;
  totalBlocks: Uint32Array;
  maxBatchedTokens: Uint32Array;
  activePrefillTokens: Float64Array;
  /** Distinct sequence hashes among the worker's active requests. */
  activeDecodeBlocks: Uint32Array;
  activeRequests: Uint32Array;
  /** Of the active requests, those past their first token. */
  decodingRequests: Uint32Array;
  /** The worker's speed (setSpeed): the fixed part of a time to first token, ms. */
  speedBaseMs: Float64Array;
  /** ms per prefill token. */
  speedMsPerToken: Float64Array;
}

/**
 * How fast a worker prefills, as the ttft cost reads it: its time to first
 * token for Q tokens of prefill ahead (its own included) is about
 * baseMs + msPerToken x Q.
 */
export interface WorkerSpeed {
  baseMs: number;
  msPerToken: number;
}

/** What a worker's speed is until it is set: one token per ms, nothing fixed. */
export const UNIT_SPEED: Readonly<WorkerSpeed> = Object.freeze({ baseMs: 0, msPerToken: 1 });

/**
 * The last projection, indexed by slot. Views: valid until the next call on the
 * Core. The wasm ledger fills the potential columns when they are first read
 * after project(), from the load at that moment: read them while `projected` is
 * defined (the ledger has not changed since).
 */
export interface ProjectionColumns {
  overlapBlocks: Uint32Array;
  potentialPrefillTokens: Float64Array;
  potentialDecodeBlocks: Uint32Array;
}

/** Sparse (slot, cached prefix depth in blocks) pairs, as the prefix index reports them. */
export interface OverlapList {
  slots: ArrayLike<number>;
  depths: ArrayLike<number>;
}

export interface ProjectionRequest {
  seqHashes: SeqHashes;
  promptTokens: number;
  blockSize: number;
  overlaps?: OverlapList;
}

/** How old a request may get before sweep() drops it (a lost free must not leak load forever). */
export const DEFAULT_SWEEP_AGE_MS = 300_000;

export interface LoadLedger {
  readonly workers: WorkerSlots;
  /** Bumped by every change to the ledger (load, capacity, availability, taint groups, workers). */
  readonly version: number;
  /** Rows in the columns: one per worker slot the ledger has seen. */
  readonly rows: number;
  readonly liveRequests: number;
  /** Distinct sequence hashes active on any worker. */
  readonly activeHashes: number;
  readonly columns: LedgerColumns;
  readonly projection: ProjectionColumns;
  /** The request the projection columns describe, or undefined when the ledger changed since. */
  readonly projected: { promptTokens: number; blockSize: number } | undefined;
  setWorker(slot: number, capacity: WorkerCapacity): void;
  setAvailable(slot: number, available: boolean): void;
  /**
   * Puts a present worker in taint group `group`: the workers that carry the
   * same set of taints, numbered by the caller (every worker starts in 0).
   */
  setGroup(slot: number, group: number): void;
  /** The worker's speed for the ttft cost (UNIT_SPEED until set). */
  setSpeed(slot: number, speed: WorkerSpeed): void;
  /** Drops the worker's requests and row; returns the dropped request ids (order unspecified). */
  removeWorker(slot: number): string[];
  has(requestId: string): boolean;
  add(requestId: string, slot: number, seqHashes: SeqHashes, uncachedTokens: number, now: number): void;
  prefillComplete(requestId: string): boolean;
  /**
   * Takes up to `tokens` (an integer >= 0) off the prefill a request still in
   * prefill counts, leaving it at least `keep` (default 0; or what it has,
   * when less): tokens its worker has computed ahead of its first token.
   * Returns the tokens taken (0 for an unknown request, one past its first
   * token, or one with no more than `keep` left).
   */
  prefillProgress(requestId: string, tokens: number, keep?: number): number;
  free(requestId: string): boolean;
  /** Frees requests added more than maxAgeMs before now; returns their ids (order unspecified). */
  sweep(now: number, maxAgeMs?: number): string[];
  project(request: ProjectionRequest): void;
}

/** Why a worker is not eligible; the REASON column holds these codes. */
export const EligibilityReason = {
  eligible: 0,
  absent: 1,
  unavailable: 2,
  notAllowed: 3,
  busyPrefillTokens: 4,
  busyPrefillFraction: 5,
  busyDecodeFraction: 6,
} as const;

/** Any one that is set and exceeded makes a worker busy (overloaded). */
export interface BusyThresholds {
  /** Busy when active prefill tokens > this. */
  prefillTokens?: number;
  /** Busy when active prefill tokens > this x max batched tokens. */
  prefillFraction?: number;
  /** Busy when active decode blocks / total blocks > this, in [0, 1]. */
  decodeFraction?: number;
  /**
   * Busy when the request's predicted time to first token on the worker it
   * would go to exceeds this (ms), and waiting could bring it under: judged
   * by the router from the learned speeds (router/model-fleet/speeds.ts) at
   * admission, not by the core's per-worker eligibility.
   */
  ttftMs?: number;
}

export interface CostWeights {
  /** Blocks of prefill credited per overlapping block (default 1). */
  overlapCredit?: number;
  /** Weight of prefill blocks against decode blocks (default 1). */
  prefillLoadScale?: number;
  /** Cost per active request (default 0). */
  activeRequestWeight?: number;
}

export interface EligibilityOptions {
  /** Only these slots may be picked (absent: all). */
  allowedSlots?: ArrayLike<number>;
  busy?: BusyThresholds;
}

export interface CostOptions {
  cost?: CostWeights;
  /** Per slot, the summed weights of the preferred taints the worker matches (absent or 0: no effect). */
  taintWeights?: ArrayLike<number>;
}

export interface SelectOptions extends EligibilityOptions, CostOptions {
  /** 0 (default) takes the cheapest; T > 0 samples a softmax over normalised costs. */
  temperature?: number;
  /**
   * Run the full scan even where the fast path could answer (it writes the
   * selector's columns as it goes). The pick follows the same rule either way.
   */
  fullScan?: boolean;
}

/**
 * The parameters a model fleet decides with, fixed ahead of its decisions so the
 * ledger can keep every worker's request-independent cost (under the kv cost
 * with these weights and block size) and its busy state under these
 * thresholds in trees (Selector.enableFastPath). A select() whose block size
 * (the projection's), prefill load scale, active request weight and busy
 * thresholds equal these, with temperature 0 and no taint weights, takes the
 * fast path; any other select() runs the full scan. Both pick the same worker.
 * The overlap credit may differ per request.
 */
export interface FastPathConfig {
  blockSize: number;
  cost?: Omit<CostWeights, 'overlapCredit'>;
  busy?: BusyThresholds;
}

/** How a select() was answered: 'fast' (touched workers plus the tree) or 'scan' (every row). */
export type SelectionPath = 'fast' | 'scan';

export interface EligibilityCounts {
  /** Rows with a worker. */
  present: number;
  /** Present and available. */
  available: number;
  /** Available and in the allow-list. */
  allowed: number;
  /** Allowed but busy. */
  overloaded: number;
  eligible: number;
}

export interface Selection {
  /** The picked slot, or -1 when no worker is eligible. */
  slot: number;
  /** Its cost (+Infinity when none). */
  cost: number;
  counts: EligibilityCounts;
}

/** The selector's per-slot columns. Views: valid until the next call on the Core. */
export interface SelectorColumns {
  /** 1 = eligible. Writable: a custom filter may clear entries between eligibility() and score(). */
  eligible: Uint8Array;
  reason: Uint8Array;
  cost: Float64Array;
}

export interface WorkerSelector {
  /**
   * After a select() answered on the fast path, a full pass fills these when
   * they are first read (O(rows)); read them before the ledger changes.
   */
  readonly columns: SelectorColumns;
  /** How the last select() was answered (undefined before any). */
  readonly lastPath: SelectionPath | undefined;
  /** Fixes the model fleet's parameters and turns the fast path on (O(rows)); call again to change them. */
  enableFastPath(config: FastPathConfig): void;
  reseed(seed: number): void;
  /** The generator's next raw u32 (advances the stream the picker draws from). */
  nextRandom(): number;
  eligibility(options?: EligibilityOptions): EligibilityCounts;
  /** Costs every eligible row from the ledger's current projection. */
  score(options?: CostOptions): void;
  /**
   * Picks among eligible rows by cost; -1 when none. Needs score() after the
   * last eligibility(). Temperature 0: the r-th of the rows at the minimum
   * cost in slot order, r uniform (one draw when rows tie, none otherwise);
   * T > 0: a softmax over normalised costs.
   */
  pick(temperature?: number): number;
  /**
   * Picks a worker for the projected request: the same pick, cost and counts
   * as eligibility, score and pick in turn, on the fast path too.
   */
  select(options?: SelectOptions): Selection;
}

export type RoutingIds = BigUint64Array | readonly bigint[];

export interface RendezvousHasher {
  /** Indices into ids of the min(k, ids.length) highest-ranking workers for key, best first. */
  topK(ids: RoutingIds, key: bigint, k: number): number[];
  /** The same members as ids. */
  topKIds(ids: RoutingIds, key: bigint, k: number): bigint[];
}

// ---- checks ----

const U32_MAX = 0xffffffff;
const U64_LIMIT = 1n << 64n;

export function checkRequestId(requestId: unknown): asserts requestId is string {
  if (typeof requestId !== 'string' || requestId.length === 0) {
    throw new TypeError(`requestId must be a non-empty string, got ${String(requestId)}`);
  }
}

/** An integer in [0, max]: token and block counts, slots. */
export function checkCount(name: string, value: unknown, max = U32_MAX): asserts value is number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw new RangeError(`${name} must be an integer in [0, ${max}], got ${String(value)}`);
  }
}

/** Every element an integer in [0, max]; the message names the first bad index. */
export function checkCounts(name: string, values: ArrayLike<number>, max = U32_MAX): void {
  if (values instanceof Uint32Array && max === U32_MAX) return;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) checkCount(`${name}[${i}]`, v, max);
  }
}

/** A finite number in [min, max]. */
export function checkFinite(name: string, value: unknown, min = 0, max = Number.MAX_VALUE): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    const range = max === Number.MAX_VALUE ? `>= ${min}` : `in [${min}, ${max}]`;
    throw new RangeError(`${name} must be a finite number ${range}, got ${String(value)}`);
  }
}

export function checkU64s(name: string, values: unknown): asserts values is BigUint64Array | readonly bigint[] {
  if (values instanceof BigUint64Array) return;
  if (!Array.isArray(values)) throw new TypeError(`${name} must be a BigUint64Array or an array of bigints`);
  for (let i = 0; i < values.length; i++) {
    const v: unknown = values[i];
    if (typeof v !== 'bigint' || v < 0n || v >= U64_LIMIT) {
      throw new RangeError(`${name}[${i}] must be a bigint in [0, 2^64), got ${String(v)}`);
    }
  }
}

export function checkU64(name: string, value: unknown): asserts value is bigint {
  if (typeof value !== 'bigint' || value < 0n || value >= U64_LIMIT) {
    throw new RangeError(`${name} must be a bigint in [0, 2^64), got ${String(value)}`);
  }
}

export function checkWorkerSlot(workers: WorkerSlots, slot: unknown): asserts slot is number {
  checkCount('slot', slot);
  if (!workers.has(slot)) throw new RangeError(`slot ${slot} is not held by any worker in the WorkerSlots`);
}

export function checkCapacity(capacity: WorkerCapacity): void {
  if (typeof capacity !== 'object' || capacity === null) throw new TypeError('capacity must be an object');
  checkCount('capacity.totalBlocks', capacity.totalBlocks);
  checkCount('capacity.maxBatchedTokens', capacity.maxBatchedTokens);
}

export function checkSpeed(speed: WorkerSpeed): void {
  if (typeof speed !== 'object' || speed === null) throw new TypeError('speed must be an object');
  checkFinite('speed.baseMs', speed.baseMs);
  checkFinite('speed.msPerToken', speed.msPerToken);
  if (speed.msPerToken === 0) throw new RangeError('speed.msPerToken must be > 0, got 0');
}

export function notInLedger(slot: number): RangeError {
  return new RangeError(`slot ${slot} is not a worker in the ledger (call setWorker first)`);
}

export function duplicateRequest(requestId: string): Error {
  return new Error(`request ${JSON.stringify(requestId)} is already booked in the ledger`);
}

export function checkAdd(requestId: unknown, slot: unknown, seqHashes: unknown, uncachedTokens: unknown, now: unknown): void {
  checkRequestId(requestId);
  checkCount('slot', slot);
  checkU64s('seqHashes', seqHashes);
  checkCount('uncachedTokens', uncachedTokens);
  checkFinite('now', now);
}

export function checkSweep(now: unknown, maxAgeMs: unknown): void {
  checkFinite('now', now);
  checkFinite('maxAgeMs', maxAgeMs);
}

export function checkProjection(request: ProjectionRequest): void {
  if (typeof request !== 'object' || request === null) throw new TypeError('projection request must be an object');
  checkU64s('seqHashes', request.seqHashes);
  checkCount('promptTokens', request.promptTokens);
  checkCount('blockSize', request.blockSize);
  if (request.blockSize === 0) throw new RangeError('blockSize must be at least 1');
  const overlaps = request.overlaps;
  if (overlaps === undefined) return;
  if (overlaps.slots.length !== overlaps.depths.length) {
    throw new RangeError(`overlaps.slots has ${overlaps.slots.length} entries but overlaps.depths has ${overlaps.depths.length}`);
  }
  checkCounts('overlaps.slots', overlaps.slots);
  checkCounts('overlaps.depths', overlaps.depths);
}

/** The thresholds as the kernel takes them: +Infinity where a threshold is off. */
export function busyLimits(busy: BusyThresholds | undefined): [prefillTokens: number, prefillFraction: number, decodeFraction: number] {
  const b = busy ?? {};
  if (b.prefillTokens !== undefined) checkFinite('busy.prefillTokens', b.prefillTokens);
  if (b.prefillFraction !== undefined) checkFinite('busy.prefillFraction', b.prefillFraction);
  if (b.decodeFraction !== undefined) checkFinite('busy.decodeFraction', b.decodeFraction, 0, 1);
  return [b.prefillTokens ?? Infinity, b.prefillFraction ?? Infinity, b.decodeFraction ?? Infinity];
}

export function costWeights(cost: CostWeights | undefined): [overlapCredit: number, prefillLoadScale: number, activeRequestWeight: number] {
  const c = cost ?? {};
  const credit = c.overlapCredit ?? 1;
  const scale = c.prefillLoadScale ?? 1;
  const weight = c.activeRequestWeight ?? 0;
  checkFinite('cost.overlapCredit', credit);
  checkFinite('cost.prefillLoadScale', scale);
  checkFinite('cost.activeRequestWeight', weight);
  return [credit, scale, weight];
}

/** The fast path's parameters as the core takes them: [scale, weight, blockSize, prefillTokens, prefillFraction, decodeFraction]. */
export function fastPathArgs(config: FastPathConfig): [number, number, number, number, number, number] {
  if (typeof config !== 'object' || config === null) throw new TypeError('fast path config must be an object');
  checkCount('blockSize', config.blockSize);
  if (config.blockSize === 0) throw new RangeError('blockSize must be at least 1');
  const [, scale, weight] = costWeights(config.cost);
  return [scale, weight, config.blockSize, ...busyLimits(config.busy)];
}

export function columnsGone(): Error {
  return new Error('the ledger changed since the fast-path select(): read the selector columns before booking, or pass fullScan: true');
}

export function checkTaintWeights(weights: ArrayLike<number>, rows: number): void {
  if (weights.length > rows) throw new RangeError(`taintWeights has ${weights.length} entries but the ledger has ${rows} rows`);
  for (let i = 0; i < weights.length; i++) {
    if (!Number.isFinite(weights[i])) throw new RangeError(`taintWeights[${i}] must be a finite number, got ${String(weights[i])}`);
  }
}

export function checkTemperature(temperature: unknown): asserts temperature is number {
  checkFinite('temperature', temperature);
}

export function checkSeed(seed: unknown): asserts seed is number {
  checkCount('seed', seed);
}

export function staleProjection(): Error {
  return new Error('the ledger changed since its last projection: call ledger.project(request) before scoring');
}

export function notScored(): Error {
  return new Error('pick needs score() after the last eligibility()');
}

export function checkTopK(ids: unknown, key: unknown, k: unknown): void {
  checkU64s('ids', ids);
  checkU64('key', key);
  checkCount('k', k);
  const seen = new Set<bigint>();
  for (const id of ids as RoutingIds) {
    if (seen.has(id)) throw new RangeError(`ids must be distinct: ${id} appears twice`);
    seen.add(id);
  }
}
