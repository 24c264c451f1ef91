// The public shapes of a model fleet: what it is given (worker specs, request
// fields, options) and what it answers (routed requests, explanations, event
// counts). router/model-fleet.ts re-exports them.
import type { BusyThresholds } from '../../bindings/selection-contract.js';
import type { Clock } from '../clock.js';
import type { SchedRequest } from '../scheduler/contracts.js';
import type { SelectionPolicy } from '../selection/contracts.js';
import type { MediaSpan } from '../media-keys.js';
import type { Tier, TierDepths } from './tiers.js';
import type { LearnedSpeed } from './speeds.js';

export interface WorkerSpec {
  id: string;
  /** Data-parallel ranks served by this worker (ranks 0..n-1); default 1. */
  dataParallelSize?: number;
  /** KV cache capacity per rank, in blocks. */
  totalBlocks: number;
  /** The engine's per-step token budget per rank. */
  maxBatchedTokens: number;
  /** false: the worker publishes no KV events, so the router records what it routes there (approximate mode). */
  kvEvents?: boolean;
  /** Taints the worker carries, as "key=value" strings. */
  taints?: readonly string[];
}

export interface PreferredTaint {
  taint: string;
  weight: number;
}

/** A request the model fleet has hashed: what the scheduler and selection need. */
export interface RoutedRequest extends SchedRequest {
  readonly localHashes: BigUint64Array;
  readonly seqHashes: BigUint64Array;
  readonly requiredTaints: readonly string[];
  readonly preferredTaints: readonly PreferredTaint[];
}

export interface RequestFields extends Omit<SchedRequest, 'promptTokens'> {
  loraName?: string | null;
  cacheSalt?: string | null;
  /** The prompt's media items (images) and their placeholder runs, in prompt order: folded into the hashes of the blocks they overlap. */
  media?: readonly MediaSpan[];
  requiredTaints?: readonly string[];
  preferredTaints?: readonly PreferredTaint[];
}

/** Request fields with only an id: no session, class, priority, pin or worker restriction. */
export function plainFields(id: string, overrides: Partial<RequestFields> = {}): RequestFields {
  return { id, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null, ...overrides };
}

export interface ModelFleetOptions {
  model: string;
  blockSize: number;
  clock: Clock;
  policy?: SelectionPolicy;
  /** Fixes every random choice (tie-breaks, softmax, random pickers). */
  seed?: number;
  /** Approximate mode: how long a routed block counts as cached (default 120 s). */
  routedTtlMs?: number;
  /** Approximate mode: most routed blocks kept before pruning (default 2^20). */
  maxRoutedBlocks?: number;
  /** Most bytes the prefix index may hold before it evicts the coldest blocks (default: no bound). */
  indexMemoryBytes?: number;
  /** Cores the prefix index is sharded over (default: as many as indexMemoryBytes needs). */
  indexShards?: number;
  /** What a cached block in each storage tier is worth against a GPU-resident one (default GPU 1, CPU 0.75, disk 0.25). */
  tierWeights?: Partial<Record<Tier, number>>;
  /** 'reference' runs the same decisions on the pure-TS twins (the benchmarks' baseline). */
  kernels?: 'wasm' | 'reference';
  /**
   * The busy thresholds most decisions use (the default class's): the core's
   * fast path keeps a view for them from the start. Other thresholds get a
   * view of their own when first used.
   */
  fastPathBusy?: BusyThresholds | null;
}

export interface WorkerExplanation {
  worker: string;
  eligible: boolean;
  /** Why the worker was filtered, when it was. */
  filtered: string | null;
  overlapBlocks: number;
  /** The cached prefix's blocks in each storage tier (gpu alone until an event names another). */
  overlapByTier: TierDepths;
  /** The blocks the decision credits the prefix: each at its best tier's weight. */
  creditedBlocks: number;
  cachedTokens: number;
  prefillTokens: number;
  decodeBlocks: number;
  activeRequests: number;
  cost: number | null;
  /** What the router has learned of the worker's prefill speed (speeds.ts). */
  speed: LearnedSpeed | null;
  /**
   * When the request's first token would come out there: the learned fixed
   * part plus its queued prefill and its own uncached tokens at the learned
   * speed (and, under the ttft policy, its decoding requests at the policy's
   * decode weight); the cost adds the reuse term to this.
   */
  predictedTtftMs: number | null;
}

export interface Explanation {
  model: string;
  policy: string;
  promptTokens: number;
  promptBlocks: number;
  chosen: string | null;
  error: { code: string; message: string } | null;
  workers: WorkerExplanation[];
}

export interface EventCounts {
  stored: number;
  removed: number;
  cleared: number;
  skippedStores: number;
  blockSizeMismatches: number;
  /** Events naming a medium the router does not know. */
  otherMedium: number;
  /** Events of a KV cache group that is not the worker's prefix group (sliding window, Mamba, a second full-attention group). */
  otherGroups: number;
  /** Stores that name blocks by hash without their tokens (an offloading tier's placeholders). */
  placeholderStores: number;
  stale: number;
}

export function emptyCounts(): EventCounts {
  return { stored: 0, removed: 0, cleared: 0, skippedStores: 0, blockSizeMismatches: 0, otherMedium: 0, otherGroups: 0, placeholderStores: 0, stale: 0 };
}
