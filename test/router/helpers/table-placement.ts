// A small Placement over a table of workers, for testing the scheduler's own
// logic (classes, DRR, lanes, gate) apart from the wasm selection path. It books
// each request's prompt tokens as prefill load until its first token and one
// active request until it ends, and picks the least-loaded eligible worker.
import { workerLabel, type WorkerKey } from '../../../bindings/workers.js';
import { RouterError } from '../../../router/errors.js';
import type { Admission, BusyThresholds, CapacityVerdict, Placement, SchedRequest } from '../../../router/scheduler/contracts.js';
import { WorkerInputs, type WorkerRows } from '../../../router/worker-inputs.js';

export interface TableWorker {
  key: WorkerKey;
  maxBatchedTokens: number;
  totalBlocks: number;
  prefillTokens: number;
  decodeBlocks: number;
  active: number;
  cachedTokens: number;
}

export class TablePlacement implements Placement {
  readonly workers: TableWorker[] = [];
  readonly booked = new Map<string, { worker: TableWorker; prefill: number; done: boolean }>();
  readonly admitted: string[] = [];
  rowsBuilt = 0;

  constructor(count: number, init: Partial<TableWorker> = {}) {
    for (let i = 0; i < count; i++) this.add(`w${i}`, init);
  }

  add(id: string, init: Partial<TableWorker> = {}): TableWorker {
    const w = { key: { id, rank: 0 }, maxBatchedTokens: 8192, totalBlocks: 1000, prefillTokens: 0, decodeBlocks: 0, active: 0, cachedTokens: 0, ...init };
    this.workers.push(w);
    return w;
  }

  remove(id: string): void {
    const i = this.workers.findIndex((w) => w.key.id === id);
    if (i >= 0) this.workers.splice(i, 1);
  }

  worker(id: string): TableWorker {
    return this.workers.find((w) => w.key.id === id)!;
  }

  liveWorkers(): number {
    return this.workers.length;
  }

  private eligible(request: SchedRequest, allowed: readonly WorkerKey[] | null): TableWorker[] {
    const set = allowed ? new Set(allowed.map(workerLabel)) : null;
    return this.workers.filter(
      (w) => (!set || set.has(workerLabel(w.key))) && (!request.pin || workerLabel(request.pin) === workerLabel(w.key)),
    );
  }

  busy(w: TableWorker, b: BusyThresholds | null): boolean {
    if (!b) return false;
    return (
      (b.prefillTokens !== undefined && w.prefillTokens > b.prefillTokens) ||
      (b.prefillFraction !== undefined && w.prefillTokens > b.prefillFraction * w.maxBatchedTokens) ||
      (b.decodeFraction !== undefined && w.decodeBlocks / w.totalBlocks > b.decodeFraction)
    );
  }

  cachedTokens(request: SchedRequest, allowed: readonly WorkerKey[] | null): number {
    return Math.max(0, ...this.eligible(request, allowed).map((w) => Math.min(w.cachedTokens, request.promptTokens)));
  }

  rows(request: SchedRequest, allowed: readonly WorkerKey[] | null, inputs: number): WorkerRows {
    this.rowsBuilt++;
    const ws = this.eligible(request, allowed);
    return {
      count: ws.length,
      workers: ws.map((w) => w.key),
      slots: Uint32Array.from(ws.map((_, i) => i)),
      ...(inputs & WorkerInputs.CACHE ? { cachedTokens: Float64Array.from(ws.map((w) => w.cachedTokens)), overlapBlocks: Float64Array.from(ws.map(() => 0)) } : {}),
      ...(inputs & WorkerInputs.LOAD
        ? {
            available: Uint8Array.from(ws.map(() => 1)),
            prefillTokens: Float64Array.from(ws.map((w) => w.prefillTokens)),
            decodeBlocks: Float64Array.from(ws.map((w) => w.decodeBlocks)),
            activeRequests: Float64Array.from(ws.map((w) => w.active)),
          }
        : {}),
    };
  }

  capacity(request: SchedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, exclude: readonly WorkerKey[] = []): CapacityVerdict {
    const skip = new Set(exclude.map(workerLabel));
    const ws = this.eligible(request, allowed).filter((w) => !skip.has(workerLabel(w.key)));
    if (ws.length === 0) return 'none';
    return ws.some((w) => !this.busy(w, busy)) ? 'free' : 'busy';
  }

  summarizes(): boolean {
    return true;
  }

  headroom(busy: BusyThresholds): number {
    return this.workers.filter((w) => !this.busy(w, busy)).length;
  }

  busyFor(worker: WorkerKey, busy: BusyThresholds): boolean {
    const w = this.workers.find((t) => workerLabel(t.key) === workerLabel(worker));
    return w !== undefined && this.busy(w, busy);
  }

  constraintKey(): string {
    return '';
  }

  admit(request: SchedRequest, allowed: readonly WorkerKey[] | null, busy: BusyThresholds | null, target: WorkerKey | null, exclude: readonly WorkerKey[]): Admission | RouterError {
    const skip = new Set(exclude.map(workerLabel));
    const ws = this.eligible(request, allowed).filter((w) => !skip.has(workerLabel(w.key)));
    if (ws.length === 0) return new RouterError(request.pin ? 'KVR_ERR_UNKNOWN_WORKER' : 'KVR_ERR_NO_WORKERS');
    const free = ws.filter((w) => !this.busy(w, busy));
    if (free.length === 0) return new RouterError(request.pin ? 'KVR_ERR_PINNED_OVERLOADED' : 'KVR_ERR_ALL_OVERLOADED');
    const targeted = target && free.find((w) => workerLabel(w.key) === workerLabel(target));
    const w = targeted || free.reduce((a, b) => (b.prefillTokens + b.active < a.prefillTokens + a.active ? b : a));
    w.prefillTokens += request.promptTokens;
    w.active++;
    this.booked.set(request.id, { worker: w, prefill: request.promptTokens, done: false });
    this.admitted.push(request.id);
    return { worker: w.key, overlapBlocks: 0, cachedTokens: 0 };
  }

  firstToken(requestId: string): void {
    const b = this.booked.get(requestId);
    if (!b || b.prefill === 0) return;
    b.worker.prefillTokens -= b.prefill;
    b.prefill = 0;
  }

  release(requestId: string): void {
    const b = this.booked.get(requestId);
    if (!b) return;
    this.firstToken(requestId);
    b.worker.active--;
    this.booked.delete(requestId);
  }

  /** Load the ledger still holds. */
  outstanding(): number {
    return this.workers.reduce((s, w) => s + w.prefillTokens + w.active, 0);
  }
}
