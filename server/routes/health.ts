// GET /health: the process is up. GET /ready: the router can take traffic:
// every model has a worker that serves it (registered, not draining, not
// ejected), and, until the router first reports ready, every KV-event feed
// has connected, so a starting router does not route blind to caches it is
// about to learn. After that a lost feed never takes readiness away: the
// worker still serves, only without cache awareness, and every replica loses
// the same feed at once, so failing readiness would turn one worker's
// degraded routing into an outage of them all. The body has every worker's
// state (draining, ejected and why, its failure streaks, its KV feed).
import type { FastifyInstance } from 'fastify';
import type { RouterRuntime } from '../runtime.js';
import { healthBody } from '../workers/ejection-view.js';
import type { WorkerHandle } from '../workers/registry.js';

export function registerHealthRoutes(app: FastifyInstance, rt: RouterRuntime): void {
  app.get('/health', async () => ({ status: 'ok' }));

  let started = false;
  app.get('/ready', async (_request, reply) => {
    const workers = rt.registry.list();
    const waiting = workers.filter((w) => w.kv && !w.kv.connected()).map((w) => w.id);
    const unserved = [...rt.models.values()].filter((m) => !workers.some((w) => w.model === m && serves(w))).map((m) => m.name);
    const ready = !rt.shuttingDown && unserved.length === 0 && (started || waiting.length === 0);
    started ||= ready;
    reply.code(ready ? 200 : 503);
    return {
      ready,
      shutting_down: rt.shuttingDown,
      waiting_for_kv_events: waiting,
      models_without_workers: unserved,
      workers: workers.map(workerState),
    };
  });
}

function serves(w: WorkerHandle): boolean {
  return !w.draining && w.health().ejection === null;
}

function workerState(w: WorkerHandle) {
  return {
    id: w.id,
    model: w.model.name,
    serving: serves(w),
    draining: w.draining,
    ...healthBody(w.health()),
    kv_events: { source: w.config.kvEvents.source, connected: w.kv ? w.kv.connected() : null },
  };
}
