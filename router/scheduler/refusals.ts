// The scheduler's refusals: the errors it answers with, and which refusals of
// the placement mean "busy for now", so that a queued head waits instead of failing.
import { validateOrder } from '../../bindings/lane-heap.js';
import type { LaneOrder } from '../../bindings/lane-order.js';
import { RouterError } from '../errors.js';
import type { PolicyClass } from './contracts.js';

export type DeadlineStage = 'admission' | 'dispatch' | 'held';

/** Refusals that mean "busy for now": a queued head waits for capacity instead of failing. */
export function waitsForCapacity(error: RouterError): boolean {
  return error.code === 'KVR_ERR_ALL_OVERLOADED' || error.code === 'KVR_ERR_PINNED_OVERLOADED';
}

export function neverQueues(policy: PolicyClass): boolean {
  return policy.queueLimit.requests === 0 || policy.queueLimit.tokens === 0;
}

/** Why the lane heap would refuse an order (a tier past 32 bits, a key that is not finite), as a client error; undefined when it takes it. */
export function orderError(order: LaneOrder): RouterError | undefined {
  try {
    validateOrder(order);
    return undefined;
  } catch (error) {
    return new RouterError('KVR_ERR_INVALID_REQUEST', `the request cannot be queued: ${(error as Error).message}`);
  }
}

export function deadlineError(policyClass: string, stage: DeadlineStage): RouterError {
  return new RouterError('KVR_ERR_DEADLINE_EXPIRED', `the request expired at stage ${stage} in policy class ${policyClass}`, { policy_class: policyClass, stage });
}

export function queueFull(policyClass: string, limit: 'requests' | 'tokens', value: number): RouterError {
  return new RouterError('KVR_ERR_QUEUE_FULL', `policy class ${policyClass} has reached its queue limit of ${value} ${limit}`, {
    policy_class: policyClass,
    stage: 'admission',
    limit,
  });
}
