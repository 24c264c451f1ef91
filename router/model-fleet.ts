// One model's fleet: its workers, the wasm core that indexes
// their KV caches and tracks their load, and the selection policy. It hashes
// prompts, applies KV events, and is the scheduler's Placement: cached-prefix
// snapshots, classifier rows, capacity checks, and admission (select + book).
// The parts live in router/model-fleet/: the worker set and its taint groups,
// prompts and seeds, the cache index and its KV events, constraints, the
// decision pipeline (core and JS), explain; the kernels in bindings/.
import type { BusyThresholds } from '../bindings/selection-contract.js';
import { workerLabel, type WorkerKey, type WorkerSlots } from '../bindings/workers.js';
import type { Core } from '../bindings/core.js';
import type { IndexFailure, PrefixIndexApi } from '../bindings/prefix-index-api.js';
import type { Clock } from './clock.js';
import { RouterError } from './errors.js';
import type { KvEventBatch } from './kv-events.js';
import { CacheIndex } from './model-fleet/cache-index.js';
import { Constraints } from './model-fleet/constraints.js';
import { Decisions } from './model-fleet/decisions.js';
import { explainDecision } from './model-fleet/explain.js';
import { createKernels, type Kernels } from './model-fleet/kernels.js';
import { Pipeline } from './model-fleet/pipeline.js';
import { computedTokens } from './model-fleet/prefill-progress.js';
import { Prompts } from './model-fleet/prompts.js';
import { tierWeights } from './model-fleet/tiers.js';
import { DEFAULT_SPEED_PRIOR, Speeds, type FleetSpeed, type LearnedSpeed } from './model-fleet/speeds.js';
import type { EventCounts, Explanation, ModelFleetOptions, RequestFields, RoutedRequest, WorkerSpec } from './model-fleet/types.js';
import { WorkerSet } from './model-fleet/worker-set.js';
import { ttftPolicy } from './selection/policies/ttft.js';
import type { Admission, CapacityVerdict, Placement, WorkerCapacity } from './scheduler/contracts.js';
import { policyInputs, type SelectionPolicy } from './selection/contracts.js';
import type { WorkerInputMask, WorkerRows } from './worker-inputs.js';

export { plainFields } from './model-fleet/types.js';
export type {
  EventCounts,
  Explanation,
  ModelFleetOptions,
  PreferredTaint,
  RequestFields,
  RoutedRequest,
  WorkerExplanation,
  WorkerSpec,
} from './model-fleet/types.js';

export class ModelFleet implements Placement<RoutedRequest> {
  readonly model: string;
  readonly blockSize: number;
  readonly policy: SelectionPolicy;
  readonly workers: WorkerSlots;
  /** The wasm core holding this model fleet's kernels (undefined on the twins). */
  readonly core: Core | undefined;
  /** The prefix-cache index (possibly sharded over several cores). */
  readonly index: PrefixIndexApi;
  private readonly clock: Clock;
  private readonly kernels: Kernels;
  private readonly set: WorkerSet;
  private readonly prompts: Prompts;
  private readonly cache: CacheIndex;
  private readonly constraints: Constraints;
  private readonly pipeline: Pipeline;
  private readonly decisions: Decisions;
  private readonly speeds: Speeds;

  constructor(options: ModelFleetOptions) {
    if (!Number.isInteger(options.blockSize) || options.blockSize <= 0) throw new RangeError(`block size must be a positive integer, got ${options.blockSize}`);
    this.model = options.model;
    this.blockSize = options.blockSize;
    this.clock = options.clock;
    this.policy = options.policy ?? ttftPolicy();
    // Speed classes group workers only for a cost that charges each class its own speed.
    const classed = this.policy.coreCost?.kind === 'ttft';
    this.speeds = new Speeds(this.policy.speedPrior ?? DEFAULT_SPEED_PRIOR, (slot, speed, speedClass) => {
      this.kernels.ledger.setSpeed(slot, speed);
      if (classed) this.set.setSpeedClass(slot, speedClass, this.kernels.ledger);
    });
    this.set = new WorkerSet(this.model, this.blockSize, (speedClass) => this.speeds.classMultiplier(speedClass));
    this.workers = this.set.slots;
    this.kernels = createKernels({
      kernels: options.kernels ?? 'wasm',
      workers: this.workers,
      blockSize: this.blockSize,
      seed: options.seed ?? 0,
      routedTtlMs: options.routedTtlMs,
      maxRoutedBlocks: options.maxRoutedBlocks,
      indexMemoryBytes: options.indexMemoryBytes,
      indexShards: options.indexShards,
    });
    this.core = this.kernels.core;
    this.index = this.kernels.index;
    const { decider, ledger, selector, index, hasher } = this.kernels;
    this.prompts = new Prompts(this.model, this.set, decider, hasher);
    this.cache = new CacheIndex({
      index,
      hasher,
      workers: this.set,
      blockSize: this.blockSize,
      seedOf: (lora, salt) => this.prompts.seedOf(lora, salt),
      tierIndex: () => this.kernels.tierIndex(),
      weights: tierWeights(options.tierWeights),
      onTiers: (matcher) => decider.useMatcher(matcher),
      wire: this.kernels.wire,
    });
    this.constraints = new Constraints(this.set);
    this.pipeline = new Pipeline(this.policy, policyInputs(this.policy), decider, ledger, selector, this.set, this.blockSize);
    this.decisions = new Decisions({
      model: this.model,
      blockSize: this.blockSize,
      clock: this.clock,
      policy: this.policy,
      kernels: this.kernels,
      workers: this.set,
      cache: this.cache,
      constraints: this.constraints,
      pipeline: this.pipeline,
      speeds: this.speeds,
    });
    this.configureFastPath(options.fastPathBusy ?? null);
  }

  /** Keeps a fast-path view for these busy thresholds from now on (see ModelFleetOptions.fastPathBusy). */
  configureFastPath(busy: BusyThresholds | null): void {
    const cost = this.decisions.fastPathCost;
    if (cost) this.kernels.decider.openView(cost, busy);
  }

  // ---- workers ----

  addWorker(spec: WorkerSpec): WorkerKey[] {
    const keys = this.set.add(spec, this.kernels.ledger, this.kernels.decider);
    for (const key of keys) this.speeds.add(this.workers.slotOf(key.id, key.rank)!);
    return keys;
  }

  /** Forgets a worker; returns the ids of its requests still booked in the ledger. */
  removeWorker(id: string): string[] {
    const meta = this.set.get(id);
    if (!meta) return [];
    this.cache.removeWorker(id);
    for (const slot of meta.slots) {
      this.speeds.remove(slot);
      this.decisions.progress?.removeSlot(slot);
    }
    const dropped = this.set.remove(id, this.kernels.ledger);
    for (const requestId of dropped) {
      this.decisions.bookedAt.delete(requestId);
      this.speeds.forgetRequest(requestId);
    }
    return dropped;
  }

  /** A draining worker takes no new requests; those in flight finish. */
  setDraining(id: string, draining: boolean): void {
    this.set.setDraining(id, draining, this.kernels.ledger);
  }

  /** An ejected worker takes no new requests until it is readmitted; those in flight finish. */
  setEjected(id: string, ejected: boolean): void {
    this.set.setEjected(id, ejected, this.kernels.ledger);
  }

  /** Replaces a worker's taints (e.g. the adapters it has loaded changed). */
  setTaints(id: string, taints: readonly string[]): void {
    this.set.setTaints(id, taints, this.kernels.ledger);
  }

  hasWorker(id: string): boolean {
    return this.set.has(id);
  }

  workerIds(): string[] {
    return this.set.ids();
  }

  workerSpec(id: string): WorkerSpec | undefined {
    return this.set.get(id)?.spec;
  }

  isDraining(id: string): boolean {
    return this.set.get(id)?.draining ?? false;
  }

  /** Worker ranks that take new requests. */
  liveWorkers(): number {
    return this.set.liveRanks;
  }

  /** Live worker ranks and their KV capacity in tokens; the same array until the worker set changes. */
  workerCapacities(): readonly WorkerCapacity[] {
    return this.set.capacities();
  }

  // ---- requests ----

  /** Hashes a prompt into blocks and validates the pin; the result is what the scheduler queues. */
  prepare(fields: RequestFields, tokens: ArrayLike<number>): RoutedRequest {
    return this.prompts.prepare(fields, tokens);
  }

  cachedTokens(request: RoutedRequest, allowed: readonly WorkerKey[] | null): number {
    return this.decisions.cachedTokens(request, allowed);
  }

  rows(request: RoutedRequest, allowed: readonly WorkerKey[] | null, inputs: WorkerInputMask): WorkerRows {
    const constraints = this.constraints.of(request, allowed, []);
    return this.pipeline.rows(request, this.decisions.request(request, constraints, null, false), inputs);
  }

  capacity(request: RoutedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[] = []): CapacityVerdict {
    // The same decision admission would make, kept for it, so the capacity
    // check and selection can never disagree.
    return this.decisions.capacity(request, allowed, busy, exclude);
  }

  /** A TTFT target is judged per request from the learned speeds: no count describes it. */
  summarizes(busy: BusyThresholds): boolean {
    return busy.ttftMs === undefined;
  }

  /** Live workers not busy under `busy`, from the ledger's running count for the class's thresholds. */
  headroom(busy: BusyThresholds): number {
    return this.kernels.decider.headroom(busy);
  }

  /** Whether the worker takes new requests and is busy under `busy`, from the ledger's view for those thresholds. */
  busyFor(worker: WorkerKey, busy: BusyThresholds): boolean {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot === undefined || !this.set.serves(worker.id)) return false;
    return !this.kernels.decider.standing(busy, slot);
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
    return this.admission(request, this.decisions.decide(request, allowed, busy, target, exclude, true));
  }

  /** The worker a request would go to now, without booking it. */
  choose(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null = request.allowedWorkers,
    busy: BusyThresholds | null = null,
    target: WorkerKey | null = null,
    exclude: readonly WorkerKey[] = [],
  ): Admission | RouterError {
    return this.admission(request, this.decisions.decide(request, allowed, busy, target, exclude, false));
  }

  /**
   * Books a request on a worker in the ledger (and, for a worker without KV
   * events, records its blocks as routed there). Admission books its own
   * choices; replicas book the choices their peers made.
   */
  book(request: RoutedRequest, worker: WorkerKey, cachedTokens: number): void {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot === undefined) throw new RangeError(`worker ${workerLabel(worker)} is not registered for model ${this.model}`);
    this.decisions.book(request, slot, cachedTokens);
  }

  firstToken(requestId: string): void {
    this.kernels.ledger.prefillComplete(requestId);
    this.decisions.progress?.settled(requestId);
    this.speeds.firstToken(requestId, this.clock.now());
  }

  release(requestId: string): void {
    this.kernels.ledger.free(requestId);
    this.decisions.progress?.settled(requestId);
    this.decisions.bookedAt.delete(requestId);
    this.speeds.forgetRequest(requestId);
  }

  /** What the router has learned of every worker rank's prefill speed, and of the fleet's. */
  learnedSpeeds(): { workers: ({ worker: string } & LearnedSpeed)[]; fleet: FleetSpeed } {
    const workers: ({ worker: string } & LearnedSpeed)[] = [];
    for (const [slot, key] of this.workers.entries()) {
      const learned = this.speeds.learned(slot);
      if (learned) workers.push({ worker: workerLabel(key), ...learned });
    }
    return { workers, fleet: this.speeds.fleetSpeed() };
  }

  /** What the router has learned of a worker rank's prefill speed (undefined for an unknown worker). */
  learnedSpeed(worker: WorkerKey): LearnedSpeed | undefined {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    return slot === undefined ? undefined : this.speeds.learned(slot);
  }

  /**
   * Drops expired routed blocks, and reclaims bookings older than ageMs whose
   * request is gone (`live` says no): a booking whose free was lost must not
   * hold load forever, while one whose request still runs (a long stream)
   * keeps its load however long it takes. Returns the reclaimed request ids.
   */
  sweep(ageMs: number, live: (requestId: string) => boolean): string[] {
    const now = this.clock.now();
    this.cache.expire(now);
    const reclaimed: string[] = [];
    for (const [requestId, bookedAt] of this.decisions.bookedAt) {
      if (now - bookedAt <= ageMs) break; // the rest were booked later
      if (live(requestId)) continue;
      this.release(requestId);
      reclaimed.push(requestId);
    }
    return reclaimed;
  }

  /** The decision for a request without dispatching it: the chosen worker and every worker's breakdown. */
  explain(request: RoutedRequest, busy: BusyThresholds | null = null): Explanation {
    const { ledger, selector } = this.kernels;
    return explainDecision(request, busy, {
      model: this.model,
      policy: this.policy.name,
      blockSize: this.blockSize,
      decisions: this.decisions,
      constraints: this.constraints,
      workers: this.set,
      ledger,
      selector,
      tierDepths: (local) => this.cache.tierDepths(local),
      weights: this.cache.weights,
      speeds: this.speeds,
    });
  }

  // ---- KV events ----

  /**
   * Applies one batch of a worker's KV events to the prefix index. Returns the
   * IndexFailure when the index could not (the worker is gone, or its entries
   * were cleared): the worker's stream is stale from there.
   */
  applyEvents(worker: WorkerKey, batch: KvEventBatch): IndexFailure | null {
    const progress = this.decisions.progress;
    if (progress !== null) {
      const slot = this.workers.slotOf(worker.id, worker.rank);
      if (slot !== undefined) progress.computed(slot, computedTokens(batch));
    }
    return this.cache.applyEvents(worker, batch);
  }

  /** The worker's event stream lost messages that cannot be replayed: forget what it holds (nothing, once it is removed). */
  markStale(worker: WorkerKey): void {
    this.cache.markStale(worker);
  }

  eventCounts(id: string): EventCounts | undefined {
    const counts = this.set.get(id)?.events;
    return counts && { ...counts };
  }

  indexStats() {
    return this.kernels.index.stats();
  }

  /** Requests booked in the ledger. */
  get bookedRequests(): number {
    return this.kernels.ledger.liveRequests;
  }

  /** Per-worker load as the ledger sees it, for metrics and replica checks. */
  load(): { worker: string; prefillTokens: number; decodeBlocks: number; activeRequests: number }[] {
    const cols = this.kernels.ledger.columns;
    return [...this.workers.entries()].map(([slot, key]) => ({
      worker: workerLabel(key),
      prefillTokens: cols.activePrefillTokens[slot]!,
      decodeBlocks: cols.activeDecodeBlocks[slot]!,
      activeRequests: cols.activeRequests[slot]!,
    }));
  }

  private admission(request: RoutedRequest, choice: ReturnType<Decisions['decide']>): Admission | RouterError {
    if (RouterError.is(choice)) return choice;
    const { slot, overlapBlocks } = choice;
    return { worker: this.workers.keyOf(slot), overlapBlocks, cachedTokens: Math.min(overlapBlocks * this.blockSize, request.promptTokens) };
  }
}
