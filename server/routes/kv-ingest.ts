// POST /router/kv-events: KV events from engines that cannot publish on
// ZeroMQ, as JSON (router/kv-ingest-json.ts). Only workers configured with
// `kv_events: {source: http}` accept them; numbered batches are checked for
// gaps like the ZeroMQ stream (a gap clears the worker's cache entries).
import type { FastifyInstance } from 'fastify';
import { RouterError } from '../../router/errors.js';
import { decodeKvIngestJson } from '../../router/kv-ingest-json.js';
import { KvDecodeError } from '../../router/kv-wire.js';
import { bearerCheck } from '../http/auth.js';
import { parseJsonBody } from '../request/fields.js';
import type { RouterRuntime } from '../runtime.js';
import { HttpKvSource } from '../workers/kv-sources.js';

export function registerKvIngestRoute(app: FastifyInstance, rt: RouterRuntime): void {
  const check = rt.config.kvIngestToken === null ? null : bearerCheck(rt.config.kvIngestToken);
  app.post('/router/kv-events', async (request) => {
    check?.(request.headers.authorization);
    const body = parseJsonBody(request.body as Buffer);
    let ingest;
    try {
      ingest = decodeKvIngestJson(body, { defaultTs: Date.now() / 1000 });
    } catch (error) {
      if (!(error instanceof KvDecodeError)) throw error;
      const sender = typeof body.worker_id === 'string' ? rt.registry.get(body.worker_id)?.kv : undefined;
      if (sender instanceof HttpKvSource) sender.countDecodeError();
      throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message, { param: error.field });
    }
    const handle = rt.registry.get(ingest.worker.id);
    if (!handle) throw new RouterError('KVR_ERR_WORKER_NOT_FOUND', `no worker "${ingest.worker.id}"`, { param: 'worker_id' });
    if (!(handle.kv instanceof HttpKvSource)) {
      throw new RouterError('KVR_ERR_INVALID_REQUEST', `worker "${ingest.worker.id}" is not configured for HTTP KV events (kv_events.source: ${handle.config.kvEvents.source})`, {
        param: 'worker_id',
      });
    }
    try {
      handle.kv.offer(ingest.worker.rank, ingest.seq, ingest.batch);
    } catch (error) {
      if (error instanceof RangeError) throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message, { param: 'dp_rank' });
      throw error;
    }
    return { accepted: ingest.batch.events.length };
  });
}
