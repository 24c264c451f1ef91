import type { WorkerKey } from '../../../bindings/workers.js';
import { plainFields } from '../../../router/model-fleet.js';
import { RouterError } from '../../../router/errors.js';
import type { Admission, PolicyClass, SchedRequest } from '../../../router/scheduler/contracts.js';
import type { DispatchHandlers } from '../../../router/scheduler/scheduler.js';

let n = 0;
export function req(over: Partial<SchedRequest> = {}): SchedRequest {
  return { ...plainFields(`r${n++}`), promptTokens: 100, ...over };
}

export function policy(over: Partial<PolicyClass> = {}): PolicyClass {
  return { name: 'default', quantum: 1000, queuePolicy: 'fcfs', busy: null, queueLimit: { requests: null, tokens: null }, sloMs: null, ...over };
}

/** Records what happened to each request. */
export class Outcomes {
  readonly dispatched = new Map<string, WorkerKey>();
  readonly order: string[] = [];
  readonly rejected = new Map<string, RouterError>();
  handlers(id: string): DispatchHandlers {
    return {
      dispatch: (a: Admission) => {
        this.dispatched.set(id, a.worker);
        this.order.push(id);
      },
      reject: (e) => this.rejected.set(id, e),
    };
  }
}
