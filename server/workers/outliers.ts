// Outlier ejection. A worker that keeps failing (connections refused or cut
// before an answer, timeouts, 5xx answers) is taken out of selection through
// the ledger's availability, the switch draining uses, but kept apart from
// the operator's draining. While it is out, an active health probe asks the
// engine's GET /health; the first healthy answer after its backoff readmits
// it. The backoff doubles each time the worker is ejected again soon after it
// came back (a flapping worker stays out longer) and starts over once it has
// stayed in rotation for a healthy period.
//
// A model never loses its last workers to ejection: at most
// max_ejection_percent of its non-draining workers (at least one) are out at
// once, and never the last one still in rotation. When every worker of a
// model fails, the router has nothing better to send to: ejecting them all
// would turn each answer into "no workers" while hiding the real cause, keep
// the model dark until the probes catch up, and make one router-side fault
// (its own network, a bad deploy of the probe path) take down the whole
// model. Kept in rotation, a failing last worker gives clients the worker's
// own error, and its recovery is seen by the first request that succeeds.
import type { Clock, Timer } from '../../router/clock.js';
import type { OutlierEjectionConfig } from '../config/schema.js';

/** What one attempt on a worker came to, as far as its health is concerned. */
export type AttemptOutcome = 'success' | FailureKind;
/** connect_failure: no connection, or one that broke before the answer; timeout: connect or headers timeout. */
export type FailureKind = 'connect_failure' | 'timeout' | '5xx';
export const FAILURE_KINDS: readonly FailureKind[] = ['connect_failure', 'timeout', '5xx'];
/** Why a worker was ejected: a streak of failures, or a stall (stall-watch.ts: no progress, and no answer to a health probe). */
export type EjectionReason = FailureKind | 'stall';
export const EJECTION_REASONS: readonly EjectionReason[] = [...FAILURE_KINDS, 'stall'];

/** What tripped a stall ejection. */
export interface StallDetail {
  /** How long the worker had shown no sign of life. */
  quietMs: number;
  /** Attempts waiting on it then. */
  waiting: number;
}

export interface OutlierHooks {
  /** Takes the worker out of selection, or readmits it. */
  setEjected(id: string, ejected: boolean): void;
  /** Operator draining: a draining worker is not part of the pool the ejection cap counts. */
  draining(id: string): boolean;
  /** One health check of the worker; true when it answered healthy. */
  probe(id: string): Promise<boolean>;
  log(message: string): void;
}

interface Ejection {
  reason: EjectionReason;
  /** The consecutive failures that tripped it (a stall: its one failed probe). */
  failures: number;
  stall: StallDetail | null;
  /** Clock ms when it was ejected. */
  since: number;
  /** The earliest readmission (since + backoff); a healthy probe from then on readmits it. */
  until: number;
  /** Ejections since the worker's last healthy period, this one included. */
  streak: number;
}

/** An ejection as seen now. */
export interface EjectionView {
  reason: EjectionReason;
  failures: number;
  stall: StallDetail | null;
  streak: number;
  /** How long it stays out at least (the base, doubled for each ejection in a row). */
  backoffMs: number;
  ejectedForMs: number;
  /** Until the backoff is over (0 once it is: the next healthy probe readmits the worker). */
  probingInMs: number;
}

/** A worker's health as the detector sees it, for /ready, explain and metrics. */
export interface WorkerHealthView {
  ejection: EjectionView | null;
  consecutiveConnectFailures: number;
  consecutive5xx: number;
  ejections: Record<EjectionReason, number>;
  /** Thresholds crossed (or stalls found) while the cap kept the worker in rotation. */
  held: Record<EjectionReason, number>;
  probes: { healthy: number; unhealthy: number };
}

interface WorkerHealth {
  readonly id: string;
  readonly model: string;
  connectFailures: number;
  serverErrors: number;
  ejection: Ejection | null;
  streak: number;
  /** When it was last readmitted. */
  returnedAt: number;
  probeTimer: Timer | undefined;
  readonly ejections: Record<EjectionReason, number>;
  readonly held: Record<EjectionReason, number>;
  readonly probes: { healthy: number; unhealthy: number };
}

const perKind = (): Record<EjectionReason, number> => ({ connect_failure: 0, timeout: 0, '5xx': 0, stall: 0 });

export class OutlierDetector {
  private readonly workers = new Map<string, WorkerHealth>();
  private closed = false;

  constructor(
    private readonly config: OutlierEjectionConfig,
    private readonly clock: Clock,
    private readonly hooks: OutlierHooks,
  ) {}

  add(id: string, model: string): void {
    this.workers.set(id, {
      id,
      model,
      connectFailures: 0,
      serverErrors: 0,
      ejection: null,
      streak: 0,
      returnedAt: -Infinity,
      probeTimer: undefined,
      ejections: perKind(),
      held: perKind(),
      probes: { healthy: 0, unhealthy: 0 },
    });
  }

  remove(id: string): void {
    this.workers.get(id)?.probeTimer?.cancel();
    this.workers.delete(id);
  }

  /**
   * Counts one attempt's outcome. Outcomes of requests still in flight when
   * the worker was ejected are ignored: only the probe readmits it.
   */
  record(id: string, outcome: AttemptOutcome): void {
    const w = this.workers.get(id);
    if (!w || w.ejection || this.closed) return;
    if (outcome === 'success') {
      w.connectFailures = 0;
      w.serverErrors = 0;
      return;
    }
    let tripped: boolean;
    if (outcome === '5xx') {
      // The worker answered: it is reachable, whatever the status.
      w.connectFailures = 0;
      w.serverErrors++;
      tripped = this.config.consecutive5xx > 0 && w.serverErrors >= this.config.consecutive5xx;
    } else {
      w.connectFailures++;
      tripped = this.config.consecutiveConnectFailures > 0 && w.connectFailures >= this.config.consecutiveConnectFailures;
    }
    if (tripped) this.eject(w, outcome, null);
  }

  /** The worker stopped answering and failed a health probe; true when it was ejected (false: the cap held it, or it is out already). */
  stalled(id: string, stall: StallDetail): boolean {
    const w = this.workers.get(id);
    if (!w || w.ejection || this.closed) return false;
    this.eject(w, 'stall', stall);
    return w.ejection !== null;
  }

  view(id: string): WorkerHealthView | undefined {
    const w = this.workers.get(id);
    if (!w) return undefined;
    const e = w.ejection;
    const now = this.clock.now();
    return {
      ejection: e && {
        reason: e.reason,
        failures: e.failures,
        stall: e.stall && { ...e.stall },
        streak: e.streak,
        backoffMs: e.until - e.since,
        ejectedForMs: now - e.since,
        probingInMs: Math.max(0, e.until - now),
      },
      consecutiveConnectFailures: w.connectFailures,
      consecutive5xx: w.serverErrors,
      ejections: { ...w.ejections },
      held: { ...w.held },
      probes: { ...w.probes },
    };
  }

  isEjected(id: string): boolean {
    return this.workers.get(id)?.ejection != null;
  }

  /** Stops every probe. */
  close(): void {
    this.closed = true;
    for (const w of this.workers.values()) w.probeTimer?.cancel();
  }

  private eject(w: WorkerHealth, reason: EjectionReason, stall: StallDetail | null): void {
    if (!this.mayEject(w)) {
      w.held[reason]++;
      return;
    }
    const now = this.clock.now();
    if (now - w.returnedAt >= this.config.backoffResetMs) w.streak = 0;
    w.streak++;
    const backoff = Math.min(this.config.maxEjectionMs, this.config.baseEjectionMs * 2 ** (w.streak - 1));
    const failures = reason === 'stall' ? 1 : reason === '5xx' ? w.serverErrors : w.connectFailures;
    w.ejection = { reason, failures, stall, since: now, until: now + backoff, streak: w.streak };
    w.ejections[reason]++;
    this.hooks.setEjected(w.id, true);
    this.hooks.log(`worker ${w.id} ejected ${describeTrip(reason, failures, stall)}; probing it from ${backoff} ms on`);
    this.probeAt(w, now + backoff);
  }

  /** The cap: at most max_ejection_percent of the model's pool out (at least one), and never its last worker in rotation. */
  private mayEject(w: WorkerHealth): boolean {
    if (this.hooks.draining(w.id)) return true;
    let pool = 0;
    let ejected = 0;
    for (const other of this.workers.values()) {
      if (other.model !== w.model || this.hooks.draining(other.id)) continue;
      pool++;
      if (other.ejection) ejected++;
    }
    const cap = Math.max(1, Math.floor((pool * this.config.maxEjectionPercent) / 100));
    return ejected < cap && pool - ejected > 1;
  }

  private probeAt(w: WorkerHealth, at: number): void {
    w.probeTimer = this.clock.at(at, () => void this.probe(w));
  }

  private async probe(w: WorkerHealth): Promise<void> {
    w.probeTimer = undefined;
    let healthy: boolean;
    try {
      healthy = await this.hooks.probe(w.id);
    } catch {
      healthy = false;
    }
    // The worker may have been removed, or the router closed, while the probe ran.
    if (this.closed || this.workers.get(w.id) !== w || !w.ejection) return;
    if (!healthy) {
      w.probes.unhealthy++;
      this.probeAt(w, this.clock.now() + this.config.probeIntervalMs);
      return;
    }
    w.probes.healthy++;
    w.ejection = null;
    w.connectFailures = 0;
    w.serverErrors = 0;
    w.returnedAt = this.clock.now();
    this.hooks.setEjected(w.id, false);
    this.hooks.log(`worker ${w.id} passed its health probe and is back in rotation`);
  }
}

function describeTrip(reason: EjectionReason, failures: number, stall: StallDetail | null): string {
  if (stall) return `as stalled: no response progress for ${Math.round(stall.quietMs)} ms with ${stall.waiting} request(s) waiting, and no answer to a health probe`;
  const what = reason === '5xx' ? '5xx answers' : reason === 'timeout' ? 'failures (the last a timeout)' : 'connection failures';
  return `after ${failures} consecutive ${what}`;
}
