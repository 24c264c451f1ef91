// Session affinity: which worker a session's turns go to. The first dispatch
// of a session binds it to the chosen worker; the binding lives while turns
// keep coming (an idle TTL, counted from the last dispatch) and ends early when
// a dispatch to its worker fails or the worker leaves. Later turns offer the
// bound worker to selection as a soft target (see affinity-placement.ts for
// when it is honoured).
//
// Replicas share bindings (server/nats): when two replicas bind the same
// session to different workers at about the same time, every replica keeps the
// binding made first (`since`, then the origin's id as a tie-break), so they
// all converge on one worker without talking it over.
import type { WorkerKey } from '../bindings/workers.js';

export interface SessionBinding {
  readonly worker: WorkerKey;
  /** When the binding was made, on the route's clock (wall milliseconds on a real clock). */
  readonly since: number;
  /** The router that made it (its replica id). */
  readonly origin: string;
}

export interface SessionBindingsOptions {
  /** Idle time after which a binding is forgotten (ms); must be > 0. */
  ttlMs: number;
  /** Most sessions remembered; the least recently used go first. Default 1,000,000. */
  maxSessions?: number;
  /** This router's id, stamped on the bindings it makes. Default "local". */
  origin?: string;
}

interface Entry {
  binding: SessionBinding;
  lastUsed: number;
}

/** Whether binding a was made before b: the one every replica keeps. */
export function madeFirst(a: SessionBinding, b: SessionBinding): boolean {
  return a.since < b.since || (a.since === b.since && a.origin < b.origin);
}

export class SessionBindings {
  readonly ttlMs: number;
  private readonly maxSessions: number;
  /** Stamped on bindings made here; the replica layer sets it to the replica id. */
  origin: string;
  /** Map order is least recently used first: a touched entry is moved to the end. */
  private readonly entries = new Map<string, Entry>();

  constructor(options: SessionBindingsOptions) {
    if (!(options.ttlMs > 0) || !Number.isFinite(options.ttlMs)) throw new RangeError(`session affinity ttlMs must be a finite number > 0, got ${options.ttlMs}`);
    const max = options.maxSessions ?? 1_000_000;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxSessions must be a positive integer, got ${max}`);
    this.ttlMs = options.ttlMs;
    this.maxSessions = max;
    this.origin = options.origin ?? 'local';
  }

  get size(): number {
    return this.entries.size;
  }

  /** The session's live binding, if any (an expired one is dropped here). */
  lookup(session: string, now: number): SessionBinding | undefined {
    const entry = this.entries.get(session);
    if (!entry) return undefined;
    if (now - entry.lastUsed > this.ttlMs) {
      this.entries.delete(session);
      return undefined;
    }
    return entry.binding;
  }

  /**
   * A turn of the session was dispatched to `worker`: keeps the binding alive,
   * or makes a new one. Returns the binding when it is new or moved (for the
   * replicas to hear of it), null when it only got touched.
   */
  bind(session: string, worker: WorkerKey, now: number): SessionBinding | null {
    const current = this.lookup(session, now);
    if (current && sameWorker(current.worker, worker)) {
      this.touch(session, current, now);
      return null;
    }
    const binding: SessionBinding = { worker: { id: worker.id, rank: worker.rank }, since: now, origin: this.origin };
    this.touch(session, binding, now);
    return binding;
  }

  /**
   * A peer's binding for the session. The first live binding wins: it
   * replaces ours only when ours is gone or was made later. A binding to the
   * worker we already have keeps ours alive. Returns whether ours changed.
   */
  adopt(session: string, peer: SessionBinding, now: number): boolean {
    const current = this.lookup(session, now);
    if (current && sameWorker(current.worker, peer.worker)) {
      this.touch(session, madeFirst(peer, current) ? peer : current, now);
      return false;
    }
    if (current && madeFirst(current, peer)) return false;
    this.touch(session, { worker: { id: peer.worker.id, rank: peer.worker.rank }, since: peer.since, origin: peer.origin }, now);
    return true;
  }

  /** A dispatch to the bound worker failed: forget the binding if it still points there. */
  invalidate(session: string, worker: WorkerKey): boolean {
    const entry = this.entries.get(session);
    if (!entry || !sameWorker(entry.binding.worker, worker)) return false;
    this.entries.delete(session);
    return true;
  }

  /** The worker left: forget every binding to any of its ranks. Returns how many. */
  dropWorker(id: string): number {
    let dropped = 0;
    for (const [session, entry] of this.entries) {
      if (entry.binding.worker.id !== id) continue;
      this.entries.delete(session);
      dropped++;
    }
    return dropped;
  }

  /** Drops bindings idle past the TTL; returns how many. */
  sweep(now: number): number {
    let dropped = 0;
    // Least recently used first: stop at the first live one.
    for (const [session, entry] of this.entries) {
      if (now - entry.lastUsed <= this.ttlMs) break;
      this.entries.delete(session);
      dropped++;
    }
    return dropped;
  }

  /** Live bindings (for the admin view and tests). */
  *list(now: number): Generator<[session: string, binding: SessionBinding]> {
    for (const [session, entry] of this.entries) if (now - entry.lastUsed <= this.ttlMs) yield [session, entry.binding];
  }

  private touch(session: string, binding: SessionBinding, now: number): void {
    this.entries.delete(session);
    this.entries.set(session, { binding, lastUsed: now });
    if (this.entries.size > this.maxSessions) this.entries.delete(this.entries.keys().next().value!);
  }
}

function sameWorker(a: WorkerKey, b: WorkerKey): boolean {
  return a.id === b.id && a.rank === b.rank;
}
