// One disaggregated model's side of a request: the decider, then the two
// picks. The scheduler places the part it admits (the prefill, or the whole
// request when it runs aggregated) like any request, restricted by role
// taints, so queueing, busy thresholds, retries and the ledger work as for an
// ordinary model. The decode side is booked here under a request id of its
// own (decodeIdOf) when the prefill is dispatched, and held until the caller
// releases it; the ledger sweep is told those bookings are live.
import type { BusyThresholds } from '../../bindings/selection-contract.js';
import type { WorkerKey } from '../../bindings/workers.js';
import { RouterError } from '../errors.js';
import type { ModelRouter } from '../model-router.js';
import type { Explanation, RequestFields, RoutedRequest } from '../model-fleet.js';
import type { Admission } from '../scheduler/contracts.js';
import type { DispatchHandlers } from '../scheduler/scheduler.js';
import { decideDisaggregation, type DisaggDecision, type DisaggSettings } from './decider.js';
import { AGGREGATE_TAINT, DECODE_TAINT, PREFILL_TAINT } from './roles.js';

/** The request id a decode booking is kept under. */
export function decodeIdOf(requestId: string): string {
  return `${requestId}:decode`;
}

export interface DisaggPlan {
  decision: DisaggDecision;
  /** What the scheduler admits: the prefill, or the whole request. */
  request: RoutedRequest;
}

export interface DisaggExplanation {
  decision: DisaggDecision;
  /** The scheduler's pick: the prefill worker, or the worker that runs it whole. */
  main: Explanation;
  /** The decode pick after the prefill pick (null when aggregated or no prefill worker was found). */
  decode: Explanation | null;
}

const NO_HASHES = new BigUint64Array(0);

export class DisaggPlanner {
  /** Live decode bookings: decode booking id -> the decode worker. */
  private readonly decoding = new Map<string, WorkerKey>();
  private readonly removeHolder: () => void;

  constructor(
    private readonly route: ModelRouter,
    readonly settings: DisaggSettings,
  ) {
    this.removeHolder = route.addBookingHolder((id) => this.decoding.has(id));
  }

  /** Hashes the prompt once and decides how it runs. Throws the RouterError of a bad prompt or pin. */
  plan(fields: RequestFields, tokens: ArrayLike<number>): DisaggPlan {
    const base = this.route.fleet.prepare(fields, tokens);
    const whole = withTaint(base, AGGREGATE_TAINT);
    const fleet = this.route.fleet;
    const runnable = fleet.capacity(whole, whole.allowedWorkers, null) !== 'none';
    const decision = decideDisaggregation(base.promptTokens, runnable ? fleet.cachedTokens(whole, whole.allowedWorkers) : null, this.settings);
    return { decision, request: decision.mode === 'aggregated' ? whole : withTaint(base, PREFILL_TAINT) };
  }

  /** plan, then the scheduler; exactly one handler runs, now or later. */
  submit(fields: RequestFields, tokens: ArrayLike<number>, handlers: DispatchHandlers): DisaggPlan | undefined {
    let plan: DisaggPlan;
    try {
      plan = this.plan(fields, tokens);
    } catch (error) {
      if (!RouterError.is(error)) throw error;
      handlers.reject(error);
      return undefined;
    }
    this.admit(plan, handlers);
    return plan;
  }

  /** Hands a plan's request to the scheduler, which may dispatch it before this returns. */
  admit(plan: DisaggPlan, handlers: DispatchHandlers): void {
    this.route.scheduler.submit(plan.request, handlers);
  }

  /**
   * Picks and books the decode worker for a request whose prefill runs on
   * `prefill`: the least costly decode-capable worker other than that one,
   * its own cached prefix credited when the engine reuses it. The booking
   * carries the prompt's blocks and no prefill work (the KV comes over).
   */
  bookDecode(request: RoutedRequest, prefill: WorkerKey): Admission | RouterError {
    const decode = this.decodeRequest(request);
    const choice = this.route.fleet.choose(this.pickRequest(decode), decode.allowedWorkers, null, null, [prefill]);
    if (RouterError.is(choice)) return choice;
    // Booked through the route, so replicas hear of it: the prompt's blocks (all cached: the KV comes over) and no prefill.
    this.route.bookPlaced(decode, { ...choice, cachedTokens: decode.promptTokens });
    // It has no prefill on that worker: from now on it counts as decoding there, as the next decode pick must see it.
    this.route.bookedFirstToken(decode.id);
    this.decoding.set(decode.id, choice.worker);
    this.route.scheduler.capacityChanged();
    return choice;
  }

  /** Frees a request's decode booking; a no-op when it has none (every end may call it). */
  releaseDecode(requestId: string): void {
    const id = decodeIdOf(requestId);
    if (!this.decoding.delete(id)) return;
    this.route.releaseBooking(id);
    this.route.scheduler.capacityChanged();
  }

  /** Decode bookings held now. */
  get liveDecodes(): number {
    return this.decoding.size;
  }

  /** The decision and both picks, booking nothing. */
  explain(fields: RequestFields, tokens: ArrayLike<number>, busy: BusyThresholds | null): DisaggExplanation {
    const plan = this.plan(fields, tokens);
    const fleet = this.route.fleet;
    const main = fleet.explain(plan.request, busy);
    if (plan.decision.mode === 'aggregated' || main.chosen === null) return { decision: plan.decision, main, decode: null };
    const decode = this.decodeRequest(plan.request);
    return { decision: plan.decision, main, decode: withoutWorker(fleet.explain(this.pickRequest(decode), null), main.chosen) };
  }

  close(): void {
    this.removeHolder();
  }

  private decodeRequest(request: RoutedRequest): RoutedRequest {
    const taints = request.requiredTaints.filter((t) => t !== PREFILL_TAINT && t !== AGGREGATE_TAINT);
    return { ...request, id: decodeIdOf(request.id), requiredTaints: [...taints, DECODE_TAINT] };
  }

  /** What the decode pick weighs: the prompt, or (no local prefix reuse) nothing but each worker's load. */
  private pickRequest(decode: RoutedRequest): RoutedRequest {
    return this.settings.decodePrefixReuse ? decode : { ...decode, promptTokens: 0, localHashes: NO_HASHES, seqHashes: NO_HASHES };
  }
}

function withTaint(request: RoutedRequest, taint: string): RoutedRequest {
  return { ...request, requiredTaints: [...request.requiredTaints, taint] };
}

/**
 * The decode pick never takes the prefill worker: its explanation shows that
 * worker filtered and the pick among the rest, as the lowest cost (the
 * explanation's full scan is deterministic, like the default policy).
 */
function withoutWorker(x: Explanation, worker: string): Explanation {
  const workers = x.workers.map((w) => (w.worker === worker ? { ...w, eligible: false, filtered: 'runs this request\'s prefill', cost: null } : w));
  let chosen: string | null = null;
  let best = Infinity;
  for (const w of workers) {
    if (w.eligible && w.cost !== null && w.cost < best) {
      best = w.cost;
      chosen = w.worker;
    }
  }
  return { ...x, workers, chosen, error: chosen === null ? { code: 'KVR_ERR_NO_WORKERS', message: `no decode worker is available for model ${x.model}` } : null };
}
