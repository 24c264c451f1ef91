// GET /health: the process is up. GET /ready: the router can route with
// cache awareness: it knows at least one worker, and every worker that
// publishes KV events over ZeroMQ has its subscription connected.
import type { FastifyInstance } from 'fastify';
import type { RouterRuntime } from '../runtime.js';

export function registerHealthRoutes(app: FastifyInstance, rt: RouterRuntime): void {
  app.get('/health', async () => ({ status: 'ok' }));

  app.get('/ready', async (_request, reply) => {
    const workers = rt.registry.list();
    const waiting = workers.filter((w) => w.kv && !w.kv.connected()).map((w) => w.id);
    const idle = [...rt.models.values()].filter((m) => m.route.partition.liveWorkers() === 0).map((m) => m.name);
    const ready = !rt.shuttingDown && workers.length > 0 && waiting.length === 0;
    reply.code(ready ? 200 : 503);
    return {
      ready,
      shutting_down: rt.shuttingDown,
      workers: workers.length,
      waiting_for_kv_events: waiting,
      models_without_workers: idle,
    };
  });
}
