// POST /router/kv-events: KV events from engines that cannot publish on
// ZeroMQ, as JSON (router/kv-ingest-json.ts). Only workers configured with
// `kv_events: {source: http}` accept them; numbered batches are checked for
// gaps like the ZeroMQ stream (a gap clears the worker's cache entries).
//
// Whoever can post events decides where prompts go, so: without
// kv_ingest_token the endpoint answers only on a loopback address, and every
// call is capped in block hashes, every worker in the blocks the index holds
// for it.
import type { FastifyInstance } from 'fastify';
import { RouterError } from '../../router/errors.js';
import { decodeKvIngestJson } from '../../router/kv-ingest-json.js';
import { KvDecodeError } from '../../router/kv-wire.js';
import { isLoopback } from '../config/schema.js';
import { bearerCheck } from '../http/auth.js';
import { parseJsonBody } from '../request/fields.js';
import type { RouterRuntime } from '../runtime.js';
import { HttpKvSource } from '../workers/kv-sources.js';

/** Block hashes a body lists (stored and removed), counted before decoding. */
function listedBlocks(body: Record<string, unknown>): number {
  if (!Array.isArray(body.events)) return 0;
  let blocks = 0;
  for (const event of body.events) {
    const hashes = (event as { block_hashes?: unknown } | null)?.block_hashes;
    if (Array.isArray(hashes)) blocks += hashes.length;
  }
  return blocks;
}

function overLimit(limit: 'blocks_per_call' | 'blocks_per_worker', max: number, message: string): RouterError {
  return new RouterError('KVR_ERR_KV_EVENTS_LIMIT', message, { param: 'events', limit, max });
}

export function registerKvIngestRoute(app: FastifyInstance, rt: RouterRuntime): void {
  const token = rt.config.kvIngestToken;
  const check = token === null ? null : bearerCheck(token);
  const exposed = token === null && !isLoopback(rt.config.host);
  const { kvIngestMaxBlocksPerCall: perCall, kvIngestMaxBlocksPerWorker: perWorker } = rt.limits;
  // Blocks the index holds for each HTTP-fed worker, measured as the index's growth in its calls:
  // only its own calls change what the index holds for it. A worker added again gets a new source.
  const indexed = new WeakMap<HttpKvSource, number>();

  app.post('/router/kv-events', async (request) => {
    if (exposed) throw new RouterError('KVR_ERR_INGEST_FORBIDDEN', `the router listens on ${rt.config.host}, beyond loopback, and sets no kv_ingest_token: KV events over HTTP are refused`);
    check?.(request.headers.authorization);
    const body = parseJsonBody(request.body as Buffer);
    const listed = listedBlocks(body);
    if (listed > perCall) throw overLimit('blocks_per_call', perCall, `the body lists ${listed} block hashes, over limits.kv_ingest_max_blocks_per_call (${perCall}): send smaller batches`);
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
    const source = handle.kv;
    if (!(source instanceof HttpKvSource)) {
      throw new RouterError('KVR_ERR_INVALID_REQUEST', `worker "${ingest.worker.id}" is not configured for HTTP KV events (kv_events.source: ${handle.config.kvEvents.source})`, {
        param: 'worker_id',
      });
    }
    const held = indexed.get(source) ?? 0;
    let stored = 0;
    for (const event of ingest.batch.events) if (event.type === 'stored') stored += event.blockHashes.length;
    if (held + stored > perWorker) {
      throw overLimit('blocks_per_worker', perWorker, `worker "${ingest.worker.id}" holds ${held} indexed blocks; ${stored} more would pass limits.kv_ingest_max_blocks_per_worker (${perWorker})`);
    }
    const fleet = handle.model.route.fleet;
    const before = fleet.indexStats().blocks;
    try {
      source.offer(ingest.worker.rank, ingest.seq, ingest.batch);
    } catch (error) {
      if (error instanceof RangeError) {
        rt.diagnostics?.refusedRank(handle.model, ingest.worker.id, ingest.worker.rank);
        throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message, { param: 'dp_rank' });
      }
      throw error;
    } finally {
      indexed.set(source, Math.max(0, held + fleet.indexStats().blocks - before));
    }
    return { accepted: ingest.batch.events.length };
  });
}
