// The admission scheduler of one model fleet. It owns a
// request's wait: class resolution and classification (intake.ts), the lane it
// waits in (lanes.ts), the drain loop with deficit round robin, the dispatch
// gate and the capacity check (drain.ts), deadlines, holds and the tick
// (timers.ts), and which waiting lanes a change wakes (wake.ts). It is
// I/O-free: time comes from a Clock, and it emits dispatch decisions through
// callbacks and takes lifecycle events.
import { randomBytes } from 'node:crypto';
import { LaneHeap, type LaneHeapApi } from '../../bindings/lane-heap.js';
import type { WorkerKey } from '../../bindings/workers.js';
import type { Clock } from '../clock.js';
import { RouterError } from '../errors.js';
import { RequestBook } from './book.js';
import type { Admission, DispatchGate, Placement, PolicyClass, RequestClassifier, SchedRequest, WorkerCapacity } from './contracts.js';
import { Dispatcher } from './drain.js';
import { Entry, type DispatchHandlers } from './entry.js';
import { Intake } from './intake.js';
import { ClassQueue, ItemIds } from './lanes.js';
import { RecheckEverything } from './recheck-all.js';
import { deadlineError, neverQueues, waitsForCapacity } from './refusals.js';
import { Timers } from './timers.js';
import { TargetedWake, type WakeRule } from './wake.js';

export type { DispatchHandlers } from './entry.js';

export interface SchedulerOptions<R extends SchedRequest> {
  clock: Clock;
  placement: Placement<R>;
  /** Policy classes; the first is the default unless `defaultClass` names another. */
  classes: PolicyClass[];
  defaultClass?: string;
  classifier?: RequestClassifier<R>;
  /** The tick's period while any request waits (ms): it asks held heads without a time again and reopens every capacity wait. */
  tickMs?: number;
  laneHeap?: LaneHeapApi;
  /** Key for hashing client session ids into lane keys; random per process by default. */
  laneKeySecret?: Buffer;
  /**
   * Which waiting lanes a change looks at again: 'targeted' (the default)
   * only those whose head could now pass; 'everything' every one, the
   * baseline tests and benchmarks compare it with.
   */
  wake?: 'targeted' | 'everything';
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
  private readonly gate: DispatchGate<R> | undefined;
  private readonly ring: ClassQueue<Entry<R>>[] = [];
  private readonly book: RequestBook<R>;
  private readonly intake: Intake<R>;
  private readonly wakeRule: WakeRule<Entry<R>>;
  private readonly timers: Timers<R>;
  private readonly dispatcher: Dispatcher<R>;
  /** The worker set the gate saw last (Placement.workerCapacities keeps one array until it changes). */
  private workerSet: readonly WorkerCapacity[] | undefined;
  private closed = false;

  constructor(options: SchedulerOptions<R>) {
    if (options.classes.length === 0) throw new RangeError('a scheduler needs at least one policy class');
    this.clock = options.clock;
    this.placement = options.placement;
    const heap = options.laneHeap ?? new LaneHeap();
    const ids = new ItemIds();
    const classes = new Map<string, ClassQueue<Entry<R>>>();
    for (const policy of options.classes) {
      if (classes.has(policy.name)) throw new RangeError(`policy class "${policy.name}" is defined twice`);
      const cls = new ClassQueue<Entry<R>>(policy, heap, ids);
      classes.set(policy.name, cls);
      this.ring.push(cls);
    }
    const fallback = options.defaultClass ?? options.classes[0]!.name;
    const defaultClass = classes.get(fallback);
    if (!defaultClass) throw new RangeError(`default policy class "${fallback}" is not defined`);
    const classifier = options.classifier;
    this.book = new RequestBook(ids, classifier, () => this.wake(undefined, true));
    this.intake = new Intake({ placement: this.placement, classifier, classes, defaultClass, ids, book: this.book, laneSecret: options.laneKeySecret ?? randomBytes(32) });
    this.wakeRule = options.wake === 'everything' ? new RecheckEverything() : new TargetedWake(heap, ids, this.ring, this.placement);
    this.timers = new Timers<R>({
      clock: this.clock,
      tickMs: options.tickMs ?? 1000,
      waiting: () => this.ring.some((cls) => cls.queuedRequests > 0),
      fired: (tick) => this.onTimer(tick),
      expire: (entry, held) => this.book.rejectQueued(entry, deadlineError(entry.cls.policy.name, held ? 'held' : 'dispatch')),
    });
    const noWorkers: readonly WorkerCapacity[] = [];
    this.gate = classifier?.installGate?.({
      recheck: () => this.recheck(),
      now: () => this.clock.now(),
      workers: () => this.placement.workerCapacities?.() ?? noWorkers,
    });
    this.workerSet = this.placement.workerCapacities?.();
    this.dispatcher = new Dispatcher({ clock: this.clock, placement: this.placement, gate: this.gate, ring: this.ring, book: this.book, wake: this.wakeRule, timers: this.timers });
  }

  /**
   * Admits a request: classifies it, then dispatches it at once or queues it.
   * Exactly one of the handlers runs, now or later.
   */
  submit(request: R, handlers: DispatchHandlers): void {
    if (this.closed) return handlers.reject(new RouterError('KVR_ERR_SHUTTING_DOWN'));
    if (this.book.byId.has(request.id)) {
      return handlers.reject(new RouterError('KVR_ERR_INVALID_REQUEST', `request id "${request.id}" is already in flight`));
    }
    const entry = this.intake.entryFor(request, handlers, this.clock.now());
    if (!entry) return;
    if (neverQueues(entry.cls.policy)) return this.admitDirect(entry);
    const limitError = this.intake.overLimit(entry.cls);
    if (limitError) {
      this.book.finish(entry);
      return this.book.rejectClassified(request, handlers, limitError);
    }
    // Registered only once queued: a request the queue refused leaves nothing behind.
    try {
      entry.cls.enqueue(entry.lane, entry);
    } catch (error) {
      this.book.finish(entry);
      this.book.left(request.id);
      throw error;
    }
    this.book.byId.set(request.id, entry);
    this.timers.deadline(entry);
    this.dispatcher.drain();
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
    const entry = this.book.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return new RouterError('KVR_ERR_INVALID_REQUEST', `request "${requestId}" is not dispatched`);
    this.placement.release(requestId);
    const freed = entry.bookedOn;
    entry.bookedOn = null;
    entry.failed.push(failed);
    entry.scope = null;
    const result = this.placement.admit(entry.request, entry.allowedWorkers, entry.cls.policy.busy, null, entry.failed);
    if (!RouterError.is(result)) {
      entry.worker = result.worker;
      entry.bookedOn = result.worker;
      this.wake(freed, false);
      return result;
    }
    let error = result;
    if (waitsForCapacity(result) && !neverQueues(entry.cls.policy)) {
      if (entry.deadline > this.clock.now()) return this.requeue(entry, freed);
      error = deadlineError(entry.cls.policy.name, 'dispatch');
    }
    this.book.finish(entry);
    this.wake(freed, false);
    return error;
  }

  /** The request went out to `worker`. */
  sent(requestId: string, worker: WorkerKey): void {
    const entry = this.book.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return;
    entry.worker = worker;
    let changed = this.book.emit({ type: 'sent', requestId, worker });
    // A request the gate never saw (its class never queues) is committed here.
    if (this.gate && !entry.gateCommitted) {
      entry.gateCommitted = true;
      changed = this.gate.dispatched(entry, worker) || changed;
    }
    if (changed) this.wake(undefined, true);
  }

  firstToken(requestId: string): void {
    const entry = this.book.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return;
    this.placement.firstToken(requestId);
    const changed = this.book.emit({ type: 'firstToken', requestId });
    this.wake(entry.bookedOn, changed);
  }

  completed(requestId: string): void {
    const entry = this.book.byId.get(requestId);
    if (!entry || entry.state !== 'dispatched') return;
    this.placement.release(requestId);
    this.book.finish(entry);
    const changed = this.book.emit({ type: 'completed', requestId });
    this.wake(entry.bookedOn, changed);
  }

  /** The client went away or the request failed for good. */
  aborted(requestId: string): void {
    const entry = this.book.byId.get(requestId);
    if (!entry) return;
    if (entry.state === 'queued') {
      const exposed = entry.cls.remove(entry.lane, entry);
      this.book.finish(entry);
      this.book.count('KVR_ERR_ABORTED');
      this.book.left(requestId);
      entry.handlers.reject(new RouterError('KVR_ERR_ABORTED'));
      // The newly exposed head is asked at once; a Hold-until it returns arms the timer.
      if (exposed) {
        entry.cls.unblock(exposed);
        this.dispatcher.drain();
      }
      return;
    }
    if (entry.state === 'dispatched') {
      this.placement.release(requestId);
      this.book.finish(entry);
      const changed = this.book.emit({ type: 'aborted', requestId, worker: entry.worker });
      this.wake(entry.bookedOn, changed);
    }
  }

  /** Capacity changed outside the request lifecycle (a worker joined, left or changed config, a peer's booking ended). */
  capacityChanged(): void {
    const workers = this.placement.workerCapacities?.();
    const newSet = workers !== this.workerSet;
    this.workerSet = workers;
    this.wake(null, newSet);
  }

  /** Whether a request is known, and where it is. */
  stateOf(requestId: string): 'queued' | 'dispatched' | undefined {
    const state = this.book.byId.get(requestId)?.state;
    return state === 'done' ? undefined : state;
  }

  stats(): SchedulerStats {
    const queued: SchedulerStats['queued'] = {};
    for (const cls of this.ring) {
      queued[cls.policy.name] = {
        requests: cls.queuedRequests,
        tokens: cls.queuedTokens,
        lanes: cls.lanes.size,
        blockedLanes: cls.blockedLanes,
        deficit: cls.deficit,
      };
    }
    let inFlight = 0;
    for (const e of this.book.byId.values()) if (e.state === 'dispatched') inFlight++;
    return { queued, inFlight, dispatched: this.book.dispatched, rejected: { ...this.book.rejected } };
  }

  /** Rejects every queued request and stops the timer. */
  close(): void {
    this.closed = true;
    this.dispatcher.stop();
    this.timers.stop();
    for (const entry of [...this.book.byId.values()]) {
      if (entry.state !== 'queued') continue;
      entry.cls.remove(entry.lane, entry);
      this.book.finish(entry);
      entry.handlers.reject(new RouterError('KVR_ERR_SHUTTING_DOWN'));
    }
  }

  private requeue(entry: Entry<R>, freed: WorkerKey | null): 'queued' {
    entry.state = 'queued';
    entry.worker = null;
    entry.lane = `retry:${entry.request.id}`;
    entry.cls.enqueue(entry.lane, entry);
    this.timers.deadline(entry);
    this.wake(freed, false);
    return 'queued';
  }

  private admitDirect(entry: Entry<R>): void {
    // A class that never queues is admitted without asking the gate; its Sent
    // still reaches the gate's ledger through dispatched().
    const result = this.placement.admit(entry.request, entry.allowedWorkers, entry.cls.policy.busy, null, []);
    if (RouterError.is(result)) {
      this.book.finish(entry);
      return this.book.rejectClassified(entry.request, entry.handlers, result);
    }
    this.book.byId.set(entry.request.id, entry);
    entry.state = 'dispatched';
    entry.worker = result.worker;
    entry.bookedOn = result.worker;
    this.book.dispatched++;
    entry.handlers.dispatch(result);
  }

  private recheck(): void {
    if (this.dispatcher.inGateCheck) return;
    this.wake(undefined, true);
  }

  /**
   * A change: load fell on `freed` (null: anywhere, undefined: nowhere),
   * and when `gate`, held heads may answer otherwise. The wake rule releases
   * the lanes that may now pass and the queue drains.
   */
  private wake(freed: WorkerKey | null | undefined, gate: boolean): void {
    if (this.closed) return;
    if (freed !== undefined) this.wakeRule.capacityFreed(freed);
    if (gate) this.wakeRule.gateChanged();
    this.dispatcher.drain();
  }

  private onTimer(tick: boolean): void {
    if (tick) this.wakeRule.tick();
    this.dispatcher.drain();
  }
}
