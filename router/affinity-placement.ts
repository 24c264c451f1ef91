// The scheduler's view of a model fleet, with what a bare ModelFleet does not
// do: session affinity, and a listener that hears of this router's own
// bookings and bindings (so replicas can share them).
//
// How affinity and the cost interact: a bound session's turn offers its worker
// to selection as a soft target only when the cache index knows no better
// place for the prompt (the bound worker's cached prefix is at least the best
// of the allowed workers). Selection then takes the target when it is
// eligible and not busy for the request's class; otherwise the cost decides
// as for any request and the session moves to the worker it picks. So the
// binding wins ties the index cannot break (the bound worker's KV events not
// seen yet, approximate mode, an equal shared prefix everywhere) and never
// overrides a longer cached prefix elsewhere or a busy threshold.
import type { WorkerKey } from '../bindings/workers.js';
import type { BusyThresholds } from '../bindings/selection-contract.js';
import type { Clock } from './clock.js';
import { RouterError } from './errors.js';
import type { ModelFleet, RoutedRequest } from './model-fleet.js';
import type { Admission, CapacityVerdict, Placement, WorkerCapacity } from './scheduler/contracts.js';
import type { SessionBinding, SessionBindings } from './session-bindings.js';
import type { WorkerInputMask, WorkerRows } from './worker-inputs.js';

/** Hears of this router's own ledger changes and session bindings; every method is optional. */
export interface RouteListener {
  /** One of this router's requests was booked on a worker (also again after a retry). */
  booked?(request: RoutedRequest, admission: Admission): void;
  firstToken?(requestId: string): void;
  released?(requestId: string): void;
  /** A session was bound for the first time, or moved to another worker. */
  sessionBound?(session: string, binding: SessionBinding): void;
  /** A session's binding was dropped because a dispatch to its worker failed. */
  sessionInvalidated?(session: string, worker: WorkerKey): void;
}

export class AffinityPlacement implements Placement<RoutedRequest> {
  listener: RouteListener | null = null;

  constructor(
    private readonly fleet: ModelFleet,
    private readonly clock: Clock,
    readonly sessions: SessionBindings | null,
  ) {}

  liveWorkers(): number {
    return this.fleet.liveWorkers();
  }

  cachedTokens(request: RoutedRequest, allowed: readonly WorkerKey[] | null): number {
    return this.fleet.cachedTokens(request, allowed);
  }

  rows(request: RoutedRequest, allowed: readonly WorkerKey[] | null, inputs: WorkerInputMask): WorkerRows {
    return this.fleet.rows(request, allowed, inputs);
  }

  capacity(request: RoutedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[]): CapacityVerdict {
    return this.fleet.capacity(request, allowed, busy, exclude);
  }

  summarizes(busy: BusyThresholds): boolean {
    return this.fleet.summarizes(busy);
  }

  headroom(busy: BusyThresholds): number {
    return this.fleet.headroom(busy);
  }

  busyFor(worker: WorkerKey, busy: BusyThresholds): boolean {
    return this.fleet.busyFor(worker, busy);
  }

  constraintKey(request: RoutedRequest): string {
    return this.fleet.constraintKey(request);
  }

  workerCapacities(): readonly WorkerCapacity[] {
    return this.fleet.workerCapacities();
  }

  admit(
    request: RoutedRequest,
    allowed: readonly WorkerKey[] | null,
    busy: BusyThresholds | null,
    target: WorkerKey | null,
    exclude: readonly WorkerKey[],
  ): Admission | RouterError {
    const sessions = this.sessions;
    const session = sessions ? request.sessionId : null;
    if (sessions && session !== null) {
      // A retry excludes the workers that failed: a binding to one of them is void.
      for (const failed of exclude) if (sessions.invalidate(session, failed)) this.listener?.sessionInvalidated?.(session, failed);
      // A dispatch gate's own target comes first.
      target ??= this.affinityTarget(sessions, request, session, allowed);
    }
    const result = this.fleet.admit(request, allowed, busy, target, exclude);
    if (RouterError.is(result)) return result;
    this.listener?.booked?.(request, result);
    if (sessions && session !== null) {
      const moved = sessions.bind(session, result.worker, this.clock.now());
      if (moved) this.listener?.sessionBound?.(session, moved);
    }
    return result;
  }

  /**
   * Books a request placed outside the scheduler (a disaggregated request's
   * decode side), told to the listener like any booking so replicas see it.
   */
  book(request: RoutedRequest, admission: Admission): void {
    this.fleet.book(request, admission.worker, admission.cachedTokens);
    this.listener?.booked?.(request, admission);
  }

  firstToken(requestId: string): void {
    this.fleet.firstToken(requestId);
    this.listener?.firstToken?.(requestId);
  }

  release(requestId: string): void {
    this.fleet.release(requestId);
    this.listener?.released?.(requestId);
  }

  /** The bound worker, when no allowed worker holds a longer cached prefix of this prompt. */
  private affinityTarget(sessions: SessionBindings, request: RoutedRequest, session: string, allowed: readonly WorkerKey[] | null): WorkerKey | null {
    const bound = sessions.lookup(session, this.clock.now());
    if (!bound || !this.fleet.hasWorker(bound.worker.id)) return null;
    const best = this.fleet.cachedTokens(request, allowed);
    if (best === 0 || this.fleet.cachedTokens(request, [bound.worker]) >= best) return bound.worker;
    return null;
  }
}
