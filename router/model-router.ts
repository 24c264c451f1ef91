// Everything that routes one model: its model fleet (workers, cache index, load
// ledger, selection) and its admission scheduler, driven by one clock. The
// live server and the replay both go through this, so they run the same code.
import type { IndexFailure } from '../bindings/prefix-index-api.js';
import type { WorkerKey } from '../bindings/workers.js';
import type { Clock, Timer } from './clock.js';
import { RouterError } from './errors.js';
import type { KvEventBatch } from './kv-events.js';
import { AffinityPlacement, type RouteListener } from './affinity-placement.js';
import { ModelFleet, type Explanation, type ModelFleetOptions, type RequestFields, type RoutedRequest, type WorkerSpec } from './model-fleet.js';
import { ttftPolicy } from './selection/policies/ttft.js';
import type { Admission, BusyThresholds, PolicyClass, RequestClassifier } from './scheduler/contracts.js';
import { Scheduler, type DispatchHandlers } from './scheduler/scheduler.js';
import type { SelectionPolicy } from './selection/contracts.js';
import { SessionBindings, type SessionBindingsOptions } from './session-bindings.js';

export interface ModelRouterOptions {
  model: string;
  blockSize: number;
  clock: Clock;
  policy?: SelectionPolicy;
  /** Policy classes; default: one class "default" that never finds a worker busy. */
  classes?: PolicyClass[];
  defaultClass?: string;
  classifier?: RequestClassifier<RoutedRequest>;
  seed?: number;
  /** Recheck interval for held and blocked heads (ms). */
  tickMs?: number;
  /** How often the ledger sweep runs (ms); 0 disables it. Default 60 s. */
  sweepIntervalMs?: number;
  /** Bookings older than this whose request is gone are reclaimed by the sweep (ms). Default 300 s. */
  sweepAgeMs?: number;
  routedTtlMs?: number;
  maxRoutedBlocks?: number;
  /** The prefix index's memory bound (see ModelFleetOptions). */
  indexMemoryBytes?: number;
  /** What a cached block in each storage tier is worth (see ModelFleetOptions). */
  tierWeights?: ModelFleetOptions['tierWeights'];
  /** Session affinity (requests with a session id); default off. */
  sessionAffinity?: SessionBindingsOptions | null;
}

/** Sees every KV-event batch a route applies and every stale report (the server's diagnostics). */
export interface EventObserver {
  batch(worker: WorkerKey, batch: KvEventBatch): void;
  stale(worker: WorkerKey): void;
}

/** Asked by the ledger sweep about a booking this route's scheduler does not hold: whether its request is still live elsewhere. */
export type BookingHolder = (requestId: string) => boolean;

/** What the ledger sweep did: for metrics, and to show a leak or a long stream. */
export interface SweepStats {
  /** Bookings reclaimed since start because no live request held them. */
  reclaimed: number;
  /** Bookings past the sweep age that the last pass kept because their request is live. */
  longRunning: number;
}

export const DEFAULT_CLASS: PolicyClass = Object.freeze({
  name: 'default',
  quantum: 4096,
  queuePolicy: 'fcfs',
  busy: null,
  queueLimit: { requests: null, tokens: null },
  sloMs: null,
});

export class ModelRouter {
  readonly model: string;
  readonly fleet: ModelFleet;
  readonly scheduler: Scheduler<RoutedRequest>;
  /** Session bindings, when affinity is on. */
  readonly sessions: SessionBindings | null;
  private readonly placement: AffinityPlacement;
  private readonly clock: Clock;
  private readonly classes: Map<string, PolicyClass>;
  private readonly defaultClass: string;
  private sweepTimer: Timer | undefined;
  private sweepIntervalMs: number;
  private sweepAgeMs: number;
  private readonly holders = new Set<BookingHolder>();
  private eventObserver: EventObserver | null = null;
  readonly sweepStats: SweepStats = { reclaimed: 0, longRunning: 0 };

  constructor(options: ModelRouterOptions) {
    this.model = options.model;
    this.clock = options.clock;
    // Own copies: busy thresholds change at runtime through setBusyThresholds.
    const classes = (options.classes ?? [DEFAULT_CLASS]).map((c) => ({ ...c, busy: c.busy && { ...c.busy }, queueLimit: { ...c.queueLimit } }));
    this.classes = new Map(classes.map((c) => [c.name, c]));
    this.defaultClass = options.defaultClass ?? classes[0]!.name;
    this.fleet = new ModelFleet({
      model: options.model,
      blockSize: options.blockSize,
      clock: options.clock,
      policy: options.policy ?? ttftPolicy(),
      seed: options.seed,
      routedTtlMs: options.routedTtlMs,
      maxRoutedBlocks: options.maxRoutedBlocks,
      indexMemoryBytes: options.indexMemoryBytes,
      tierWeights: options.tierWeights,
      fastPathBusy: this.classes.get(this.defaultClass)!.busy,
    });
    this.sessions = options.sessionAffinity ? new SessionBindings(options.sessionAffinity) : null;
    this.placement = new AffinityPlacement(this.fleet, options.clock, this.sessions);
    this.scheduler = new Scheduler<RoutedRequest>({
      clock: options.clock,
      placement: this.placement,
      classes,
      defaultClass: options.defaultClass,
      classifier: options.classifier,
      tickMs: options.tickMs,
    });
    this.sweepIntervalMs = options.sweepIntervalMs ?? 60_000;
    this.sweepAgeMs = options.sweepAgeMs ?? 300_000;
    checkSweep(this.sweepIntervalMs, this.sweepAgeMs);
    this.armSweep();
  }

  /** Hashes the prompt and admits the request; exactly one handler runs, now or later. */
  submit(fields: RequestFields, tokens: ArrayLike<number>, handlers: DispatchHandlers): RoutedRequest | undefined {
    let request: RoutedRequest;
    try {
      request = this.fleet.prepare(fields, tokens);
    } catch (error) {
      if (!RouterError.is(error)) throw error;
      handlers.reject(error);
      return undefined;
    }
    this.scheduler.submit(request, handlers);
    return request;
  }

  /** The routing decision for a request, without dispatching or booking it. */
  explain(fields: RequestFields, tokens: ArrayLike<number>): Explanation {
    const request = this.fleet.prepare(fields, tokens);
    const cls = this.classes.get(fields.policyClass ?? '') ?? this.classes.get(this.defaultClass)!;
    return this.fleet.explain(request, cls.busy);
  }

  sent(requestId: string, worker: WorkerKey): void {
    this.scheduler.sent(requestId, worker);
  }
  firstToken(requestId: string): void {
    this.scheduler.firstToken(requestId);
  }
  completed(requestId: string): void {
    this.scheduler.completed(requestId);
  }
  aborted(requestId: string): void {
    this.scheduler.aborted(requestId);
  }
  retry(requestId: string, failed: WorkerKey): Admission | RouterError | 'queued' {
    return this.scheduler.retry(requestId, failed);
  }

  addWorker(spec: WorkerSpec): WorkerKey[] {
    const keys = this.fleet.addWorker(spec);
    this.scheduler.capacityChanged();
    return keys;
  }

  /**
   * Books a request the scheduler did not place (a disaggregated request's
   * decode side); its first token and release go through bookedFirstToken
   * and releaseBooking, so observers hear of all three as of any booking.
   */
  bookPlaced(request: RoutedRequest, admission: Admission): void {
    this.placement.book(request, admission);
  }

  bookedFirstToken(requestId: string): void {
    this.placement.firstToken(requestId);
  }

  releaseBooking(requestId: string): void {
    this.placement.release(requestId);
  }

  /** Hears of this route's own bookings and session bindings (replicas share them); null stops. */
  observe(listener: RouteListener | null): void {
    this.placement.listener = listener;
  }

  /** Removes a worker; its in-flight requests stay with their callers, who will see the worker fail. */
  removeWorker(id: string): void {
    this.fleet.removeWorker(id);
    this.sessions?.dropWorker(id);
    this.scheduler.capacityChanged();
  }

  setDraining(id: string, draining: boolean): void {
    this.fleet.setDraining(id, draining);
    this.scheduler.capacityChanged();
  }

  /** Replaces a worker's taints: what it serves, and what requests prefer it for. */
  setTaints(id: string, taints: readonly string[]): void {
    this.fleet.setTaints(id, taints);
    this.scheduler.capacityChanged();
  }

  /** Takes a failing worker out of selection, or readmits it (outlier ejection). */
  setEjected(id: string, ejected: boolean): void {
    this.fleet.setEjected(id, ejected);
    this.scheduler.capacityChanged();
  }

  applyEvents(worker: WorkerKey, batch: KvEventBatch): IndexFailure | null {
    this.eventObserver?.batch(worker, batch);
    return this.fleet.applyEvents(worker, batch);
  }

  markStale(worker: WorkerKey): void {
    this.eventObserver?.stale(worker);
    this.fleet.markStale(worker);
  }

  /** Hears of every batch applied and every stale report; null stops. */
  observeEvents(observer: EventObserver | null): void {
    this.eventObserver = observer;
  }

  /** The busy thresholds of every class, for the admin API. */
  busyThresholds(): Record<string, BusyThresholds | null> {
    return Object.fromEntries([...this.classes.values()].map((c) => [c.name, c.busy && { ...c.busy }]));
  }

  /** Changes a class's busy thresholds at runtime (null: never busy). */
  setBusyThresholds(className: string, busy: BusyThresholds | null): void {
    const cls = this.classes.get(className);
    if (!cls) throw new RangeError(`no policy class "${className}" for model ${this.model}`);
    cls.busy = busy && { ...busy };
    if (className === this.defaultClass) this.fleet.configureFastPath(cls.busy);
    this.scheduler.capacityChanged();
  }

  /** Changes how often the ledger sweep runs (0: never) and the age past which it reclaims a booking nobody holds. */
  configureSweep(intervalMs: number, ageMs: number): void {
    checkSweep(intervalMs, ageMs);
    this.sweepTimer?.cancel();
    this.sweepIntervalMs = intervalMs;
    this.sweepAgeMs = ageMs;
    this.armSweep();
  }

  /**
   * Adds a holder the sweep asks about bookings this route's scheduler does
   * not hold (the replica layer holds its peers' bookings). Returns the
   * function that removes it.
   */
  addBookingHolder(holder: BookingHolder): () => void {
    this.holders.add(holder);
    return () => this.holders.delete(holder);
  }

  close(): void {
    this.sweepTimer?.cancel();
    this.sweepTimer = undefined;
    this.scheduler.close();
  }

  /** A booking's request is live while the scheduler has it dispatched (every exchange settles it when it ends) or a holder vouches for it. */
  private isLive(requestId: string): boolean {
    if (this.scheduler.stateOf(requestId) === 'dispatched') return true;
    for (const holder of this.holders) if (holder(requestId)) return true;
    return false;
  }

  private sweep(): void {
    let longRunning = 0;
    const reclaimed = this.fleet.sweep(this.sweepAgeMs, (requestId) => {
      const live = this.isLive(requestId);
      if (live) longRunning++;
      return live;
    });
    this.sweepStats.reclaimed += reclaimed.length;
    this.sweepStats.longRunning = longRunning;
    if (reclaimed.length > 0) this.scheduler.capacityChanged();
    this.sessions?.sweep(this.clock.now());
  }

  private armSweep(): void {
    if (this.sweepIntervalMs <= 0) return;
    this.sweepTimer = this.clock.at(this.clock.now() + this.sweepIntervalMs, () => {
      this.sweep();
      this.armSweep();
    });
  }
}

function checkSweep(intervalMs: number, ageMs: number): void {
  if (!Number.isFinite(intervalMs) || intervalMs < 0) throw new RangeError(`the sweep interval must be a finite number of ms >= 0, got ${intervalMs}`);
  if (!Number.isFinite(ageMs) || ageMs < 0) throw new RangeError(`the sweep age must be a finite number of ms >= 0, got ${ageMs}`);
}
