// Router replicas in the test process over a private nats-server: embedded
// mock workers publishing KV events over ZeroMQ, a relay per worker into
// JetStream, and routers (each with its own runtime and ModelRouters) that read
// the relayed events and share ledger and session bindings over NATS.
//
// Two models over the same mock workers: MODEL's workers (mock-i) get their
// KV events through the relays (or, with `relays: false`, from each engine's
// ZeroMQ publisher directly); APPROX's workers (approx-i) publish none, so a
// replica knows what went there only from its own routing and its peers'.
import type { Logger } from 'pino';
import { configFromDocument } from '../../server/config/load.js';
import { EMBEDDED_DEFAULTS, startEmbeddedFleet, type EmbeddedFleet } from '../../server/cli/embedded-fleet.js';
import { KvRelay } from '../../server/nats/relay.js';
import { NatsLink } from '../../server/nats/link.js';
import { createLocalNatsServer, type LocalNatsServer } from '../../server/nats/local-server.js';
import { NatsNames } from '../../server/nats/subjects.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import type { ModelRuntime } from '../../server/workers/model-runtime.js';

export const MODEL = EMBEDDED_DEFAULTS.model;
export const APPROX = 'approx-model';
const SYNC_INTERVAL_MS = 200;
export const PREFIX = 'kvrtest';

export interface Replica {
  id: string;
  url: string;
  router: RunningRouter;
  model(name?: string): ModelRuntime;
}

export interface ReplicaStack {
  nats: LocalNatsServer;
  embedded: EmbeddedFleet;
  relays: KvRelay[];
  replicas: Replica[];
  /** Starts another replica; `logger` receives its log (none by default). */
  startReplica(id: string, logger?: Logger): Promise<Replica>;
  close(): Promise<void>;
}

export interface ReplicaStackOptions {
  workers?: number;
  speedup?: number;
  /** The NATS server's max_payload (its default is 1 MiB). */
  maxPayload?: number;
  /** Relay MODEL's KV events through JetStream (default), or let each replica subscribe to the engines. */
  relays?: boolean;
  /** The replicas started at once. */
  replicas?: string[];
}

export async function startReplicaStack(options: ReplicaStackOptions = {}): Promise<ReplicaStack> {
  const nats = await createLocalNatsServer({ maxPayload: options.maxPayload });
  await nats.start();
  const embedded = await startEmbeddedFleet({ ...EMBEDDED_DEFAULTS, workers: options.workers ?? 3, speedup: options.speedup ?? 2, tokenizer: 'bytes', numBlocks: 4096 });
  const names = new NatsNames(PREFIX);
  const relayed = options.relays ?? true;
  const relayLink = new NatsLink({ url: nats.url, name: 'test relays', warn: () => {} });
  if (relayed) relayLink.start();
  const relays = (relayed ? embedded.publishers : []).map(
    (publisher, i) =>
      new KvRelay({
        link: relayLink,
        names,
        retention: { maxAgeMs: 600_000, maxBytes: 1 << 26 },
        worker: `mock-${i}`,
        endpoint: publisher.endpoint,
        replayEndpoint: publisher.replayEndpoint ?? undefined,
        topic: 'kv-events',
        warn: () => {},
      }),
  );
  await Promise.all(relays.map((r) => r.start()));
  const base = embedded.document as { models: Record<string, unknown>[]; workers: Record<string, unknown>[] };
  const affinity = { session_affinity: { ttl_ms: 60_000 } };
  const document = (replica: string) => ({
    host: '127.0.0.1',
    port: 0,
    log_level: 'silent',
    nats: { url: nats.url, replica_id: replica, subject_prefix: PREFIX, sync_interval_ms: SYNC_INTERVAL_MS, peer_timeout_ms: 1500 },
    models: [
      { ...base.models[0], ...affinity },
      { ...base.models[0], ...affinity, name: APPROX },
    ],
    workers: [
      ...base.workers.map((w) => (relayed ? { ...w, kv_events: { source: 'nats' } } : w)),
      ...base.workers.map((w, i) => ({ ...w, id: `approx-${i}`, model: APPROX, kv_events: { source: 'none' } })),
    ],
  });
  const replicas: Replica[] = [];
  const startReplica = async (id: string, logger?: Logger): Promise<Replica> => {
    const router = await startRouter(configFromDocument(document(id)), { tokenizers: embedded.tokenizers, logger });
    const replica: Replica = { id, url: router.url, router, model: (name = MODEL) => router.runtime.models.get(name)! };
    replicas.push(replica);
    return replica;
  };
  try {
    for (const id of options.replicas ?? ['a', 'b']) await startReplica(id);
  } catch (error) {
    await Promise.all(replicas.map((r) => r.router.close()));
    await Promise.all(relays.map((r) => r.close()));
    await relayLink.close();
    await embedded.close();
    await nats.close();
    throw error;
  }
  return {
    nats,
    embedded,
    relays,
    replicas,
    startReplica,
    close: async () => {
      await Promise.all(replicas.map((r) => r.router.close()));
      await Promise.all(relays.map((r) => r.close()));
      await relayLink.close();
      await embedded.close();
      await nats.close();
    },
  };
}

/** The ledger's load per worker, as one comparable string. */
export function loadOf(replica: Replica, model = MODEL): string {
  return JSON.stringify(replica.model(model).route.fleet.load());
}
