// A router replica's side of the shared state: one NATS link; per model, the
// ledger and session-binding sync on <prefix>.sync.<model>; KV sources for
// workers whose events come through the relay's JetStream stream; and the
// replica metrics. Built by createRuntime when the config names a NATS server.
import { hostname } from 'node:os';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ModelRouter } from '../../router/model-router.js';
import type { RouteListener } from '../../router/affinity-placement.js';
import type { NatsConfig, WorkerConfig } from '../config/schema.js';
import type { KvSource, Logger } from '../workers/kv-sources.js';
import type { ModelRuntime } from '../workers/model-runtime.js';
import { NatsKvSource } from './kv-stream.js';
import { LedgerSync } from './ledger-sync.js';
import { DEFAULT_MAX_PAYLOAD, frameBudget, NatsLink } from './link.js';
import { SessionSync } from './session-sync.js';
import { NatsNames } from './subjects.js';
import { encodeSyncFrames, FRAME_OVERHEAD_BYTES, readSyncMessage, unpackSyncFrame, type SyncMessage } from './sync-codec.js';

/** The replica id when the config sets none: host name and process id, as a subject-safe token. */
export function defaultReplicaId(): string {
  return `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_-]/g, '-');
}

/** How long ledger ops wait to share a frame; small next to the sync interval. */
const FRAME_MS = 50;

interface ModelSync {
  route: ModelRouter;
  ledger: LedgerSync | null;
  sessions: SessionSync | null;
  /** Sends the queued messages as one frame now. */
  flush(): void;
}

interface SyncCounters {
  /** Sync messages sent; dropped because NATS was down; failed: the client or server refused them. */
  sent: number;
  dropped: number;
  failed: number;
  received: number;
  invalid: number;
}

export class Replication {
  readonly replicaId: string;
  readonly link: NatsLink;
  readonly names: NatsNames;
  private readonly syncs: ModelSync[] = [];
  private readonly counters: SyncCounters = { sent: 0, dropped: 0, failed: 0, received: 0, invalid: 0 };
  private timer: NodeJS.Timeout | null = null;
  private warnedPublishFailure = false;

  constructor(
    private readonly config: NatsConfig,
    models: ReadonlyMap<string, ModelRuntime>,
    private readonly warn: Logger,
  ) {
    this.replicaId = config.replicaId ?? defaultReplicaId();
    this.names = new NatsNames(config.subjectPrefix);
    this.link = new NatsLink({ url: config.url, name: `kvrouter ${this.replicaId}`, warn });
    for (const model of models.values()) this.attach(model.route);
    this.link.onUp(() => {
      // Back (or here for the first time): tell the peers what we hold now.
      for (const s of this.syncs) s.ledger?.publishSnapshot();
    });
  }

  /** Connects in the background and starts the sync interval. */
  start(): void {
    this.link.start();
    this.timer = setInterval(() => {
      for (const s of this.syncs) s.ledger?.tick();
    }, this.config.syncIntervalMs);
    this.timer.unref();
  }

  /** The KV source of a worker with `kv_events.source: nats`. */
  kvSource(worker: WorkerConfig, route: ModelRouter, warn: Logger): KvSource {
    return new NatsKvSource(worker, route, warn, { link: this.link, names: this.names, retention: this.config.kvStream });
  }

  /** Says goodbye (peers drop our bookings at once) and closes the link. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    for (const s of this.syncs) {
      s.route.observe(null);
      s.ledger?.detach();
      s.ledger?.publishSnapshot(true);
      s.flush();
    }
    await this.link.close();
  }

  registerMetrics(registry: Registry): void {
    const registers = [registry];
    const link = this.link;
    const syncs = this.syncs;
    const replica = this.replicaId;
    const counters = this.counters;
    new Gauge({
      name: 'kvrouter_replica_info',
      help: "This router's replica id (value 1)",
      labelNames: ['replica'],
      registers,
      collect() {
        this.reset();
        this.labels(replica).set(1);
      },
    });
    new Gauge({
      name: 'kvrouter_nats_connected',
      help: '1 while the NATS link is up; 0 means this replica routes on its own state only',
      registers,
      collect() {
        this.set(link.up ? 1 : 0);
      },
    });
    new Counter({
      name: 'kvrouter_nats_disconnects_total',
      help: 'Times the NATS connection was lost',
      registers,
      collect() {
        this.reset();
        this.inc(link.disconnects);
      },
    });
    new Counter({
      name: 'kvrouter_replica_sync_messages_total',
      help: 'Replica sync messages (ops, snapshot parts, bindings): sent, dropped (NATS down), failed (the publish was refused, e.g. larger than max_payload), received, invalid',
      labelNames: ['direction'],
      registers,
      collect() {
        this.reset();
        for (const [direction, n] of Object.entries(counters)) this.labels(direction).inc(n);
      },
    });
    new Gauge({
      name: 'kvrouter_replica_peers',
      help: 'Peer replicas whose last complete snapshot is within the peer timeout, and the bookings they hold in this ledger',
      labelNames: ['model', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const s of syncs) {
          if (!s.ledger) continue;
          const peers = s.ledger.peerStats();
          this.labels(s.route.model, 'replicas').set(peers.length);
          this.labels(s.route.model, 'bookings').set(peers.reduce((n, p) => n + p.bookings, 0));
        }
      },
    });
    new Counter({
      name: 'kvrouter_replica_sync_events_total',
      help: 'What replica sync did: peer_add, peer_free, repair (a snapshot fixed a lost op), unknown_worker, expired_peer, partial_snapshot (dropped unapplied: parts missing), session_adopted, session_refused, session_invalidated',
      labelNames: ['model', 'event'],
      registers,
      collect() {
        this.reset();
        for (const s of syncs) {
          const m = s.route.model;
          const l = s.ledger?.counters;
          if (l) {
            this.labels(m, 'peer_add').inc(l.peerAdds);
            this.labels(m, 'peer_free').inc(l.peerFrees);
            this.labels(m, 'repair').inc(l.repairs);
            this.labels(m, 'unknown_worker').inc(l.unknownWorkers);
            this.labels(m, 'expired_peer').inc(l.expiredPeers);
            this.labels(m, 'partial_snapshot').inc(l.partialSnapshots);
          }
          const b = s.sessions?.counters;
          if (b) {
            this.labels(m, 'session_adopted').inc(b.adopted);
            this.labels(m, 'session_refused').inc(b.refused);
            this.labels(m, 'session_invalidated').inc(b.invalidated);
          }
        }
      },
    });
  }

  private attach(route: ModelRouter): void {
    const subject = this.names.sync(route.model);
    const counters = this.counters;
    let queued: SyncMessage[] = [];
    const flush = () => {
      if (queued.length === 0) return;
      const messages = queued;
      queued = [];
      for (const frame of encodeSyncFrames(messages, this.frameBytes())) this.send(subject, frame.bytes, frame.messages);
    };
    const publish = (message: SyncMessage) => {
      // Nothing is queued while the link is down: snapshots rebuild the peers' view once it is back.
      if (!this.link.up) {
        counters.dropped++;
        return;
      }
      // Ledger ops leave in frames, in order, every FRAME_MS: a socket write per op costs more
      // than the op. A binding goes at once (with the ops before it): the session's next turn
      // may reach a peer within milliseconds, and bindings come once per session, not per request.
      if (queued.length === 0 && message.kind !== 'bind') setTimeout(flush, FRAME_MS).unref();
      queued.push(message);
      if (message.kind === 'bind') flush();
    };
    const ledger = this.config.ledgerSync
      ? new LedgerSync(route, {
          replica: this.replicaId,
          publish,
          maxMessageBytes: () => this.frameBytes() - FRAME_OVERHEAD_BYTES,
          peerTimeoutMs: this.config.peerTimeoutMs,
          log: this.warn,
        })
      : null;
    const sessions = route.sessions ? new SessionSync(route, this.replicaId, publish, () => Date.now()) : null;
    if (!ledger && !sessions) return;
    const listener: RouteListener = {};
    if (ledger) {
      listener.booked = (request, admission) => ledger.booked(request, admission);
      listener.firstToken = (id) => ledger.firstToken(id);
      listener.released = (id) => ledger.released(id);
    }
    if (sessions) {
      listener.sessionBound = (session, binding) => sessions.sessionBound(session, binding);
      listener.sessionInvalidated = (session, worker) => sessions.sessionInvalidated(session, worker);
    }
    route.observe(listener);
    this.syncs.push({ route, ledger, sessions, flush });
    this.link.subscribe(subject, (data) => {
      let frame: unknown[];
      try {
        frame = unpackSyncFrame(data);
      } catch (error) {
        this.invalid(error, subject);
        return;
      }
      for (const [i, raw] of frame.entries()) {
        let message: SyncMessage;
        try {
          message = readSyncMessage(raw, `[${i}]`);
        } catch (error) {
          this.invalid(error, subject);
          continue;
        }
        counters.received++;
        ledger?.receive(message);
        sessions?.receive(message);
      }
    });
  }

  /** The frame budget under the connected server's max_payload. */
  private frameBytes(): number {
    return frameBudget(this.link.maxPayload ?? DEFAULT_MAX_PAYLOAD);
  }

  private send(subject: string, bytes: Uint8Array, messages: number): void {
    try {
      if (this.link.publish(subject, bytes)) this.counters.sent += messages;
      else this.counters.dropped += messages;
    } catch (error) {
      this.counters.failed += messages;
      if (this.warnedPublishFailure) return;
      this.warnedPublishFailure = true;
      this.warn(
        `replica sync could not publish ${messages} message(s) in ${bytes.length} bytes on ${subject} (server max_payload ${this.link.maxPayload ?? 'unknown'}): ${(error as Error).message}; ` +
          'peers miss what they carried; further failures are only counted (kvrouter_replica_sync_messages_total{direction="failed"})',
      );
    }
  }

  private invalid(error: unknown, subject: string): void {
    if (this.counters.invalid++ === 0) this.warn(`${(error as Error).message} (on ${subject}; further ones are only counted)`);
  }
}
