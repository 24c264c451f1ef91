// The decision pipeline of a model fleet: a request's constraints, a gate's or
// session's soft target, the fused core decision (or the JS policy pipeline),
// the booking, and the errors that name why no worker could take it. A busy
// class asks for capacity before it admits: the decision made for the
// capacity check is kept and booked by the admission while nothing changed
// (the same request, allowed set and thresholds, and no change to the
// ledger, the index or the workers since), so it runs one selection, not two.
import { CostKind, type DecisionConstraints, type DecisionCost, type DecisionRequest } from '../../bindings/decision-contract.js';
import type { BusyThresholds, EligibilityCounts, LoadLedger } from '../../bindings/selection-contract.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { Clock } from '../clock.js';
import { RouterError } from '../errors.js';
import type { CapacityVerdict } from '../scheduler/contracts.js';
import type { CoreCost, SelectionPolicy } from '../selection/contracts.js';
import type { CacheIndex } from './cache-index.js';
import type { Constraints } from './constraints.js';
import type { Kernels } from './kernels.js';
import type { Pipeline } from './pipeline.js';
import { PrefillProgress } from './prefill-progress.js';
import { predictTtftMs, type Speeds } from './speeds.js';
import type { RoutedRequest } from './types.js';
import type { WorkerSet } from './worker-set.js';

/** A decision's outcome: the slot (-1: none), its overlap, and the eligibility counts. */
export interface Choice {
  readonly slot: number;
  readonly overlapBlocks: number;
  /** The prefix its booking takes as cached, in blocks (Decision.cachedBlocks: its credit where offloaded tiers hold some). */
  readonly cachedBlocks: number;
  readonly counts: EligibilityCounts;
}

/** The capacity check's decision, while it may still be booked. */
interface Kept {
  request: RoutedRequest | null;
  allowed: readonly WorkerKey[] | null;
  busy: BusyThresholds | null;
  ledger: number;
  index: number;
  workers: number;
  choice: Choice;
}

export interface DecisionsOptions {
  model: string;
  blockSize: number;
  clock: Clock;
  policy: SelectionPolicy;
  kernels: Kernels;
  workers: WorkerSet;
  cache: CacheIndex;
  constraints: Constraints;
  pipeline: Pipeline;
  speeds: Speeds;
}

export class Decisions {
  private readonly model: string;
  private readonly blockSize: number;
  private readonly clock: Clock;
  private readonly ledger: LoadLedger;
  private readonly kernels: Kernels;
  private readonly workers: WorkerSet;
  private readonly cache: CacheIndex;
  private readonly constraints: Constraints;
  private readonly pipeline: Pipeline;
  private readonly speeds: Speeds;
  /** The ttft policy's decode and KV weights (cost/ttft.ts), else 0: what a worker's queue counts in a predicted time to first token. */
  private readonly queueWeights: { readonly decode: number; readonly kv: number };
  /** When each live booking was made, in booking order (which is time order): what the ledger sweep reads ages from. */
  readonly bookedAt = new Map<string, number>();
  /** Under the ttft cost: each worker's prefill done, from its KV events, off the ledger's queued prefill (prefill-progress.ts). */
  readonly progress: PrefillProgress | null;
  /** The core cost, when the policy is the core's and has no JS filters. */
  private readonly coreCost: DecisionCost | null;
  /** The cost passed to the pipeline's core pick (policies with filters). */
  private readonly pipelineCost: DecisionCost;
  private readonly kept: Kept = { request: null, allowed: null, busy: null, ledger: -1, index: -1, workers: -1, choice: { slot: -1, overlapBlocks: 0, cachedBlocks: 0, counts: noCounts() } };

  constructor(options: DecisionsOptions) {
    this.model = options.model;
    this.blockSize = options.blockSize;
    this.clock = options.clock;
    this.kernels = options.kernels;
    this.ledger = options.kernels.ledger;
    this.workers = options.workers;
    this.cache = options.cache;
    this.constraints = options.constraints;
    this.pipeline = options.pipeline;
    this.speeds = options.speeds;
    const core = options.policy.coreCost;
    const cost: DecisionCost = core ? decisionCost(core) : { kind: CostKind.kv, overlapCredit: 1, prefillLoadScale: 1, activeRequestWeight: 0, temperature: 0 };
    this.coreCost = core && options.policy.filters.length === 0 ? cost : null;
    this.queueWeights = core?.kind === 'ttft' ? { decode: core.decodeWeight, kv: core.kvWeight } : { decode: 0, kv: 0 };
    this.progress = core?.kind === 'ttft' && core.prefillProgress ? new PrefillProgress(this.ledger) : null;
    this.pipelineCost = cost;
  }

  /** The cost decisions take the fast path with (null when a JS policy decides). */
  get fastPathCost(): DecisionCost | null {
    return this.coreCost;
  }

  /** Picks a worker (a soft target first when it is eligible and not busy); books it when `book`. */
  decide(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null,
    busy: BusyThresholds | null,
    target: WorkerKey | null,
    exclude: readonly WorkerKey[],
    book: boolean,
  ): Choice | RouterError {
    const constraints = this.constraints.of(request, allowed, exclude);
    if (target) {
      const slot = this.workers.slots.slotOf(target.id, target.rank);
      if (slot !== undefined && this.constraints.allows(constraints, slot)) {
        const alone = this.select(request, { ...constraints, slots: Uint32Array.of(slot) }, busy, book);
        if (alone.slot >= 0) return alone;
      }
    }
    const kept = this.keptFor(request, allowed, busy, exclude);
    if (kept) {
      if (book) this.bookOwn(request, kept.slot, kept.cachedBlocks);
      this.kept.request = null;
      return kept;
    }
    const choice = this.select(request, constraints, busy, book);
    return choice.slot < 0 ? this.errorFor(request, choice.counts) : choice;
  }

  /**
   * Whether some eligible worker (not excluded) is not busy for the class;
   * keeps the decision for the admission that follows. Under a TTFT target the
   * fleet is busy for the request while its predicted time to first token on
   * the chosen worker is over the target and the queue ahead of it is why: the
   * request waits in the router's queue for the queue to drain. One that would
   * miss the target on an idle worker gains nothing by waiting and goes.
   */
  capacity(request: RoutedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[]): CapacityVerdict {
    const choice = this.select(request, this.constraints.of(request, allowed, exclude), busy, false);
    // A decision under exclusions is not the one an admission without them would make.
    if (exclude.length === 0) this.keep(request, allowed, busy, choice);
    if (choice.counts.eligible > 0) return busy?.ttftMs !== undefined && this.queuedPastTarget(request, choice, busy.ttftMs) ? 'busy' : 'free';
    return choice.counts.allowed === 0 ? 'none' : 'busy';
  }

  private queuedPastTarget(request: RoutedRequest, choice: Choice, targetMs: number): boolean {
    const speed = this.speeds.learned(choice.slot);
    if (!speed) return false;
    const uncached = request.promptTokens - this.cachedOf(request, choice.cachedBlocks);
    const queued = this.queuedTokens(choice.slot);
    return predictTtftMs(speed, queued, uncached) > targetMs && predictTtftMs(speed, 0, uncached) <= targetMs;
  }

  /**
   * What the ttft cost counts ahead of a request on a worker, in tokens of
   * prefill (cost/ttft.ts): its queued prefill, the decode weight per decoding
   * request and the KV weight per token its active requests hold.
   */
  queuedTokens(slot: number): number {
    const cols = this.ledger.columns;
    return cols.activePrefillTokens[slot]! + this.queueWeights.decode * cols.decodingRequests[slot]! + this.queueWeights.kv * cols.activeDecodeBlocks[slot]! * this.blockSize;
  }

  /** Best cached prefix, in tokens, over the workers the request may use. */
  cachedTokens(request: RoutedRequest, allowed: readonly WorkerKey[] | null): number {
    const depth = this.kernels.decider.bestDepth(this.prompt(request), this.constraints.of(request, allowed, []));
    return Math.min(depth * this.blockSize, request.promptTokens);
  }

  /** The fused decision's request for this routed request. */
  request(request: RoutedRequest, constraints: DecisionConstraints, busy: BusyThresholds | null, book: boolean, fullScan = false): DecisionRequest {
    return {
      prompt: this.prompt(request),
      promptTokens: request.promptTokens,
      busy,
      constraints,
      cost: this.coreCost ?? this.pipelineCost,
      book: book ? { requestId: request.id, now: this.clock.now() } : null,
      fullScan,
    };
  }

  /**
   * Books a request on a slot in the ledger (and, for a worker without KV
   * events, records its blocks as routed there).
   */
  book(request: RoutedRequest, slot: number, cachedTokens: number): void {
    const now = this.clock.now();
    this.ledger.add(request.id, slot, request.seqHashes, Math.max(0, request.promptTokens - cachedTokens), now);
    this.bookedAt.set(request.id, now);
    this.progress?.booked(slot, request.id);
    if (this.workers.isApproximate(slot)) this.cache.insertRouted(this.workers.slots.keyOf(slot), request.localHashes, now);
  }

  /** One selection: the core's fused decision, or the JS pipeline; booked when `book`. */
  select(request: RoutedRequest, constraints: DecisionConstraints, busy: BusyThresholds | null, book: boolean, fullScan = false): Choice {
    if (this.coreCost) {
      const decision = this.kernels.decider.decide(this.request(request, constraints, busy, book, fullScan));
      if (decision.routed) this.cache.routedByDecision();
      if (book && decision.slot >= 0) {
        // The core booked it: record when, as book() does, and the routed
        // prompt when the index lives outside the decision's core (sharded).
        const now = this.clock.now();
        this.bookedAt.set(request.id, now);
        this.progress?.booked(decision.slot, request.id);
        if (!decision.routed && this.workers.isApproximate(decision.slot)) this.cache.insertRouted(this.workers.slots.keyOf(decision.slot), request.localHashes, now);
        this.expectFirstToken(request, decision.slot);
      }
      return decision;
    }
    const { slot, counts } = this.pipeline.run(request, this.request(request, constraints, busy, false));
    const overlapBlocks = slot >= 0 ? this.ledger.projection.overlapBlocks[slot]! : 0;
    // JS policies read depths: they credit a prefix its depth, in every tier.
    if (book && slot >= 0) this.bookOwn(request, slot, overlapBlocks);
    return { slot, overlapBlocks, cachedBlocks: overlapBlocks, counts };
  }

  /** Books a decision of this router's own, whose first token it will see. */
  private bookOwn(request: RoutedRequest, slot: number, cachedBlocks: number): void {
    this.book(request, slot, this.cachedOf(request, cachedBlocks));
    this.expectFirstToken(request, slot);
  }

  /** Its worker's speed is learned from the request's first token (speeds.ts). */
  private expectFirstToken(request: RoutedRequest, slot: number): void {
    // The slot's active prefill now: what was ahead of the request, and the request's own uncached tokens.
    this.speeds.booked(request.id, slot, this.ledger.columns.activePrefillTokens[slot]!, this.clock.now());
  }

  /** The whole tokens a prefix credited this many blocks saves. */
  private cachedOf(request: RoutedRequest, creditedBlocks: number): number {
    return Math.floor(Math.min(creditedBlocks * this.blockSize, request.promptTokens));
  }

  private prompt(request: RoutedRequest): { local: BigUint64Array; sequence: BigUint64Array } {
    return { local: request.localHashes, sequence: request.seqHashes };
  }

  private keep(request: RoutedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, choice: Choice): void {
    const k = this.kept;
    k.request = request;
    k.allowed = allowed;
    k.busy = busy;
    k.ledger = this.ledger.version;
    k.index = this.cache.version;
    k.workers = this.workers.version;
    k.choice = choice;
  }

  /** The capacity check's decision for this request, while nothing it depends on changed. */
  private keptFor(request: RoutedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[]): Choice | null {
    const k = this.kept;
    if (k.request !== request || k.allowed !== allowed || k.busy !== busy || exclude.length > 0) return null;
    if (k.ledger !== this.ledger.version || k.index !== this.cache.version || k.workers !== this.workers.version) return null;
    return k.choice.slot >= 0 ? k.choice : null;
  }

  /** Why no worker could take the request, from its decision's counts. */
  errorFor(request: RoutedRequest, counts: EligibilityCounts): RouterError {
    if (request.pin) {
      return counts.overloaded > 0
        ? new RouterError('KVR_ERR_PINNED_OVERLOADED', `worker ${workerLabel(request.pin)} is busy, please retry later`)
        : new RouterError('KVR_ERR_NO_WORKERS', `worker ${workerLabel(request.pin)} is not available`);
    }
    if (counts.overloaded > 0) return new RouterError('KVR_ERR_ALL_OVERLOADED');
    return new RouterError('KVR_ERR_NO_WORKERS', `no worker is available for model ${this.model}`);
  }
}

function decisionCost(core: CoreCost): DecisionCost {
  if (core.kind === 'ttft') return { kind: CostKind.ttft, reuseWeight: core.reuseWeight, decodeWeight: core.decodeWeight, kvWeight: core.kvWeight, temperature: core.temperature };
  return { kind: CostKind.kv, overlapCredit: core.overlapCredit, prefillLoadScale: core.prefillLoadScale, activeRequestWeight: core.activeRequestWeight, temperature: core.temperature };
}

function noCounts(): EligibilityCounts {
  return { present: 0, available: 0, allowed: 0, overloaded: 0, eligible: 0 };
}
