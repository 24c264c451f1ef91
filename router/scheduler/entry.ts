// A request while the scheduler holds it: its classification, its place in a
// lane, and where it went.
import type { LaneOrder } from '../../bindings/lane-order.js';
import type { WorkerKey } from '../../bindings/workers.js';
import type { RouterError } from '../errors.js';
import type { Admission, QueuedHead, SchedRequest } from './contracts.js';
import type { ClassQueue } from './lanes.js';
import type { CapacityScope } from './wake.js';

export interface DispatchHandlers {
  dispatch(admission: Admission): void;
  reject(error: RouterError): void;
}

export class Entry<R extends SchedRequest> implements QueuedHead<R> {
  state: 'queued' | 'dispatched' | 'done' = 'queued';
  /** The worker it went to (as Sent reported it). */
  worker: WorkerKey | null = null;
  /** The worker its booking in the placement's ledger is on. */
  bookedOn: WorkerKey | null = null;
  /** Whether the gate's dispatched() ran for this request. */
  gateCommitted = false;
  /** Whether the gate held this request's lane while it was the head. */
  heldOnce = false;
  readonly failed: WorkerKey[] = [];
  /** What its capacity check depends on (wake.ts), once asked. */
  scope: CapacityScope | null = null;

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
