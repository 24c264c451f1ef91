// Shares one model's session bindings between router replicas, so a
// conversation's turns reach the same worker whichever replica receives them.
// A binding goes out when it is made or moves, and an invalidation when a
// dispatch to the bound worker fails. Conflicts (two replicas binding the same
// session at once) resolve the same way everywhere: the binding made first
// wins (SessionBindings.adopt). A replica that receives a later binding than
// its own answers with its own, so the late one converges too. Bindings are
// advisory: a lost message costs at most a turn routed by cost alone.
import type { WorkerKey } from '../../bindings/workers.js';
import type { ModelRouter } from '../../router/model-router.js';
import type { SessionBinding, SessionBindings } from '../../router/session-bindings.js';
import type { SyncMessage } from './sync-codec.js';

export interface SessionSyncCounters {
  /** Peer bindings taken over. */
  adopted: number;
  /** Peer bindings refused because ours was made first (ours was sent back). */
  refused: number;
  invalidated: number;
}

export class SessionSync {
  readonly counters: SessionSyncCounters = { adopted: 0, refused: 0, invalidated: 0 };
  private readonly sessions: SessionBindings;

  constructor(
    route: ModelRouter,
    private readonly replica: string,
    private readonly publish: (message: SyncMessage) => void,
    private readonly now: () => number,
  ) {
    if (!route.sessions) throw new Error(`model ${route.model} has no session affinity to share`);
    this.sessions = route.sessions;
    this.sessions.origin = replica;
  }

  // ---- this replica's bindings (RouteListener) ----

  sessionBound(session: string, binding: SessionBinding): void {
    this.publish({ kind: 'bind', replica: this.replica, session, worker: binding.worker, since: binding.since, origin: binding.origin });
  }

  sessionInvalidated(session: string, worker: WorkerKey): void {
    this.publish({ kind: 'unbind', replica: this.replica, session, worker });
  }

  // ---- peers ----

  receive(message: SyncMessage): void {
    if (message.replica === this.replica) return;
    const now = this.now();
    if (message.kind === 'unbind') {
      if (this.sessions.invalidate(message.session, message.worker)) this.counters.invalidated++;
      return;
    }
    if (message.kind !== 'bind') return;
    const peer: SessionBinding = { worker: message.worker, since: message.since, origin: message.origin };
    if (this.sessions.adopt(message.session, peer, now)) {
      this.counters.adopted++;
      return;
    }
    const ours = this.sessions.lookup(message.session, now);
    if (ours && (ours.worker.id !== peer.worker.id || ours.worker.rank !== peer.worker.rank)) {
      this.counters.refused++;
      this.sessionBound(message.session, ours);
    }
  }
}
