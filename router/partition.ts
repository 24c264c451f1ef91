// One routing partition (a model): its workers, the wasm core that indexes
// their KV caches and tracks their load, and the selection policy. It hashes
// prompts, applies KV events, and is the scheduler's Placement: cached-prefix
// snapshots, classifier rows, capacity checks, and admission (select + book).
import { BlockHasher } from '../bindings/block-hasher.js';
import { Core } from '../bindings/core.js';
import { LoadTable } from '../bindings/load-table.js';
import type { PrefixIndexApi } from '../bindings/prefix-index-api.js';
import { PrefixIndex } from '../bindings/prefix-index.js';
import { BlockHasher as ReferenceBlockHasher } from '../bindings/reference/block-hasher.js';
import { seedFor } from '../bindings/reference/hash-inputs.js';
import { ReferenceLoadTable } from '../bindings/reference/load-table.js';
import { ReferencePrefixIndex } from '../bindings/reference/prefix-index.js';
import { ReferenceSelector } from '../bindings/reference/selector.js';
import type { BusyThresholds, EligibilityCounts, LoadLedger, WorkerSelector } from '../bindings/selection-contract.js';
import { Selector } from '../bindings/selector.js';
import { WorkerSlots, workerLabel, type WorkerKey } from '../bindings/workers.js';
import type { Clock } from './clock.js';
import { RouterError } from './errors.js';
import type { KvEventBatch } from './kv-events.js';
import { defaultCostPolicy } from './plugins/selection/default-cost.js';
import type { Admission, CapacityVerdict, Placement, SchedRequest, WorkerCapacity } from './scheduler/contracts.js';
import { policyInputs, type SelectionContext, type SelectionPolicy } from './selection/contracts.js';
import { buildRows, eligibilityReasonName } from './worker-rows.js';
import { WorkerInputs, type WorkerInputMask, type WorkerRows } from './worker-inputs.js';

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

/** A request the partition has hashed: what the scheduler and selection need. */
export interface RoutedRequest extends SchedRequest {
  readonly localHashes: BigUint64Array;
  readonly seqHashes: BigUint64Array;
  readonly requiredTaints: readonly string[];
  readonly preferredTaints: readonly PreferredTaint[];
}

export interface RequestFields extends Omit<SchedRequest, 'promptTokens'> {
  loraName?: string | null;
  cacheSalt?: string | null;
  requiredTaints?: readonly string[];
  preferredTaints?: readonly PreferredTaint[];
}

/** Request fields with only an id: no session, class, priority, pin or worker restriction. */
export function plainFields(id: string, overrides: Partial<RequestFields> = {}): RequestFields {
  return { id, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null, ...overrides };
}

export interface PartitionOptions {
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
  /** 'reference' runs the same decisions on the pure-TS twins (the benchmarks' baseline). */
  kernels?: 'wasm' | 'reference';
  /**
   * The busy thresholds most decisions use (the default class's). Decisions
   * with them take the core's fast path, which looks only at the workers a
   * request touches; others scan every worker.
   */
  fastPathBusy?: BusyThresholds | null;
}

/** What the partition needs of a block hasher for KV events: the wasm one and its twin both fit. */
interface Hasher {
  localHashes(tokens: ArrayLike<number>, blockSize: number, seed?: bigint): BigUint64Array;
}

/** A prompt's local and chained sequence hashes. */
type PromptHashes = { local: BigUint64Array; sequence: BigUint64Array };

/** Token ids must be u32 integers; one tight loop per array kind keeps element access monomorphic. */
function checkTokens(tokens: ArrayLike<number>): void {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t >>> 0 !== t) throw new RangeError(`tokens[${i}] must be an integer in [0, 2^32), got ${t}`);
  }
}

/** Both hashes in one pass through the core: tokens go in once, both lists come out. */
function coreHashes(hasher: BlockHasher, tokens: ArrayLike<number>, blockSize: number, seed: bigint): PromptHashes {
  if (!(tokens instanceof Uint32Array)) checkTokens(tokens);
  // Validated above, so a bulk set (memcpy-like from typed arrays and packed arrays) is safe.
  hasher.tokenView(tokens.length).set(tokens);
  const count = hasher.hashInto(tokens.length, blockSize, seed, true);
  return { local: hasher.localView(count).slice(), sequence: hasher.sequenceView(count).slice() };
}

export interface WorkerExplanation {
  worker: string;
  eligible: boolean;
  /** Why the worker was filtered, when it was. */
  filtered: string | null;
  overlapBlocks: number;
  cachedTokens: number;
  prefillTokens: number;
  decodeBlocks: number;
  activeRequests: number;
  cost: number | null;
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
  otherMedium: number;
  stale: number;
}

interface WorkerMeta {
  spec: WorkerSpec;
  slots: number[];
  draining: boolean;
  /** Out of selection after failing (outlier ejection); kept apart from the operator's draining. */
  ejected: boolean;
  events: EventCounts;
}

const EMPTY_OVERLAPS = { slots: new Uint32Array(0), depths: new Uint32Array(0) };

export class Partition implements Placement<RoutedRequest> {
  readonly model: string;
  readonly blockSize: number;
  readonly policy: SelectionPolicy;
  readonly workers = new WorkerSlots();
  /** The wasm core holding this partition's kernels (undefined on the twins). */
  readonly core: Core | undefined;
  private readonly clock: Clock;
  private readonly hasher: Hasher;
  private readonly hash: (tokens: ArrayLike<number>, seed: bigint) => PromptHashes;
  private readonly index: PrefixIndexApi;
  private readonly ledger: LoadLedger;
  private readonly selector: WorkerSelector;
  private readonly meta = new Map<string, WorkerMeta>();
  private readonly approximate = new Set<number>();
  private readonly seeds = new Map<string, bigint>();
  private readonly inputs: WorkerInputMask;
  /** When each booking was made, in booking order (which is time order): what sweep() reads ages from. */
  private readonly bookedAt = new Map<string, number>();
  /** workerCapacities() until the worker set changes; undefined once it has. */
  private capacities: readonly WorkerCapacity[] | undefined;
  /** Bumped on every change to the index, so memoized lookups know when they are stale. */
  private indexVersion = 0;
  private matchMemo: { request: RoutedRequest | null; version: number; overlaps: { slots: Uint32Array; depths: Uint32Array } } = {
    request: null,
    version: -1,
    overlaps: EMPTY_OVERLAPS,
  };
  /** The last projection's overlap list (slot, depth), for the chosen worker's overlap. */
  private overlaps: { slots: Uint32Array; depths: Uint32Array } = EMPTY_OVERLAPS;

  constructor(options: PartitionOptions) {
    if (!Number.isInteger(options.blockSize) || options.blockSize <= 0) throw new RangeError(`block size must be a positive integer, got ${options.blockSize}`);
    this.model = options.model;
    this.blockSize = options.blockSize;
    this.clock = options.clock;
    this.policy = options.policy ?? defaultCostPolicy();
    this.inputs = policyInputs(this.policy);
    const indexOptions = { workers: this.workers, ttlMs: options.routedTtlMs, maxRoutedBlocks: options.maxRoutedBlocks };
    if (options.kernels === 'reference') {
      this.core = undefined;
      const hasher = new ReferenceBlockHasher();
      this.hasher = hasher;
      this.hash = (tokens, seed) => {
        const local = hasher.localHashes(tokens, this.blockSize, seed);
        return { local, sequence: hasher.sequenceHashes(local, seed) };
      };
      this.index = new ReferencePrefixIndex(indexOptions);
      const ledger = new ReferenceLoadTable({ workers: this.workers });
      this.ledger = ledger;
      this.selector = new ReferenceSelector({ ledger, seed: options.seed ?? 0 });
    } else {
      const core = new Core();
      this.core = core;
      const hasher = new BlockHasher({ core });
      this.hasher = hasher;
      this.hash = (tokens, seed) => coreHashes(hasher, tokens, this.blockSize, seed);
      this.index = new PrefixIndex({ core, ...indexOptions });
      const ledger = new LoadTable({ core, workers: this.workers });
      this.ledger = ledger;
      this.selector = new Selector({ ledger, seed: options.seed ?? 0 });
    }
    this.configureFastPath(options.fastPathBusy ?? null);
  }

  /** Sets the busy thresholds decisions take the fast path with (see PartitionOptions.fastPathBusy). */
  configureFastPath(busy: BusyThresholds | null): void {
    const core = this.policy.coreCost;
    if (!core) return;
    this.selector.enableFastPath({
      blockSize: this.blockSize,
      cost: { prefillLoadScale: core.prefillLoadScale, activeRequestWeight: core.activeRequestWeight },
      busy: busy ?? undefined,
    });
  }

  // ---- workers ----

  addWorker(spec: WorkerSpec): WorkerKey[] {
    if (this.meta.has(spec.id)) throw new RangeError(`worker "${spec.id}" is already registered for model ${this.model}`);
    const ranks = spec.dataParallelSize ?? 1;
    if (!Number.isInteger(ranks) || ranks < 1) throw new RangeError(`worker "${spec.id}": dataParallelSize must be a positive integer`);
    const slots: number[] = [];
    for (let rank = 0; rank < ranks; rank++) {
      const slot = this.workers.ensure(spec.id, rank);
      this.ledger.setWorker(slot, { totalBlocks: spec.totalBlocks, maxBatchedTokens: spec.maxBatchedTokens });
      if (spec.kvEvents === false) this.approximate.add(slot);
      slots.push(slot);
    }
    this.meta.set(spec.id, { spec, slots, draining: false, ejected: false, events: emptyCounts() });
    this.capacities = undefined;
    return slots.map((s) => this.workers.keyOf(s));
  }

  /** Forgets a worker; returns the ids of its requests still booked in the ledger. */
  removeWorker(id: string): string[] {
    const meta = this.meta.get(id);
    if (!meta) return [];
    this.index.removeWorker(id);
    this.indexVersion++;
    const dropped: string[] = [];
    for (const slot of meta.slots) {
      for (const requestId of this.ledger.removeWorker(slot)) {
        this.bookedAt.delete(requestId);
        dropped.push(requestId);
      }
      this.approximate.delete(slot);
      this.workers.release(id, this.workers.keyOf(slot).rank);
    }
    this.meta.delete(id);
    this.capacities = undefined;
    return dropped;
  }

  /** A draining worker takes no new requests; those in flight finish. */
  setDraining(id: string, draining: boolean): void {
    const meta = this.requireWorker(id);
    meta.draining = draining;
    this.applyAvailability(meta);
  }

  /** An ejected worker takes no new requests until it is readmitted; those in flight finish. */
  setEjected(id: string, ejected: boolean): void {
    const meta = this.requireWorker(id);
    meta.ejected = ejected;
    this.applyAvailability(meta);
  }

  private applyAvailability(meta: WorkerMeta): void {
    for (const slot of meta.slots) this.ledger.setAvailable(slot, !meta.draining && !meta.ejected);
    this.capacities = undefined;
  }

  hasWorker(id: string): boolean {
    return this.meta.has(id);
  }

  workerIds(): string[] {
    return [...this.meta.keys()];
  }

  workerSpec(id: string): WorkerSpec | undefined {
    return this.meta.get(id)?.spec;
  }

  isDraining(id: string): boolean {
    return this.meta.get(id)?.draining ?? false;
  }

  /** Worker ranks that take new requests. */
  liveWorkers(): number {
    let live = 0;
    for (const meta of this.meta.values()) if (!meta.draining && !meta.ejected) live += meta.slots.length;
    return live;
  }

  /** Live worker ranks and their KV capacity in tokens; the same array until the worker set changes. */
  workerCapacities(): readonly WorkerCapacity[] {
    if (!this.capacities) {
      const list: WorkerCapacity[] = [];
      for (const meta of this.meta.values()) {
        if (meta.draining || meta.ejected) continue;
        for (const slot of meta.slots) list.push(Object.freeze({ worker: this.workers.keyOf(slot), capacityTokens: meta.spec.totalBlocks * this.blockSize }));
      }
      this.capacities = Object.freeze(list);
    }
    return this.capacities;
  }

  // ---- requests ----

  /** Hashes a prompt into blocks and validates the pin; the result is what the scheduler queues. */
  prepare(fields: RequestFields, tokens: ArrayLike<number>): RoutedRequest {
    if (fields.pin) {
      const meta = this.meta.get(fields.pin.id);
      if (!meta || fields.pin.rank >= meta.slots.length) {
        throw new RouterError('KVR_ERR_UNKNOWN_WORKER', `worker ${workerLabel(fields.pin)} does not serve model ${this.model}`);
      }
    }
    const seed = this.seedOf(fields.loraName ?? null, fields.cacheSalt ?? null);
    const { local: localHashes, sequence: seqHashes } = this.hash(tokens, seed);
    return {
      id: fields.id,
      promptTokens: tokens.length,
      sessionId: fields.sessionId,
      sessionFinal: fields.sessionFinal,
      policyClass: fields.policyClass,
      priority: fields.priority,
      tier: fields.tier,
      pin: fields.pin,
      allowedWorkers: fields.allowedWorkers,
      localHashes,
      seqHashes,
      requiredTaints: fields.requiredTaints ?? [],
      preferredTaints: fields.preferredTaints ?? [],
    };
  }

  cachedTokens(request: RoutedRequest, allowed: readonly WorkerKey[] | null): number {
    const matches = this.overlapsOf(request);
    const allowedSlots = this.allowedSlots(request, allowed, []);
    const ok = allowedSlots ? new Set(allowedSlots) : null;
    let best = 0;
    for (let i = 0; i < matches.slots.length; i++) {
      if (ok && !ok.has(matches.slots[i]!)) continue;
      best = Math.max(best, matches.depths[i]!);
    }
    return Math.min(best * this.blockSize, request.promptTokens);
  }

  rows(request: RoutedRequest, allowed: readonly WorkerKey[] | null, inputs: WorkerInputMask): WorkerRows {
    if (inputs & (WorkerInputs.CACHE | WorkerInputs.LOAD)) this.project(request);
    this.selector.eligibility({ allowedSlots: this.allowedSlots(request, allowed, []) ?? undefined });
    return this.buildRows(request, inputs);
  }

  capacity(request: RoutedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[] = []): CapacityVerdict {
    // The same decision admission would make (fast where it applies), so the
    // capacity check and selection can never disagree.
    const { counts } = this.select(request, allowed, busy, exclude);
    if (counts.eligible > 0) return 'free';
    return counts.allowed === 0 ? 'none' : 'busy';
  }

  /** Live workers not busy under `busy`: one eligibility pass in the core, no projection or selection. */
  headroom(busy: BusyThresholds): number {
    return this.selector.eligibility({ busy }).eligible;
  }

  /** Required taints narrow a request's workers beyond its allowed set and pin. */
  constraintKey(request: RoutedRequest): string {
    return request.requiredTaints.join('\n');
  }

  admit(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null,
    busy: BusyThresholds | null,
    target: WorkerKey | null,
    exclude: readonly WorkerKey[],
  ): Admission | RouterError {
    const choice = this.choose(request, allowed, busy, target, exclude);
    if (RouterError.is(choice)) return choice;
    this.book(request, choice.worker, choice.cachedTokens);
    return choice;
  }

  /** The worker a request would go to now, without booking it. */
  choose(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null = request.allowedWorkers,
    busy: BusyThresholds | null = null,
    target: WorkerKey | null = null,
    exclude: readonly WorkerKey[] = [],
  ): Admission | RouterError {
    const decision = this.decide(request, allowed, busy, target, exclude);
    if (RouterError.is(decision)) return decision;
    const { slot, overlapBlocks } = decision;
    return { worker: this.workers.keyOf(slot), overlapBlocks, cachedTokens: Math.min(overlapBlocks * this.blockSize, request.promptTokens) };
  }

  /**
   * Books a request on a worker in the ledger (and, for a worker without KV
   * events, records its blocks as routed there). Admission books its own
   * choices; replicas book the choices their peers made.
   */
  book(request: RoutedRequest, worker: WorkerKey, cachedTokens: number): void {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot === undefined) throw new RangeError(`worker ${workerLabel(worker)} is not registered for model ${this.model}`);
    const now = this.clock.now();
    this.ledger.add(request.id, slot, request.seqHashes, Math.max(0, request.promptTokens - cachedTokens), now);
    this.bookedAt.set(request.id, now);
    if (this.approximate.has(slot)) {
      this.index.insertRouted(worker, request.localHashes, now);
      this.indexVersion++;
    }
  }

  firstToken(requestId: string): void {
    this.ledger.prefillComplete(requestId);
  }

  release(requestId: string): void {
    this.ledger.free(requestId);
    this.bookedAt.delete(requestId);
  }

  /**
   * Drops expired routed blocks, and reclaims bookings older than ageMs whose
   * request is gone (`live` says no): a booking whose free was lost must not
   * hold load forever, while one whose request still runs (a long stream)
   * keeps its load however long it takes. Returns the reclaimed request ids.
   */
  sweep(ageMs: number, live: (requestId: string) => boolean): string[] {
    const now = this.clock.now();
    if (this.index.expire(now) > 0) this.indexVersion++;
    const reclaimed: string[] = [];
    for (const [requestId, bookedAt] of this.bookedAt) {
      if (now - bookedAt <= ageMs) break; // the rest were booked later
      if (live(requestId)) continue;
      this.release(requestId);
      reclaimed.push(requestId);
    }
    return reclaimed;
  }

  /** The decision for a request without dispatching it: the chosen worker and every worker's breakdown. */
  explain(request: RoutedRequest, busy: BusyThresholds | null = null): Explanation {
    const decision = this.decide(request, request.allowedWorkers, busy, null, []);
    const cols = this.ledger.columns;
    const proj = this.ledger.projection;
    const sel = this.selector.columns;
    const workers: WorkerExplanation[] = [];
    for (const [slot, key] of this.workers.entries()) {
      const reason = sel.reason[slot]!;
      const overlap = proj.overlapBlocks[slot]!;
      workers.push({
        worker: workerLabel(key),
        eligible: sel.eligible[slot] === 1,
        filtered: sel.eligible[slot] === 1 ? null : eligibilityReasonName(reason, this.isDraining(key.id)),
        overlapBlocks: overlap,
        cachedTokens: Math.min(overlap * this.blockSize, request.promptTokens),
        prefillTokens: proj.potentialPrefillTokens[slot]!,
        decodeBlocks: proj.potentialDecodeBlocks[slot]!,
        activeRequests: cols.activeRequests[slot]!,
        cost: Number.isFinite(sel.cost[slot]!) ? sel.cost[slot]! : null,
      });
    }
    return {
      model: this.model,
      policy: this.policy.name,
      promptTokens: request.promptTokens,
      promptBlocks: Math.ceil(request.promptTokens / this.blockSize),
      chosen: RouterError.is(decision) ? null : workerLabel(this.workers.keyOf(decision.slot)),
      error: RouterError.is(decision) ? { code: decision.code, message: decision.message } : null,
      workers,
    };
  }

  // ---- KV events ----

  /** Applies one batch of a worker's KV events to the prefix index. */
  applyEvents(worker: WorkerKey, batch: KvEventBatch): void {
    const meta = this.requireWorker(worker.id);
    this.indexVersion++;
    const counts = meta.events;
    for (const event of batch.events) {
      if (event.type === 'cleared') {
        this.index.applyCleared(worker);
        counts.cleared++;
        continue;
      }
      // The index models the device cache; offloaded tiers are other caches.
      if (event.medium !== null && event.medium.toUpperCase() !== 'GPU') {
        counts.otherMedium++;
        continue;
      }
      if (event.type === 'removed') {
        this.index.applyRemoved(worker, event.blockHashes);
        counts.removed++;
        continue;
      }
      if (event.blockSize !== this.blockSize) {
        // Hashes over other block boundaries would never match: the engine and the router must agree.
        counts.blockSizeMismatches++;
        continue;
      }
      const local = this.hasher.localHashes(event.tokenIds, this.blockSize, this.seedOf(event.loraName, null));
      if (local.length !== event.blockHashes.length || !this.index.applyStored(worker, event.parentBlockHash, event.blockHashes, local)) {
        counts.skippedStores++;
        continue;
      }
      counts.stored++;
    }
  }

  /** The worker's event stream lost messages that cannot be replayed: forget what it holds. */
  markStale(worker: WorkerKey): void {
    this.index.applyCleared(worker);
    this.indexVersion++;
    this.requireWorker(worker.id).events.stale++;
  }

  eventCounts(id: string): EventCounts | undefined {
    const counts = this.meta.get(id)?.events;
    return counts && { ...counts };
  }

  indexStats() {
    return this.index.stats();
  }

  /** Requests booked in the ledger. */
  get bookedRequests(): number {
    return this.ledger.liveRequests;
  }

  /** Per-worker load as the ledger sees it, for metrics and replica checks. */
  load(): { worker: string; prefillTokens: number; decodeBlocks: number; activeRequests: number }[] {
    const cols = this.ledger.columns;
    return [...this.workers.entries()].map(([slot, key]) => ({
      worker: workerLabel(key),
      prefillTokens: cols.activePrefillTokens[slot]!,
      decodeBlocks: cols.activeDecodeBlocks[slot]!,
      activeRequests: cols.activeRequests[slot]!,
    }));
  }

  // ---- internals ----

  private decide(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null,
    busy: BusyThresholds | null,
    target: WorkerKey | null,
    exclude: readonly WorkerKey[],
  ): { slot: number; overlapBlocks: number } | RouterError {
    let slot = -1;
    // A soft target (from the dispatch gate) wins when it is eligible: ask for it alone first.
    const t = target ? this.workers.slotOf(target.id, target.rank) : undefined;
    if (t !== undefined && this.isAllowed(t, request, allowed, exclude)) slot = this.select(request, [target!], busy, exclude).slot;
    if (slot < 0) {
      const selection = this.select(request, allowed, busy, exclude);
      if (selection.slot < 0) return this.noWorker(request, selection.counts);
      slot = selection.slot;
    }
    return { slot, overlapBlocks: this.overlapOf(slot) };
  }

  /** Projects the request and runs the policy over the workers it may use. */
  private select(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null,
    busy: BusyThresholds | null,
    exclude: readonly WorkerKey[],
  ): { slot: number; counts: EligibilityCounts } {
    this.project(request);
    const allowedSlots = this.allowedSlots(request, allowed, exclude) ?? undefined;
    const taintWeights = this.taintWeights(request);
    const policy = this.policy;
    if (policy.coreCost && policy.filters.length === 0) {
      const { temperature, ...cost } = policy.coreCost;
      return this.selector.select({ busy: busy ?? undefined, allowedSlots, taintWeights, cost, temperature });
    }
    const counts = this.selector.eligibility({ busy: busy ?? undefined, allowedSlots });
    return { slot: counts.eligible > 0 ? this.runPipeline(request, taintWeights) : -1, counts };
  }

  private isAllowed(slot: number, request: RoutedRequest, allowed: readonly WorkerKey[] | null, exclude: readonly WorkerKey[]): boolean {
    const slots = this.allowedSlots(request, allowed, exclude);
    return slots === null || slots.includes(slot);
  }

  /** Cached prefix blocks of a worker in the last projection. */
  private overlapOf(slot: number): number {
    const { slots, depths } = this.overlaps;
    let depth = 0;
    for (let i = 0; i < slots.length; i++) if (slots[i] === slot && depths[i]! > depth) depth = depths[i]!;
    return depth;
  }

  /** Filters, scorers and picker in JS over rows of the eligible workers. */
  private runPipeline(request: RoutedRequest, taintWeights: Float64Array | undefined): number {
    const policy = this.policy;
    let rows = this.buildRows(request, this.inputs);
    const context = this.context(request);
    if (policy.filters.length > 0) {
      const keep = new Uint8Array(rows.count).fill(1);
      for (const f of policy.filters) f.filter(rows, keep, context);
      const eligible = this.selector.columns.eligible;
      for (let i = 0; i < rows.count; i++) if (!keep[i]) eligible[rows.slots[i]!] = 0;
      if (!keep.includes(1)) return -1;
      rows = this.buildRows(request, this.inputs);
    }
    if (policy.coreCost) {
      const { temperature, ...cost } = policy.coreCost;
      this.selector.score({ cost, taintWeights });
      return this.selector.pick(temperature);
    }
    const costs = new Float64Array(rows.count);
    for (const s of policy.scorers) {
      s.score(rows, costs, context);
      for (let i = 0; i < costs.length; i++) {
        if (!Number.isFinite(costs[i]!)) throw new Error(`scorer ${s.name} wrote a non-finite cost for ${workerLabel(rows.workers[i]!)}`);
      }
    }
    const row = policy.picker!.pick(rows, costs, context);
    if (!Number.isInteger(row) || row < 0 || row >= rows.count) throw new Error(`picker ${policy.picker!.name} returned row ${row} of ${rows.count}`);
    return rows.slots[row]!;
  }

  private context(request: RoutedRequest): SelectionContext {
    return {
      promptTokens: request.promptTokens,
      blockSize: this.blockSize,
      promptBlocks: Math.ceil(request.promptTokens / this.blockSize),
      sessionId: request.sessionId,
      random: () => this.selector.nextRandom() / 4294967296,
    };
  }

  private buildRows(request: RoutedRequest, inputs: WorkerInputMask): WorkerRows {
    return buildRows({
      inputs,
      eligible: this.selector.columns.eligible,
      workers: this.workers,
      ledger: this.ledger.columns,
      projection: this.ledger.projection,
      blockSize: this.blockSize,
      promptTokens: request.promptTokens,
      taintWeights: this.taintWeights(request),
    });
  }

  private project(request: RoutedRequest): void {
    this.overlaps = this.overlapsOf(request);
    this.ledger.project({ seqHashes: request.seqHashes, promptTokens: request.promptTokens, blockSize: this.blockSize, overlaps: this.overlaps });
  }

  /**
   * The request's cached prefixes (slot, depth), looked up once per request
   * and index state: classification, the capacity check and admission in one
   * turn share one lookup.
   */
  private overlapsOf(request: RoutedRequest): { slots: Uint32Array; depths: Uint32Array } {
    const memo = this.matchMemo;
    if (memo.request === request && memo.version === this.indexVersion) return memo.overlaps;
    const matches = request.localHashes.length > 0 ? this.index.findMatches(request.localHashes) : null;
    // The index's result is a view over core memory: keep a copy.
    const overlaps = matches ? { slots: matches.slots.slice(0, matches.count), depths: matches.depths.slice(0, matches.count) } : EMPTY_OVERLAPS;
    this.matchMemo = { request, version: this.indexVersion, overlaps };
    return overlaps;
  }

  /**
   * The slots a request may use, or null when every worker may: the caller's
   * allowed set, the pin, the required taints, minus excluded workers.
   */
  private allowedSlots(request: RoutedRequest, allowed: readonly WorkerKey[] | null, exclude: readonly WorkerKey[]): number[] | null {
    if (!allowed && !request.pin && request.requiredTaints.length === 0 && exclude.length === 0) return null;
    let keys: WorkerKey[] = allowed ? [...allowed] : [...this.workers.entries()].map(([, k]) => k);
    if (request.pin) {
      const pin = workerLabel(request.pin);
      keys = keys.filter((k) => workerLabel(k) === pin);
    }
    if (request.requiredTaints.length > 0) {
      keys = keys.filter((k) => {
        const taints = this.meta.get(k.id)?.spec.taints ?? [];
        return request.requiredTaints.every((t) => taints.includes(t));
      });
    }
    const skip = new Set(exclude.map(workerLabel));
    const slots: number[] = [];
    for (const k of keys) {
      if (skip.has(workerLabel(k))) continue;
      const slot = this.workers.slotOf(k.id, k.rank);
      if (slot !== undefined) slots.push(slot);
    }
    return slots;
  }

  /** Per slot, the summed weights of the preferred taints the worker carries; undefined when none apply. */
  private taintWeights(request: RoutedRequest): Float64Array | undefined {
    if (request.preferredTaints.length === 0) return undefined;
    const weights = new Float64Array(this.ledger.rows);
    for (const [slot, key] of this.workers.entries()) {
      const taints = this.meta.get(key.id)?.spec.taints ?? [];
      for (const p of request.preferredTaints) if (taints.includes(p.taint)) weights[slot]! += p.weight;
    }
    return weights;
  }

  private noWorker(request: RoutedRequest, counts: EligibilityCounts): RouterError {
    if (request.pin) {
      return counts.overloaded > 0
        ? new RouterError('KVR_ERR_PINNED_OVERLOADED', `worker ${workerLabel(request.pin)} is busy, please retry later`)
        : new RouterError('KVR_ERR_NO_WORKERS', `worker ${workerLabel(request.pin)} is not available`);
    }
    if (counts.overloaded > 0) return new RouterError('KVR_ERR_ALL_OVERLOADED');
    return new RouterError('KVR_ERR_NO_WORKERS', `no worker is available for model ${this.model}`);
  }

  private seedOf(lora: string | null, salt: string | null): bigint {
    const key = `${lora ?? ''}\u0000${salt ?? ''}`;
    let seed = this.seeds.get(key);
    if (seed === undefined) {
      seed = seedFor({ lora, salt });
      // Salts come from clients: keep the memo bounded.
      if (this.seeds.size >= 4096) this.seeds.clear();
      this.seeds.set(key, seed);
    }
    return seed;
  }

  private requireWorker(id: string): WorkerMeta {
    const meta = this.meta.get(id);
    if (!meta) throw new RangeError(`worker "${id}" is not registered for model ${this.model}`);
    return meta;
  }
}

function emptyCounts(): EventCounts {
  return { stored: 0, removed: 0, cleared: 0, skippedStores: 0, blockSizeMismatches: 0, otherMedium: 0, stale: 0 };
}
