// Stalled workers. A worker whose process is alive but stuck (a hung engine,
// a stopped process) still accepts connections, so nothing fails: requests
// sent to it wait for headers until headers_timeout_ms, and since its ledger
// load looks ordinary it keeps winning selections meanwhile. The watch sees
// every attempt on every worker (it wraps the dispatch handler) and counts
// each sign of life: response headers, body chunks, ends. A worker with
// attempts waiting on it and no sign of life for stall_ms is suspect; one
// GET of its health endpoint (stall_probe_timeout_ms) decides. A worker that
// answers is slow, not stuck (a long non-streaming generation shows nothing
// until it ends): it stays, and is asked again after another quiet stall_ms.
// One that does not answer is ejected (the outlier detector, with its cap);
// then the attempts waiting on it are aborted with a StalledWorkerError, and
// the exchange handles that like any broken connection: a request that has
// sent nothing to its client is placed again through admission, a stream
// already relaying ends with an error event. The detector's probe brings the
// worker back once it answers again.
//
// Counting, not timestamping: the hot path only increments a number per
// chunk; a sweep every quarter of stall_ms compares it with what it saw last.
// A stall is therefore noticed between stall_ms and 1.25 stall_ms after the
// last sign of life, never earlier.
import type { Dispatcher } from 'undici';
import type { Clock, Timer } from '../../router/clock.js';

type IncomingHttpHeaders = Record<string, string | string[] | undefined>;

export interface StallHooks {
  /** One health check with the stall probe's timeout; true when it answered healthy. */
  probe(id: string): Promise<boolean>;
  /** Out of rotation already: nothing to watch. */
  ejected(id: string): boolean;
  /** The probe failed: eject the worker; true when it was ejected (the cap may keep it in rotation). */
  eject(id: string, quietMs: number, waiting: number): boolean;
  log(message: string): void;
}

/** A worker's stall state, for /ready, the admin listing and metrics. */
export interface StallView {
  /** Attempts on the worker not yet ended. */
  inFlight: number;
  /** How long the attempts waiting on it have seen no sign of life (0 when none wait, or there was one since the last sweep). */
  quietMs: number;
  /** Health probes of a quiet worker: healthy ones kept it, unhealthy ones ejected it (or tried: see held). */
  probes: { healthy: number; unhealthy: number };
  /** Attempts aborted because the worker was ejected as stalled. */
  aborted: number;
}

/** Why an attempt was aborted: the worker stopped answering. */
export class StalledWorkerError extends Error {}

interface Watched {
  readonly id: string;
  readonly inFlight: Set<WatchedAttempt>;
  /** Signs of life so far (headers, chunks, ends). */
  activity: number;
  /** The activity count the last sweep saw. */
  seen: number;
  /** Clock ms since when the waiting attempts have shown nothing; null when none wait. */
  quietSince: number | null;
  probing: boolean;
  readonly probes: { healthy: number; unhealthy: number };
  aborted: number;
}

/** A dispatch handler in front of the exchange's: counts signs of life, and can abort the attempt. */
class WatchedAttempt implements Dispatcher.DispatchHandler {
  controller: Dispatcher.DispatchController | null = null;

  constructor(
    private readonly worker: Watched,
    private readonly inner: Dispatcher.DispatchHandler,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.controller = controller;
    this.inner.onRequestStart?.(controller, context);
  }
  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: IncomingHttpHeaders, message?: string): void {
    this.worker.activity++;
    this.inner.onResponseStart?.(controller, status, headers, message);
  }
  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.worker.activity++;
    this.inner.onResponseData?.(controller, chunk);
  }
  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.settle(true);
    this.inner.onResponseEnd?.(controller, trailers);
  }
  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    this.settle(false);
    this.inner.onResponseError?.(controller, error);
  }

  /** Waiting on the worker: started on a socket, not paused by a slow client, not aborted. */
  get waiting(): boolean {
    const c = this.controller;
    return c !== null && !c.paused && !c.aborted;
  }

  settle(whole: boolean): void {
    if (whole) this.worker.activity++;
    this.worker.inFlight.delete(this);
  }
}

export class StallWatch {
  private readonly workers = new Map<string, Watched>();
  private sweepTimer: Timer | undefined;
  private closed = false;
  private readonly intervalMs: number;

  constructor(
    /** 0: no stall detection (attempts are still dispatched through the watch, uncounted). */
    private readonly stallMs: number,
    private readonly clock: Clock,
    private readonly hooks: StallHooks,
  ) {
    this.intervalMs = Math.max(1, Math.floor(stallMs / 4));
  }

  add(id: string): void {
    this.workers.set(id, { id, inFlight: new Set(), activity: 0, seen: 0, quietSince: null, probing: false, probes: { healthy: 0, unhealthy: 0 }, aborted: 0 });
    if (this.stallMs > 0 && !this.sweepTimer && !this.closed) this.arm();
  }

  remove(id: string): void {
    this.workers.delete(id);
  }

  /** The handler to dispatch an attempt on worker `id` with: `handler`, watched. */
  watch(id: string, handler: Dispatcher.DispatchHandler): Dispatcher.DispatchHandler {
    const w = this.workers.get(id);
    if (!w || this.stallMs === 0) return handler;
    const attempt = new WatchedAttempt(w, handler);
    w.inFlight.add(attempt);
    return attempt;
  }

  /** A dispatch that threw: the attempt never started. */
  forget(id: string, handler: Dispatcher.DispatchHandler): void {
    if (handler instanceof WatchedAttempt) this.workers.get(id)?.inFlight.delete(handler);
  }

  view(id: string): StallView {
    const w = this.workers.get(id);
    if (!w) return { inFlight: 0, quietMs: 0, probes: { healthy: 0, unhealthy: 0 }, aborted: 0 };
    return {
      inFlight: w.inFlight.size,
      quietMs: w.quietSince === null ? 0 : Math.round(this.clock.now() - w.quietSince),
      probes: { ...w.probes },
      aborted: w.aborted,
    };
  }

  close(): void {
    this.closed = true;
    this.sweepTimer?.cancel();
  }

  private arm(): void {
    this.sweepTimer = this.clock.at(this.clock.now() + this.intervalMs, () => {
      this.sweep();
      if (!this.closed) this.arm();
    });
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const w of this.workers.values()) {
      let waiting = 0;
      for (const a of w.inFlight) if (a.waiting) waiting++;
      if (waiting === 0 || w.activity !== w.seen) {
        w.seen = w.activity;
        w.quietSince = waiting === 0 ? null : now;
        continue;
      }
      w.quietSince ??= now;
      if (w.probing || now - w.quietSince < this.stallMs || this.hooks.ejected(w.id)) continue;
      void this.suspect(w, waiting);
    }
  }

  private async suspect(w: Watched, waiting: number): Promise<void> {
    w.probing = true;
    const before = w.activity;
    let healthy: boolean;
    try {
      healthy = await this.hooks.probe(w.id);
    } catch {
      healthy = false;
    } finally {
      w.probing = false;
    }
    if (this.closed || this.workers.get(w.id) !== w) return;
    if (healthy) {
      w.probes.healthy++;
      // Slow, not stuck: a fresh quiet period before the next probe.
      if (w.quietSince !== null) w.quietSince = this.clock.now();
      return;
    }
    w.probes.unhealthy++;
    // It answered something while the probe waited: not stuck after all.
    if (w.activity !== before || w.quietSince === null) return;
    const quietMs = this.clock.now() - w.quietSince;
    if (!this.hooks.eject(w.id, quietMs, waiting)) {
      w.quietSince = this.clock.now();
      return;
    }
    const reason = `stalled: no response progress for ${Math.round(quietMs)} ms and no answer to its health probe`;
    let aborted = 0;
    for (const a of [...w.inFlight]) {
      if (!a.controller || a.controller.aborted) continue;
      a.controller.abort(new StalledWorkerError(reason));
      aborted++;
    }
    w.aborted += aborted;
    w.quietSince = null;
    if (aborted > 0) this.hooks.log(`worker ${w.id} ${reason}: ${aborted} request(s) on it aborted (those that had sent nothing to their client are placed again)`);
  }
}
