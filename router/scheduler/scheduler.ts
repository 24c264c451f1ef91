// The admission scheduler of one routing partition (model). It owns a
// request's wait: class resolution and classification, the lane it waits in,
// deficit round robin across classes, the dispatch gate, the capacity check,
// deadlines and queue limits. It is I/O-free: time comes from a Clock, and it
// emits dispatch decisions through callbacks and takes lifecycle events.
import { createHmac, randomBytes } from 'node:crypto';
import { LaneHeap, validateOrder, type LaneHeapApi } from '../../bindings/lane-heap.js';
import type { LaneOrder } from '../../bindings/lane-order.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { Clock, Timer } from '../clock.js';
import { RouterError } from '../errors.js';
import { MinHeap } from '../min-heap.js';
import { NO_ROWS } from '../worker-inputs.js';
import type {
  Admission,
  ClassifierEvent,
  DispatchGate,
  Placement,
  PolicyClass,
  QueuedHead,
  RequestClassifier,
  SchedRequest,
  WorkerCapacity,
} from './contracts.js';
import { DeficitRoundRobin, type DrrOffer } from './drr.js';
import { ClassQueue, ItemIds, type Lane, type LaneEntry } from './lanes.js';

export interface DispatchHandlers {
  dispatch(admission: Admission): void;
  reject(error: RouterError): void;
}

export interface SchedulerOptions<R extends SchedRequest> {
  clock: Clock;
  placement: Placement<R>;
  /** Policy classes; the first is the default unless `defaultClass` names another. */
  classes: PolicyClass[];
  defaultClass?: string;
  classifier?: RequestClassifier<R>;
  /** Recheck held and blocked heads at least this often while any wait (ms). */
  tickMs?: number;
  laneHeap?: LaneHeapApi;
  /** Key for hashing client session ids into lane keys; random per process by default. */
  laneKeySecret?: Buffer;
}

type DeadlineStage = 'admission' | 'dispatch' | 'held';

class Entry<R extends SchedRequest> implements QueuedHead<R> {
  state: 'queued' | 'dispatched' | 'done' = 'queued';
  worker: WorkerKey | null = null;
  /** Whether the gate's dispatched() ran for this request. */
  gateCommitted = false;
  /** Whether the gate held this request's lane while it was the head. */
  heldOnce = false;
  readonly failed: WorkerKey[] = [];

  constructor(
    readonly item: number,
    readonly request: R,
    readonly cls: ClassQueue<Entry<R>>,
    /** Changes once, when a retry waits in a lane of its own. */
    public lane: string,
    readonly allowedWorkers: readonly WorkerKey[] | null,
    readonly cachedTokens: number,
    readonly cost: number,
    readonly arrival: number,
    readonly deadline: number,
    readonly order: LaneOrder,
    readonly handlers: DispatchHandlers,
  ) {}

  get policyClass(): string {
    return this.cls.policy.name;
  }
  get promptTokens(): number {
    return this.request.promptTokens;
  }
}

export interface SchedulerStats {
  queued: Record<string, { requests: number; tokens: number; lanes: number; blockedLanes: number; deficit: number }>;
  inFlight: number;
  dispatched: number;
  rejected: Record<string, number>;
}

export class Scheduler<R extends SchedRequest = SchedRequest> {
  private readonly clock: Clock;
  private readonly placement: Placement<R>;
  private readonly classifier: RequestClassifier<R> | undefined;
  private readonly gate: DispatchGate<R> | undefined;
  private readonly heap: LaneHeapApi;
  private readonly ids = new ItemIds();
  private readonly classes = new Map<string, ClassQueue<Entry<R>>>();
  private readonly ring: ClassQueue<Entry<R>>[] = [];
  private readonly defaultClass: ClassQueue<Entry<R>>;
  private readonly drr: DeficitRoundRobin<ClassQueue<Entry<R>>>;
  private readonly byId = new Map<string, Entry<R>>();
  /** Each class's head offered in the current DRR pick, with the gate's target. */
  private readonly offered = new Map<ClassQueue<Entry<R>>, { entry: Entry<R>; target: WorkerKey | null }>();
  private readonly deadlines = new MinHeap<Entry<R>>((a, b) => a.deadline < b.deadline);
  /** Lanes held until a time, earliest first; an entry is stale once its lane's hold changed. */
  private readonly holds = new MinHeap<{ until: number; lane: Lane<Entry<R>>; cls: ClassQueue<Entry<R>> }>((a, b) => a.until < b.until);
  private readonly laneSecret: Buffer;
  private readonly tickMs: number;
  private seq = 0;
  private draining = false;
  private wakeRequested = false;
  private inGateCheck = false;
  private timer: Timer | undefined;
  private timerAt = Infinity;
  private closed = false;
  private dispatchedCount = 0;
  private readonly rejectedCount: Record<string, number> = {};

  constructor(options: SchedulerOptions<R>) {
    if (options.classes.length === 0) throw new RangeError('a scheduler needs at least one policy class');
    this.clock = options.clock;
    this.placement = options.placement;
    this.classifier = options.classifier;
    this.heap = options.laneHeap ?? new LaneHeap();
    this.tickMs = options.tickMs ?? 1000;
    this.laneSecret = options.laneKeySecret ?? randomBytes(32);
    for (const policy of options.classes) {
      if (this.classes.has(policy.name)) throw new RangeError(`policy class "${policy.name}" is defined twice`);
      const cls = new ClassQueue<Entry<R>>(policy, this.heap, this.ids);
      this.classes.set(policy.name, cls);
      this.ring.push(cls);
    }
    const fallback = options.defaultClass ?? options.classes[0]!.name;
    const def = this.classes.get(fallback);
    if (!def) throw new RangeError(`default policy class "${fallback}" is not defined`);
    this.defaultClass = def;
    this.drr = new DeficitRoundRobin(this.ring);
    const noWorkers: readonly WorkerCapacity[] = [];
    this.gate = this.classifier?.installGate?.({
      recheck: () => this.recheck(),
      now: () => this.clock.now(),
      workers: () => this.placement.workerCapacities?.() ?? noWorkers,
    });
  }

  /**
   * Admits a request: classifies it, then dispatches it at once or queues it.
   * Exactly one of the handlers runs, now or later.
   */
  submit(request: R, handlers: DispatchHandlers): void {
    if (this.closed) return handlers.reject(new RouterError('KVR_ERR_SHUTTING_DOWN'));
    if (this.byId.has(request.id)) {
      return handlers.reject(new RouterError('KVR_ERR_INVALID_REQUEST', `request id "${request.id}" is already in flight`));
    }
    const now = this.clock.now();
    const cached = this.placement.cachedTokens(request, request.allowedWorkers);
    const defaultCost = Math.max(1, request.promptTokens - cached);
    let overrides: Exclude<ReturnType<RequestClassifier<R>['classify']>, { reject: object }> = {};
    if (this.classifier) {
      const inputs = this.classifier.inputs ?? 0;
      const rows = inputs ? this.placement.rows(request, request.allowedWorkers, inputs) : NO_ROWS;
      const result = this.classifier.classify({ request, now, cachedTokens: cached, defaultCost }, rows);
      if (result.reject) {
        return this.rejectNew(handlers, new RouterError('KVR_ERR_CLASSIFIER_REJECTED', result.reject.message, { classifier: this.classifier.name }, result.reject.status));
      }
      overrides = result;
    }
    const cls = this.classes.get(overrides.policyClass ?? request.policyClass ?? '') ?? this.defaultClass;
    const allowed = intersectAllowed(request.allowedWorkers, overrides.allowedWorkers);
    const cost = overrides.cost ?? defaultCost;
    if (!(cost > 0) || !Number.isFinite(cost)) {
      return this.rejectClassified(request, handlers, new RouterError('KVR_ERR_INVALID_REQUEST', `classifier ${this.classifier?.name} set a non-positive cost ${cost}`));
    }
    const deadline = overrides.deadline ?? (cls.policy.sloMs === null ? Infinity : now + cls.policy.sloMs);
    if (deadline <= now) return this.rejectClassified(request, handlers, deadlineError(cls.policy.name, 'admission'));
    if (this.placement.liveWorkers() === 0) return this.rejectClassified(request, handlers, new RouterError('KVR_ERR_NO_WORKERS'));

    const order = this.orderOf(cls.policy, request, now, cost, deadline);
    const unordered = orderError(order);
    if (unordered) return this.rejectClassified(request, handlers, unordered);
    const lane = request.sessionId !== null ? `session:${this.laneKey(request.sessionId)}` : overrides.lane ? `named:${overrides.lane}` : 'shared';
    const entry = new Entry<R>(this.ids.take(), request, cls, lane, allowed, cached, cost, now, deadline, order, handlers);

    if (neverQueues(cls.policy)) return this.admitDirect(entry);
    const limitError = this.overLimit(cls);
    if (limitError) {
      this.ids.give(entry.item);
      return this.rejectClassified(request, handlers, limitError);
    }
    // Registered only once queued: a request the queue refused leaves nothing behind.
    try {
      cls.enqueue(lane, entry);
    } catch (error) {
      this.ids.give(entry.item);
      this.emit({ type: 'aborted', requestId: request.id, worker: null });
      throw error;
    }
    this.byId.set(request.id, entry);
    if (deadline !== Infinity) this.deadlines.push(entry);
    this.drain();
  }

  /**
   * Re-places a dispatched request after its worker failed before the first
   * byte: frees the booking and goes through admission again without the
   * failed workers, reusing the classification. Placed at once, the admission
   * is returned. When every worker it may use is busy for its class (and the
   * class queues), it waits in the queue again and 'queued' is returned; its
   * handlers then run once it is placed, refused or past its deadline. It
   * keeps its place: it waits with the order it arrived with, so it goes
   * ahead of everything that arrived after it when capacity frees. It waits
   * in a lane of its own, so that while only the workers it failed on are
   * free, the requests behind it may still use them. The gate, which already
   * let it through, is not asked again, and queue limits do not apply: it is
   * not new load.
   */
  retry(requestId: string, failed: WorkerKey): Admission | RouterError | 'queued' {
    const entry = this.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return new RouterError('KVR_ERR_INVALID_REQUEST', `request "${requestId}" is not dispatched`);
    this.placement.release(requestId);
    entry.failed.push(failed);
    const result = this.placement.admit(entry.request, entry.allowedWorkers, entry.cls.policy.busy, null, entry.failed);
    if (!RouterError.is(result)) {
      entry.worker = result.worker;
      this.wake();
      return result;
    }
    let error = result;
    if (waitsForCapacity(result) && !neverQueues(entry.cls.policy)) {
      if (entry.deadline > this.clock.now()) return this.requeue(entry);
      error = deadlineError(entry.cls.policy.name, 'dispatch');
    }
    this.finish(entry);
    this.wake();
    return error;
  }

  /** The request went out to `worker`. */
  sent(requestId: string, worker: WorkerKey): void {
    const entry = this.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return;
    entry.worker = worker;
    let changed = this.emit({ type: 'sent', requestId, worker });
    // A request the gate never saw (its class never queues) is committed here.
    if (this.gate && !entry.gateCommitted) {
      entry.gateCommitted = true;
      changed = this.gate.dispatched(entry, worker) || changed;
    }
    if (changed) this.wake();
  }

  firstToken(requestId: string): void {
    const entry = this.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return;
    this.placement.firstToken(requestId);
    this.emit({ type: 'firstToken', requestId });
    this.wake();
  }

  completed(requestId: string): void {
    const entry = this.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return;
    this.placement.release(requestId);
    this.finish(entry);
    this.emit({ type: 'completed', requestId });
    this.wake();
  }

  /** The client went away or the request failed for good. */
  aborted(requestId: string): void {
    const entry = this.byId.get(requestId);
    if (!entry) return;
    if (entry.state === 'queued') {
      const exposed = entry.cls.remove(entry.lane, entry);
      this.finish(entry);
      this.emit({ type: 'aborted', requestId, worker: null });
      this.count('KVR_ERR_ABORTED');
      entry.handlers.reject(new RouterError('KVR_ERR_ABORTED'));
      // The newly exposed head is asked at once; a Hold-until it returns arms the timer.
      if (exposed) {
        entry.cls.unblock(exposed);
        this.drain();
      }
      return;
    }
    if (entry.state === 'dispatched') {
      this.placement.release(requestId);
      this.finish(entry);
      this.emit({ type: 'aborted', requestId, worker: entry.worker });
      this.wake();
    }
  }

  /** Capacity changed outside the request lifecycle (a worker joined, left or changed config). */
  capacityChanged(): void {
    this.wake();
  }

  /** Whether a request is known, and where it is. */
  stateOf(requestId: string): 'queued' | 'dispatched' | undefined {
    const state = this.byId.get(requestId)?.state;
    return state === 'done' ? undefined : state;
  }

  stats(): SchedulerStats {
    const queued: SchedulerStats['queued'] = {};
    for (const cls of this.ring) {
      queued[cls.policy.name] = {
        requests: cls.queuedRequests,
        tokens: cls.queuedTokens,
        lanes: cls.lanes.size,
        blockedLanes: cls.blocked.size,
        deficit: cls.deficit,
      };
    }
    let inFlight = 0;
    for (const e of this.byId.values()) if (e.state === 'dispatched') inFlight++;
    return { queued, inFlight, dispatched: this.dispatchedCount, rejected: { ...this.rejectedCount } };
  }

  /** Rejects every queued request and stops the timer. */
  close(): void {
    this.closed = true;
    this.timer?.cancel();
    for (const entry of [...this.byId.values()]) {
      if (entry.state !== 'queued') continue;
      entry.cls.remove(entry.lane, entry);
      this.finish(entry);
      entry.handlers.reject(new RouterError('KVR_ERR_SHUTTING_DOWN'));
    }
  }

  private requeue(entry: Entry<R>): 'queued' {
    entry.state = 'queued';
    entry.worker = null;
    entry.lane = `retry:${entry.request.id}`;
    entry.cls.enqueue(entry.lane, entry);
    if (entry.deadline !== Infinity) this.deadlines.push(entry);
    this.wake();
    return 'queued';
  }

  private admitDirect(entry: Entry<R>): void {
    // A class that never queues is admitted without asking the gate; its Sent
    // still reaches the gate's ledger through dispatched().
    const result = this.placement.admit(entry.request, entry.allowedWorkers, entry.cls.policy.busy, null, []);
    if (RouterError.is(result)) {
      this.ids.give(entry.item);
      return this.rejectClassified(entry.request, entry.handlers, result);
    }
    this.byId.set(entry.request.id, entry);
    entry.state = 'dispatched';
    entry.worker = result.worker;
    this.dispatchedCount++;
    entry.handlers.dispatch(result);
  }

  private overLimit(cls: ClassQueue<Entry<R>>): RouterError | undefined {
    const live = this.placement.liveWorkers();
    const { requests, tokens } = cls.policy.queueLimit;
    // Checked against usage before adding: the request that crosses the limit is accepted.
    if (requests !== null && cls.queuedRequests >= requests * live) return queueFull(cls.policy.name, 'requests', requests * live);
    if (tokens !== null && cls.queuedTokens >= tokens * live) return queueFull(cls.policy.name, 'tokens', tokens * live);
    return undefined;
  }

  private orderOf(policy: PolicyClass, request: R, now: number, cost: number, deadline: number): LaneOrder {
    // fcfs: earliest arrival first, boosted by the priority jump; wspt (Smith's
    // rule): the highest (1 + jump) / uncached tokens first.
    const key = policy.queuePolicy === 'wspt' ? -(1 + request.priority) / cost : now - request.priority;
    return { tier: request.tier, deadline, key, seq: this.seq++ >>> 0 };
  }

  private laneKey(sessionId: string): string {
    return createHmac('sha256', this.laneSecret).update(sessionId).digest('base64url').slice(0, 22);
  }

  private recheck(): void {
    // A gate that asks for a recheck from inside its own check would spin.
    if (this.inGateCheck) return;
    this.wake();
  }

  private wake(): void {
    if (this.closed) return;
    if (this.draining) {
      this.wakeRequested = true;
      return;
    }
    for (const cls of this.ring) cls.unblockAll();
    this.drain();
  }

  private drain(): void {
    if (this.draining || this.closed) {
      this.wakeRequested ||= this.draining;
      return;
    }
    this.draining = true;
    try {
      for (;;) {
        this.expireDue();
        while (this.dispatchNext()) {}
        if (!this.wakeRequested) break;
        this.wakeRequested = false;
        for (const cls of this.ring) cls.unblockAll();
      }
    } finally {
      this.draining = false;
    }
    this.armTimer();
  }

  private dispatchNext(): boolean {
    const cls = this.drr.pick((c) => {
      const found = this.candidate(c);
      if (typeof found === 'string') return found;
      this.offered.set(c, found);
      return { cost: found.entry.cost };
    });
    if (!cls) return false;
    const { entry, target } = this.offered.get(cls)!;
    const lane = cls.lanes.get(entry.lane)!;
    const result = this.placement.admit(entry.request, entry.allowedWorkers, cls.policy.busy, target, entry.failed);
    if (RouterError.is(result)) {
      if (waitsForCapacity(result)) {
        cls.block(lane, 'capacity', Infinity);
      } else {
        this.rejectQueued(entry, result);
      }
      return true;
    }
    cls.remove(entry.lane, entry);
    entry.state = 'dispatched';
    entry.worker = result.worker;
    this.dispatchedCount++;
    let changed = false;
    if (this.gate && !entry.gateCommitted) {
      entry.gateCommitted = true;
      changed = this.gate.dispatched(entry, result.worker);
    }
    this.drr.served(cls, entry.cost, this.nextOffer(cls));
    entry.handlers.dispatch(result);
    if (changed) this.wakeRequested = true;
    return true;
  }

  /** The class's dispatchable head, parking lanes whose head cannot go. */
  private candidate(cls: ClassQueue<Entry<R>>): { entry: Entry<R>; target: WorkerKey | null } | 'empty' | 'blocked' {
    const now = this.clock.now();
    for (;;) {
      const lane = cls.firstReady();
      if (!lane) return cls.queuedRequests === 0 ? 'empty' : 'blocked';
      const entry = cls.head(lane);
      if (entry.deadline <= now) {
        this.rejectQueued(entry, deadlineError(cls.policy.name, entry.heldOnce ? 'held' : 'dispatch'));
        continue;
      }
      let target: WorkerKey | null = null;
      if (this.gate && !entry.gateCommitted) {
        this.inGateCheck = true;
        let verdict;
        try {
          verdict = this.gate.check(entry, now);
        } finally {
          this.inGateCheck = false;
        }
        if (!verdict.go) {
          entry.heldOnce = true;
          // A Hold whose until is not in the future arms no timer: the head
          // waits for the next capacity change or recheck.
          const until = verdict.until !== undefined && verdict.until > now ? verdict.until : Infinity;
          cls.block(lane, 'gate', until);
          if (until !== Infinity) this.holds.push({ until, lane, cls });
          continue;
        }
        target = verdict.target ?? null;
      }
      // Classes without busy thresholds skip only the capacity check.
      if (cls.policy.busy) {
        const capacity = this.placement.capacity(entry.request, entry.allowedWorkers, cls.policy.busy);
        if (capacity === 'busy') {
          cls.block(lane, 'capacity', Infinity);
          continue;
        }
        if (capacity === 'none') {
          this.rejectQueued(entry, new RouterError('KVR_ERR_NO_WORKERS'));
          continue;
        }
      }
      return { entry, target };
    }
  }

  private nextOffer(cls: ClassQueue<Entry<R>>): DrrOffer {
    const lane = cls.firstReady();
    if (lane) return { cost: cls.head(lane).cost };
    return cls.queuedRequests === 0 ? 'empty' : 'blocked';
  }

  private expireDue(): void {
    const now = this.clock.now();
    for (let top = this.deadlines.peek(); top && top.deadline <= now; top = this.deadlines.peek()) {
      this.deadlines.pop();
      if (top.state !== 'queued') continue;
      const lane = top.cls.lanes.get(top.lane);
      const held = top.heldOnce || (lane?.blocked === 'gate' && top.cls.head(lane) === top);
      this.rejectQueued(top, deadlineError(top.cls.policy.name, held ? 'held' : 'dispatch'));
    }
  }

  private rejectQueued(entry: Entry<R>, error: RouterError): void {
    const exposed = entry.cls.remove(entry.lane, entry);
    if (exposed) entry.cls.unblock(exposed);
    this.finish(entry);
    this.emit({ type: 'aborted', requestId: entry.request.id, worker: null });
    this.count(error.code);
    entry.handlers.reject(error);
  }

  private rejectNew(handlers: DispatchHandlers, error: RouterError): void {
    this.count(error.code);
    handlers.reject(error);
  }

  /** Rejects a request the classifier has seen, so a classifier that recorded it at classify can forget it. */
  private rejectClassified(request: R, handlers: DispatchHandlers, error: RouterError): void {
    this.emit({ type: 'aborted', requestId: request.id, worker: null });
    this.rejectNew(handlers, error);
  }

  private finish(entry: Entry<R>): void {
    entry.state = 'done';
    this.byId.delete(entry.request.id);
    this.ids.give(entry.item);
  }

  private emit(event: ClassifierEvent): boolean {
    return this.classifier?.onEvent?.(event) === true;
  }

  private count(code: string): void {
    this.rejectedCount[code] = (this.rejectedCount[code] ?? 0) + 1;
  }

  /** One timer for the earliest of: a Hold's until, a queued deadline, the periodic tick. */
  private armTimer(): void {
    if (this.closed) return;
    let waiting = false;
    for (const cls of this.ring) if (cls.queuedRequests > 0) waiting = true;
    while (this.holds.peek() && !isHeld(this.holds.peek()!)) this.holds.pop();
    while (this.deadlines.peek() && this.deadlines.peek()!.state !== 'queued') this.deadlines.pop();
    let next = Math.min(this.holds.peek()?.until ?? Infinity, this.deadlines.peek()?.deadline ?? Infinity);
    if (waiting) next = Math.min(next, this.clock.now() + this.tickMs);
    if (next === this.timerAt) return;
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = next;
    if (next === Infinity) return;
    this.timer = this.clock.at(next, () => this.onTimer());
  }

  private onTimer(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock.now();
    for (let top = this.holds.peek(); top && top.until <= now; top = this.holds.peek()) {
      this.holds.pop();
      if (isHeld(top)) top.cls.unblock(top.lane);
    }
    // The periodic tick counts as a capacity change: every parked lane is rechecked.
    if (this.ring.some((cls) => cls.queuedRequests > 0)) this.wake();
    else this.drain();
  }
}

/** Whether a hold entry still describes its lane (not unblocked or re-held since). */
function isHeld(h: { until: number; lane: Lane<LaneEntry> }): boolean {
  return h.lane.blocked === 'gate' && h.lane.holdUntil === h.until;
}

/** Refusals that mean "busy for now": a queued head waits for capacity instead of failing. */
function waitsForCapacity(error: RouterError): boolean {
  return error.code === 'KVR_ERR_ALL_OVERLOADED' || error.code === 'KVR_ERR_PINNED_OVERLOADED';
}

function neverQueues(policy: PolicyClass): boolean {
  return policy.queueLimit.requests === 0 || policy.queueLimit.tokens === 0;
}

function intersectAllowed(caller: readonly WorkerKey[] | null, narrowed: readonly WorkerKey[] | undefined): readonly WorkerKey[] | null {
  if (!narrowed) return caller;
  if (caller === null) return narrowed.length > 0 ? narrowed : null;
  const keep = new Set(narrowed.map(workerLabel));
  const both = caller.filter((w) => keep.has(workerLabel(w)));
  // An empty intersection keeps the caller's set.
  return both.length > 0 ? both : caller;
}

/** Why the lane heap would refuse an order (a tier past 32 bits, a key that is not finite), as a client error; undefined when it takes it. */
function orderError(order: LaneOrder): RouterError | undefined {
  try {
    validateOrder(order);
    return undefined;
  } catch (error) {
    return new RouterError('KVR_ERR_INVALID_REQUEST', `the request cannot be queued: ${(error as Error).message}`);
  }
}

function deadlineError(policyClass: string, stage: DeadlineStage): RouterError {
  return new RouterError('KVR_ERR_DEADLINE_EXPIRED', `the request expired at stage ${stage} in policy class ${policyClass}`, { policy_class: policyClass, stage });
}

function queueFull(policyClass: string, limit: 'requests' | 'tokens', value: number): RouterError {
  return new RouterError('KVR_ERR_QUEUE_FULL', `policy class ${policyClass} has reached its queue limit of ${value} ${limit}`, {
    policy_class: policyClass,
    stage: 'admission',
    limit,
  });
}
