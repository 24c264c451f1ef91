// The admin API, behind a bearer token. Without a configured token it is not
// mounted at all (404); a missing or wrong token is a 401.
//
//   GET    /admin/workers                  every worker: config, state (draining, ejection), load, KV-event counters
//   POST   /admin/workers                  add a worker (body: one `workers` entry of the config)
//   POST   /admin/workers/:id/drain        {"draining": true|false} (default true): no new requests
//   DELETE /admin/workers/:id              remove (requests in flight finish)
//   GET    /admin/busy-thresholds          per model and policy class
//   PUT    /admin/busy-thresholds          {"model"?, "policy_class", "busy": {...} | null}
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RouterError } from '../../router/errors.js';
import { ConfigError, Fields } from '../config/fields.js';
import { bearerCheck } from '../http/auth.js';
import { readBusyThresholds, validateWorker } from '../config/schema.js';
import { parseJsonBody } from '../request/fields.js';
import type { RouterRuntime } from '../runtime.js';
import type { BusyThresholds } from '../../router/scheduler/contracts.js';
import { healthBody } from '../workers/ejection-view.js';
import type { WorkerHandle } from '../workers/registry.js';

/** A 400 naming the field, from a config validation error. */
function asBadRequest<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof ConfigError) throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message, { param: error.path });
    throw error;
  }
}

function describeWorker(w: WorkerHandle) {
  const fleet = w.model.route.fleet;
  const c = w.config;
  return {
    id: c.id,
    model: c.model,
    url: c.url,
    data_parallel_size: c.dataParallelSize,
    total_blocks: c.totalBlocks,
    max_batched_tokens: c.maxBatchedTokens,
    taints: c.taints,
    kv_events: c.kvEvents.source === 'zmq' ? { source: 'zmq', endpoint: c.kvEvents.endpoint, replay_endpoint: c.kvEvents.replayEndpoint, topic: c.kvEvents.topic } : { source: c.kvEvents.source },
    kv_connected: w.kv ? w.kv.connected() : null,
    draining: w.draining,
    ...healthBody(w.health()),
    load: fleet.load().filter((l) => l.worker === c.id || l.worker.startsWith(`${c.id}#`)),
    kv_event_counts: fleet.eventCounts(c.id) ?? null,
    kv_stream: w.kv?.counters() ?? null,
  };
}

export function registerAdminRoutes(app: FastifyInstance, rt: RouterRuntime, token: string): void {
  const check = bearerCheck(token);
  const authorize = async (request: FastifyRequest) => check(request.headers.authorization);
  const body = (request: FastifyRequest) => parseJsonBody((request.body as Buffer | undefined) ?? '{}');

  app.register(async (admin) => {
    admin.addHook('onRequest', authorize);

    admin.get('/admin/workers', async () => ({ workers: rt.registry.list().map(describeWorker) }));

    admin.post('/admin/workers', async (request, reply) => {
      const config = asBadRequest(() => validateWorker(body(request), rt.config.models));
      const handle = rt.registry.add(config);
      reply.code(201);
      return describeWorker(handle);
    });

    admin.post<{ Params: { id: string } }>('/admin/workers/:id/drain', async (request) => {
      const f = asBadRequest(() => new Fields(request.body ? body(request) : {}, ''));
      const draining = asBadRequest(() => {
        const value = f.boolean('draining', true);
        f.done();
        return value;
      });
      rt.registry.setDraining(request.params.id, draining);
      return describeWorker(rt.registry.get(request.params.id)!);
    });

    admin.delete<{ Params: { id: string } }>('/admin/workers/:id', async (request) => {
      await rt.registry.remove(request.params.id);
      return { removed: request.params.id };
    });

    admin.get('/admin/busy-thresholds', async () => ({
      models: Object.fromEntries([...rt.models.values()].map((m) => [m.name, toSnake(m.route.busyThresholds())])),
    }));

    admin.put('/admin/busy-thresholds', async (request) => {
      const update = asBadRequest(() => {
        const f = new Fields(body(request), '');
        const names = [...rt.models.keys()];
        const model = f.string('model', names.length === 1 ? names[0] : undefined);
        const policyClass = f.string('policy_class');
        const busy = f.has('busy') ? f.object('busy', readBusyThresholds) : null;
        f.done();
        return { model, policyClass, busy };
      });
      const model = rt.models.get(update.model);
      if (!model) throw new RouterError('KVR_ERR_MODEL_NOT_FOUND', `no model "${update.model}"`, { param: 'model' });
      try {
        model.route.setBusyThresholds(update.policyClass, update.busy);
      } catch (error) {
        if (error instanceof RangeError) throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message, { param: 'policy_class' });
        throw error;
      }
      return { model: model.name, thresholds: toSnake(model.route.busyThresholds()) };
    });
  });
}

function toSnake(classes: Record<string, BusyThresholds | null>) {
  return Object.fromEntries(
    Object.entries(classes).map(([name, b]) => [
      name,
      b && { prefill_tokens: b.prefillTokens ?? null, prefill_fraction: b.prefillFraction ?? null, decode_fraction: b.decodeFraction ?? null, ttft_ms: b.ttftMs ?? null },
    ]),
  );
}
