// Cold Pool's dispatch gate: holds a queued Cold head until a pool member has
// no Warm work in flight and then targets that member; past the soft-drain
// timeout any member may take it. Everything else goes at once.
import { workerLabel, type WorkerKey } from '../../../bindings/workers.js';
import type { DispatchGate, GateHandle, GateVerdict, QueuedHead, SchedRequest } from '../../scheduler/contracts.js';
import type { PoolMembership } from './membership.js';
import { COLD_RECHECK_MS, type ColdPoolOptions } from './options.js';
import type { WorkTracker } from './work.js';

const GO: GateVerdict = Object.freeze({ go: true });

export class ColdGate<R extends SchedRequest = SchedRequest> implements DispatchGate<R> {
  constructor(
    private readonly options: ColdPoolOptions,
    private readonly membership: PoolMembership,
    private readonly work: WorkTracker,
    private readonly handle: GateHandle,
  ) {}

  check(head: QueuedHead<R>, now: number): GateVerdict {
    if (!this.work.isQueuedCold(head.request.id)) return GO;
    // P6: soft_drain_timeout_ms 0 is pool-only (the allowed set does the containment, nothing waits).
    if (this.options.softDrainTimeoutMs === 0) return GO;
    const members = this.members(head);
    // No pool (workers: 0, or fewer than two workers), or the pool moved away from this head's allowed set.
    if (members.length === 0) return GO;
    // P3: the member without Warm work, running the least Cold, best-ranked first.
    let target: WorkerKey | undefined;
    for (const m of members) {
      const label = workerLabel(m);
      if (this.work.warmCount(label) > 0) continue;
      if (!target || this.work.coldCount(label) < this.work.coldCount(workerLabel(target))) target = m;
    }
    if (target) return { go: true, target };
    // P4: after the soft-drain timeout any member may take it.
    const drainBy = head.arrival + this.options.softDrainTimeoutMs;
    if (now >= drainBy) return GO;
    // P7: asked again within 100 ms while held.
    return { go: false, until: Math.min(now + COLD_RECHECK_MS, drainBy) };
  }

  dispatched(head: QueuedHead<R>, worker: WorkerKey): boolean {
    this.work.runsOn(head.request.id, worker);
    // Dispatch only adds work: no held Cold head can go because of it.
    return false;
  }

  /** Current pool members this head may use. */
  private members(head: QueuedHead<R>): WorkerKey[] {
    const pool = this.membership.of(this.handle.workers());
    const allowed = head.allowedWorkers && new Set(head.allowedWorkers.map(workerLabel));
    return pool.members.filter((m) => !allowed || allowed.has(workerLabel(m)));
  }
}
