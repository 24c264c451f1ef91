// Cold Pool: keeps long uncached prompts (Cold) on a small, stable pool of
// workers and drains that pool of short (Warm) work before a Cold prefill
// lands, as a request classifier with a dispatch gate. classify sorts each
// request and narrows its workers; the gate holds Cold heads for a drained
// member; lifecycle events keep the per-worker Warm/Cold counts.
import { Rendezvous } from '../../../bindings/rendezvous.js';
import { workerLabel } from '../../../bindings/workers.js';
import type {
  ClassifierEvent,
  ClassifyRequest,
  ClassifyResult,
  DispatchGate,
  GateHandle,
  RequestClassifier,
  SchedRequest,
} from '../../scheduler/contracts.js';
import { ColdGate } from './gate.js';
import { PoolMembership, type Pool } from './membership.js';
import { checkColdPoolOptions, COLD_LANE, coldPoolParams, type ColdPoolConstruction, type ColdPoolOptions } from './options.js';
import { WorkTracker, type WorkKind } from './work.js';

export { COLD_LANE, COLD_POOL_DEFAULTS, COLD_RECHECK_MS, type ColdPoolOptions } from './options.js';
export { poolSize, routingId, POOL_KEY } from './membership.js';
export type { WorkKind } from './work.js';

/** P1: Warm under the threshold; Cold when the uncached part is at or over it; otherwise (long but cached) unmanaged. */
export function promptKind(promptTokens: number, cachedTokens: number, threshold: number): WorkKind | null {
  if (promptTokens < threshold) return 'warm';
  return promptTokens - cachedTokens >= threshold ? 'cold' : null;
}

export class ColdPool<R extends SchedRequest = SchedRequest> implements RequestClassifier<R> {
  readonly name = 'cold_pool';
  readonly options: Readonly<ColdPoolOptions>;
  private readonly membership: PoolMembership;
  private readonly work = new WorkTracker();
  private handle: GateHandle | undefined;

  constructor(options: Partial<ColdPoolConstruction> = {}) {
    const { rendezvous, ...rest } = options;
    this.options = Object.freeze(checkColdPoolOptions(rest));
    this.membership = new PoolMembership(this.options.workers, rendezvous ?? new Rendezvous());
  }

  classify({ request, cachedTokens }: ClassifyRequest<R>): ClassifyResult {
    const kind = promptKind(request.promptTokens, cachedTokens, this.options.requestThreshold);
    if (kind === null) return {};
    this.work.classified(request.id, kind);
    const pool = this.pool();
    // P3 (and P6 with workers: 0): Cold waits in its own lane; with a pool, only on the pool.
    if (kind === 'cold') return pool.members.length > 0 ? { lane: COLD_LANE, allowedWorkers: pool.members } : { lane: COLD_LANE };
    if (!this.options.steerWarm || pool.members.length === 0) return {};
    // P5: Warm keeps off the pool while Cold waits, and off the workers running Cold otherwise.
    const avoid = this.work.pendingCold > 0 ? pool.labels : this.work.coldWorkers();
    if (avoid.size === 0) return {};
    const allowed = pool.workers.filter((w) => !avoid.has(workerLabel(w.worker))).map((w) => w.worker);
    return allowed.length > 0 ? { allowedWorkers: allowed } : {};
  }

  installGate(handle: GateHandle): DispatchGate<R> {
    if (this.handle) throw new Error('a ColdPool instance serves one scheduler; create one per model route');
    this.handle = handle;
    return new ColdGate<R>(this.options, this.membership, this.work, handle);
  }

  onEvent(event: ClassifierEvent): boolean {
    switch (event.type) {
      case 'sent':
        // Only a retry that moved Warm work may have drained a member; any other Sent changes nothing held heads wait for (G9).
        return this.work.runsOn(event.requestId, event.worker);
      case 'firstToken':
        return false;
      case 'completed':
      case 'aborted': {
        const ended = this.work.ended(event.requestId);
        // Held Cold heads wait only for a member to lose its last Warm request.
        return ended?.kind === 'warm' && ended.worker !== null && this.work.pendingCold > 0 && this.work.warmCount(ended.worker) === 0 && this.pool().labels.has(ended.worker);
      }
    }
  }

  /** The current pool members' labels, best-ranked first. */
  poolMembers(): string[] {
    return this.pool().members.map(workerLabel);
  }

  /** Pending Cold requests and Warm/Cold work in flight per worker, for reports and tests. */
  snapshot(): { pool: string[]; pendingCold: number; warm: Record<string, number>; cold: Record<string, number> } {
    return { pool: this.poolMembers(), ...this.work.snapshot() };
  }

  private pool(): Pool {
    if (!this.handle) throw new Error('ColdPool needs a scheduler to install its gate before it classifies');
    return this.membership.of(this.handle.workers());
  }
}

/** A Cold Pool with typed options (defaults for the rest). */
export function coldPool<R extends SchedRequest = SchedRequest>(options: Partial<ColdPoolConstruction> = {}): ColdPool<R> {
  return new ColdPool<R>(options);
}

/** A Cold Pool from `request_classifier: {type: cold_pool, ...}` parameters (checked strictly). */
export function createColdPool(params?: unknown): ColdPool {
  return new ColdPool(coldPoolParams(params));
}
