// Submit-time work: classify a request, resolve its class, allowed workers,
// cost, deadline, lane and order, and apply the class's queue limit. What
// comes out is an entry ready to queue, or a refusal already answered.
import { createHmac } from 'node:crypto';
import type { LaneOrder } from '../../bindings/lane-order.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import { RouterError } from '../errors.js';
import { NO_ROWS } from '../worker-inputs.js';
import type { RequestBook } from './book.js';
import type { ClassifyResult, Placement, PolicyClass, RequestClassifier, SchedRequest } from './contracts.js';
import { Entry, type DispatchHandlers } from './entry.js';
import type { ClassQueue, ItemIds } from './lanes.js';
import { deadlineError, orderError, queueFull } from './refusals.js';

export interface IntakeOptions<R extends SchedRequest> {
  placement: Placement<R>;
  classifier: RequestClassifier<R> | undefined;
  classes: ReadonlyMap<string, ClassQueue<Entry<R>>>;
  defaultClass: ClassQueue<Entry<R>>;
  ids: ItemIds;
  book: RequestBook<R>;
  /** Key for hashing client session ids into lane keys. */
  laneSecret: Buffer;
}

export class Intake<R extends SchedRequest> {
  private seq = 0;

  constructor(private readonly o: IntakeOptions<R>) {}

  /** The request classified into an entry (not queued yet), or undefined once it has been refused. */
  entryFor(request: R, handlers: DispatchHandlers, now: number): Entry<R> | undefined {
    const { placement, classifier, book } = this.o;
    const cached = placement.cachedTokens(request, request.allowedWorkers);
    const defaultCost = Math.max(1, request.promptTokens - cached);
    let overrides: Exclude<ClassifyResult, { reject: object }> = {};
    if (classifier) {
      const inputs = classifier.inputs ?? 0;
      const rows = inputs ? placement.rows(request, request.allowedWorkers, inputs) : NO_ROWS;
      const result = classifier.classify({ request, now, cachedTokens: cached, defaultCost }, rows);
      if (result.reject) {
        book.rejectNew(handlers, new RouterError('KVR_ERR_CLASSIFIER_REJECTED', result.reject.message, { classifier: classifier.name }, result.reject.status));
        return undefined;
      }
      overrides = result;
    }
    const refuse = (error: RouterError): undefined => void book.rejectClassified(request, handlers, error);
    const cls = this.o.classes.get(overrides.policyClass ?? request.policyClass ?? '') ?? this.o.defaultClass;
    const allowed = intersectAllowed(request.allowedWorkers, overrides.allowedWorkers);
    const cost = overrides.cost ?? defaultCost;
    if (!(cost > 0) || !Number.isFinite(cost)) return refuse(new RouterError('KVR_ERR_INVALID_REQUEST', `classifier ${classifier?.name} set a non-positive cost ${cost}`));
    const deadline = overrides.deadline ?? (cls.policy.sloMs === null ? Infinity : now + cls.policy.sloMs);
    if (deadline <= now) return refuse(deadlineError(cls.policy.name, 'admission'));
    if (placement.liveWorkers() === 0) return refuse(new RouterError('KVR_ERR_NO_WORKERS'));

    const order = this.orderOf(cls.policy, request, now, cost, deadline);
    const unordered = orderError(order);
    if (unordered) return refuse(unordered);
    const lane = request.sessionId !== null ? `session:${this.laneKey(request.sessionId)}` : overrides.lane ? `named:${overrides.lane}` : 'shared';
    return new Entry<R>(this.o.ids.take(), request, cls, lane, allowed, cached, cost, now, deadline, order, handlers);
  }

  /** The class's queue limit, scaled by live workers, when queueing one more would pass it. */
  overLimit(cls: ClassQueue<Entry<R>>): RouterError | undefined {
    const live = this.o.placement.liveWorkers();
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
    return createHmac('sha256', this.o.laneSecret).update(sessionId).digest('base64url').slice(0, 22);
  }
}

function intersectAllowed(caller: readonly WorkerKey[] | null, narrowed: readonly WorkerKey[] | undefined): readonly WorkerKey[] | null {
  if (!narrowed) return caller;
  if (caller === null) return narrowed.length > 0 ? narrowed : null;
  const keep = new Set(narrowed.map(workerLabel));
  const both = caller.filter((w) => keep.has(workerLabel(w)));
  // An empty intersection keeps the caller's set.
  return both.length > 0 ? both : caller;
}
