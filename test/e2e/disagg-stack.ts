// A disaggregated fleet for end-to-end tests: mock workers of the given roles
// (real HTTP, KV events over real ZeroMQ, the KV handoff between them over
// HTTP), and a router whose config declares the model's engine, its
// disaggregation settings and each worker's role.
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { startMockServer, type MockServer } from '../../sim/mocker/http-server.js';
import type { HandoffOptions, MockRole } from '../../sim/mocker/kv-handoff.js';
import type { EngineKind } from '../../router/disagg/roles.js';
import { configFromDocument } from '../../server/config/load.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import type { ModelRuntime } from '../../server/workers/model-runtime.js';

export const MODEL = 'pd-model';
export const BLOCK = 16;

export interface DisaggStack {
  url: string;
  router: RunningRouter;
  model: ModelRuntime;
  /** By worker id: p0, p1, ... for prefill, d0, d1, ... for decode, b0, ... for both. */
  servers: Map<string, MockServer>;
  /** The router's config document (another router in front of the same fleet starts from it). */
  document: Record<string, unknown>;
  close(): Promise<void>;
}

export interface DisaggStackOptions {
  engine: EngineKind;
  roles: MockRole[];
  minRemotePrefillTokens?: number;
  handoff?: Omit<HandoffOptions, 'role' | 'protocol'>;
  limits?: Record<string, unknown>;
  /** Edits the router's config document before validation (e.g. adds `nats`). */
  edit?: (document: Record<string, unknown>) => void;
}

export async function startDisaggStack(o: DisaggStackOptions): Promise<DisaggStack> {
  const servers = new Map<string, MockServer>();
  const publishers: ZmqKvPublisher[] = [];
  const counts: Record<MockRole, number> = { prefill: 0, decode: 0, both: 0 };
  const workers: Record<string, unknown>[] = [];
  const closeAll = async () => {
    await Promise.all([...servers.values()].map((s) => s.close()));
    await Promise.all(publishers.map((p) => p.close()));
  };
  try {
    for (const role of o.roles) {
      const id = `${role[0] === 'b' ? 'b' : role[0]}${counts[role]++}`;
      const publisher = new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: 'kv-events' });
      publishers.push(publisher);
      await publisher.start();
      const server = await startMockServer({
        host: '127.0.0.1',
        modelName: MODEL,
        handoff: { ...o.handoff, role, protocol: o.engine },
        engine: { blockSize: BLOCK, numBlocks: 4096, speedup: 20, onEvents: (batch) => void publisher.publish(batch) },
      });
      servers.set(id, server);
      workers.push({
        id,
        url: server.url,
        model: MODEL,
        role,
        kv_events: { source: 'zmq', endpoint: publisher.endpoint, replay_endpoint: publisher.replayEndpoint, topic: 'kv-events' },
        // The mock's bootstrap server is its own HTTP port.
        ...(o.engine === 'sglang' && role !== 'decode' ? { bootstrap_port: server.port } : {}),
      });
    }
  } catch (error) {
    await closeAll();
    throw error;
  }
  const document: Record<string, unknown> = {
    host: '127.0.0.1',
    port: 0,
    log_level: 'silent',
    tokenizer: 'bytes',
    limits: o.limits ?? {},
    models: [{ name: MODEL, block_size: BLOCK, engine: o.engine, disaggregation: { min_remote_prefill_tokens: o.minRemotePrefillTokens ?? 256 } }],
    workers,
  };
  o.edit?.(document);
  let router: RunningRouter;
  try {
    router = await startRouter(configFromDocument(document));
  } catch (error) {
    await closeAll();
    throw error;
  }
  return {
    url: router.url,
    router,
    model: router.runtime.models.get(MODEL)!,
    servers,
    document,
    close: async () => {
      await router.close();
      await closeAll();
    },
  };
}

/** Nothing of any request is booked: no ledger entry on either side, nothing in flight or queued. */
export function settledBoth(model: ModelRuntime): boolean {
  const stats = model.route.scheduler.stats();
  const queued = Object.values(stats.queued).reduce((n, q) => n + q.requests, 0);
  return model.route.fleet.bookedRequests === 0 && stats.inFlight === 0 && queued === 0 && model.disagg!.liveDecodes === 0;
}

/** A prompt of `n` random token ids (router and workers read ids as given), distinct per call. */
export const prompt = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(Math.random() * 50_000));

export const completion = (ids: number[], extra: Record<string, unknown> = {}) => ({ model: MODEL, prompt: ids, max_tokens: 6, ...extra });

/** A mock worker's engine counters. */
export async function stats(s: DisaggStack, id: string): Promise<Record<string, number>> {
  return (await (await fetch(`${s.servers.get(id)!.url}/mock/stats`)).json()) as Record<string, number>;
}
