// What Cold Pool knows about the requests it classified: Warm and Cold work
// in flight per worker, and Cold requests still waiting in the queue.
import { workerLabel, type WorkerKey } from '../../../bindings/workers.js';

export type WorkKind = 'warm' | 'cold';

interface Tracked {
  readonly kind: WorkKind;
  /** Label of the worker it runs on; null while queued. */
  worker: string | null;
}

export class WorkTracker {
  private readonly requests = new Map<string, Tracked>();
  private readonly warmOn = new Map<string, number>();
  private readonly coldOn = new Map<string, number>();
  /** Cold requests classified and not yet dispatched. */
  pendingCold = 0;

  classified(requestId: string, kind: WorkKind): void {
    if (this.requests.has(requestId)) return;
    this.requests.set(requestId, { kind, worker: null });
    if (kind === 'cold') this.pendingCold++;
  }

  /** A queued Cold request (the only kind the gate holds). */
  isQueuedCold(requestId: string): boolean {
    const t = this.requests.get(requestId);
    return t !== undefined && t.kind === 'cold' && t.worker === null;
  }

  /**
   * The request runs on `worker` now (dispatch, or a retry that moved it).
   * Returns whether Warm work left another worker (which may have drained it).
   */
  runsOn(requestId: string, worker: WorkerKey): boolean {
    const t = this.requests.get(requestId);
    const label = workerLabel(worker);
    if (!t || t.worker === label) return false;
    const from = t.worker;
    if (from === null) {
      if (t.kind === 'cold') this.pendingCold--;
    } else this.count(t, -1);
    t.worker = label;
    this.count(t, +1);
    return from !== null && t.kind === 'warm';
  }

  /** The request ended; returns what it was and where it ran (null: it never left the queue). */
  ended(requestId: string): { kind: WorkKind; worker: string | null } | undefined {
    const t = this.requests.get(requestId);
    if (!t) return undefined;
    this.requests.delete(requestId);
    if (t.worker === null) {
      if (t.kind === 'cold') this.pendingCold--;
    } else this.count(t, -1);
    return t;
  }

  warmCount(label: string): number {
    return this.warmOn.get(label) ?? 0;
  }

  coldCount(label: string): number {
    return this.coldOn.get(label) ?? 0;
  }

  /** Labels of the workers running Cold work. */
  coldWorkers(): ReadonlySet<string> {
    return new Set(this.coldOn.keys());
  }

  snapshot(): { pendingCold: number; warm: Record<string, number>; cold: Record<string, number> } {
    return { pendingCold: this.pendingCold, warm: Object.fromEntries(this.warmOn), cold: Object.fromEntries(this.coldOn) };
  }

  private count(t: Tracked, delta: number): void {
    const map = t.kind === 'warm' ? this.warmOn : this.coldOn;
    const n = (map.get(t.worker!) ?? 0) + delta;
    if (n > 0) map.set(t.worker!, n);
    else map.delete(t.worker!);
  }
}
