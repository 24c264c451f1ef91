// The scheduler's seams: what it is given (policy classes, requests, a
// placement that knows the workers), and what plugins give it (a request
// classifier, optionally installing a dispatch gate).
import type { WorkerKey } from '../../bindings/workers.js';
import type { RouterError } from '../errors.js';
import type { WorkerInputMask, WorkerRows } from '../worker-inputs.js';

/** Any one threshold set makes a worker busy for the class (shared with the selector kernel). */
export type { BusyThresholds } from '../../bindings/selection-contract.js';
import type { BusyThresholds } from '../../bindings/selection-contract.js';

export type QueuePolicy = 'fcfs' | 'wspt';

export interface PolicyClass {
  name: string;
  /** DRR weight, in uncached prompt tokens per round. */
  quantum: number;
  queuePolicy: QueuePolicy;
  /** null: the class never finds a worker busy and never queues on capacity. */
  busy: BusyThresholds | null;
  /** Per live worker; null is unlimited, 0 means the class never queues. */
  queueLimit: { requests: number | null; tokens: number | null };
  /** Queue deadline after arrival; null for none. */
  sloMs: number | null;
}

/** What the scheduler needs to know about a request. */
export interface SchedRequest {
  id: string;
  promptTokens: number;
  sessionId: string | null;
  /** The last turn of its session (agent programs end with it). */
  sessionFinal: boolean;
  /** Class named by the client (header); unknown names fall back to the default. */
  policyClass: string | null;
  /** Priority jump, in the class policy's key units (fcfs: ms of arrival). */
  priority: number;
  /** Strict-priority tier; higher is served first. */
  tier: number;
  /** Exact worker (and rank) the client pinned. */
  pin: WorkerKey | null;
  /** The caller's set of allowed workers; null allows every worker. */
  allowedWorkers: readonly WorkerKey[] | null;
}

export type CapacityVerdict =
  /** Some eligible worker is not busy for the class. */
  | 'free'
  /** Every eligible worker is busy for the class. */
  | 'busy'
  /** No worker is eligible at all (none alive, pinned worker gone, empty allowed set). */
  | 'none';

/** A worker rank that takes new requests, with its KV cache capacity. */
export interface WorkerCapacity {
  readonly worker: WorkerKey;
  /** KV cache capacity in tokens (total blocks x block size). */
  readonly capacityTokens: number;
}

export interface Admission {
  worker: WorkerKey;
  /** Overlap blocks and cached tokens on the chosen worker. */
  overlapBlocks: number;
  cachedTokens: number;
}

/** The scheduler's view of the workers of its model fleet; implemented by router/model-fleet.ts. */
export interface Placement<R extends SchedRequest = SchedRequest> {
  liveWorkers(): number;
  /** Best cached prefix, in tokens, over the eligible workers. */
  cachedTokens(request: R, allowed: readonly WorkerKey[] | null): number;
  /** Rows of the declared groups for the eligible workers (overloaded ones included). */
  rows(request: R, allowed: readonly WorkerKey[] | null, inputs: WorkerInputMask): WorkerRows;
  /** Whether some worker the request may use (allowed, pinned, not excluded) is free for the class; no booking. */
  capacity(request: R, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[]): CapacityVerdict;
  /**
   * Whether capacity verdicts under `busy` depend only on each worker's load,
   * so that headroom and busyFor describe them; false when they depend on
   * the request too (a TTFT target's prediction): each waiting head of such a
   * class is asked again at every capacity change.
   */
  summarizes(busy: BusyThresholds): boolean;
  /**
   * The fleet's headroom for a class: live workers not busy under `busy`. A
   * request nothing narrows (no allowed set, pin or exclusion, an empty
   * constraintKey) gets 'free' from capacity() exactly when this is above
   * 0, except under a TTFT target (busy.ttftMs), which only capacity() can
   * judge and the scheduler then asks. The scheduler reads it on every capacity change, so it must come from
   * what the ledger keeps (a count, or one pass in the core), never from a
   * selection.
   */
  headroom(busy: BusyThresholds): number;
  /**
   * Whether the worker takes requests and is busy under `busy`. A wait whose
   * workers are all so cannot pass, so a change to one of them leaves it
   * closed. Read like headroom, on changes: from what the ledger keeps.
   */
  busyFor(worker: WorkerKey, busy: BusyThresholds): boolean;
  /**
   * What the placement itself narrows a request's workers by (required
   * taints, say) as a key, '' when nothing. Requests of one class with the
   * same allowed set, pin, exclusions and key get the same capacity() verdict.
   */
  constraintKey(request: R): string;
  /** Selects a worker (honouring a soft target when eligible and not busy) and books it in the ledger. */
  admit(
    request: R,
    allowed: readonly WorkerKey[] | null,
    busy: BusyThresholds | null,
    target: WorkerKey | null,
    exclude: readonly WorkerKey[],
  ): Admission | RouterError;
  /**
   * The live worker ranks (draining ones excluded) and their KV capacity, for
   * gates that budget capacity. The same array is returned until the worker
   * set changes, so callers may cache what they derive from it by identity.
   */
  workerCapacities?(): readonly WorkerCapacity[];
  /** Ledger: the request produced its first token. */
  firstToken(requestId: string): void;
  /** Ledger: the request ended (completed, failed or aborted after dispatch). */
  release(requestId: string): void;
}

/** A queued head as plugins see it. */
export interface QueuedHead<R extends SchedRequest = SchedRequest> {
  readonly request: R;
  readonly policyClass: string;
  /** The lane it waits in: 'shared', 'session:<keyed hash>' or 'named:<name>'. */
  readonly lane: string;
  readonly allowedWorkers: readonly WorkerKey[] | null;
  readonly cachedTokens: number;
  readonly cost: number;
  readonly arrival: number;
  readonly deadline: number;
}

export type GateVerdict = { go: true; target?: WorkerKey } | { go: false; until?: number };

/**
 * A dispatch gate answers, per queue head and before the capacity check,
 * whether it may go now. check is a read; dispatched commits.
 *
 * A held head is asked again only when its answer may have changed: at its
 * `until`; when the gate reports a change (dispatched or the classifier's
 * onEvent returning true, or GateHandle.recheck()); when the set of workers
 * changes; and, for a hold without a future `until`, at the periodic tick.
 * Capacity changes alone do not ask it again, so an answer that depends on
 * time must say when in `until`.
 */
export interface DispatchGate<R extends SchedRequest = SchedRequest> {
  check(head: QueuedHead<R>, now: number): GateVerdict;
  /** Runs exactly once per request, when it leaves the queue (or at Sent for ungated requests). Returns whether the gate's ledger changed. */
  dispatched(head: QueuedHead<R>, worker: WorkerKey): boolean;
}

/** Handed to a classifier that installs a gate. */
export interface GateHandle {
  /** Asks the scheduler to ask the gate again about every held head. */
  recheck(): void;
  now(): number;
  /** The placement's live workers and their KV capacity (Placement.workerCapacities); empty when it does not know. */
  workers(): readonly WorkerCapacity[];
}

export interface ClassifyRequest<R extends SchedRequest = SchedRequest> {
  readonly request: R;
  readonly now: number;
  /** Best cached prefix over eligible workers, in tokens. */
  readonly cachedTokens: number;
  /** max(1, prompt tokens - cached tokens). */
  readonly defaultCost: number;
}

export type ClassifyResult =
  | {
      reject?: undefined;
      policyClass?: string;
      lane?: string;
      allowedWorkers?: readonly WorkerKey[];
      cost?: number;
      deadline?: number;
    }
  | { reject: { message: string; status?: number } };

export type ClassifierEvent =
  | { type: 'sent'; requestId: string; worker: WorkerKey }
  | { type: 'firstToken'; requestId: string }
  | { type: 'completed'; requestId: string }
  | { type: 'aborted'; requestId: string; worker: WorkerKey | null };

export interface RequestClassifier<R extends SchedRequest = SchedRequest> {
  readonly name: string;
  /** Worker-input groups classify reads; NONE (the default) builds nothing. */
  readonly inputs?: WorkerInputMask;
  /** Returns at once with overrides or a rejection; it never parks a request. */
  classify(request: ClassifyRequest<R>, workers: WorkerRows): ClassifyResult;
  /** Called once when the scheduler starts; a classifier that holds requests returns its gate. */
  installGate?(handle: GateHandle): DispatchGate<R> | undefined;
  /**
   * Lifecycle callbacks. Returns true when the event changed state held heads
   * depend on. A classified request that ends without dispatch (queued and
   * cancelled, expired, or rejected at admission) gets `aborted` with worker null.
   */
  onEvent?(event: ClassifierEvent): boolean | void;
}
