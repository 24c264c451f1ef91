// The mock engine as an OpenAI-compatible HTTP server on node:http (plain
// node:http because it is also the upstream in proxy benchmarks), and a fleet
// of them in one process, each worker with its own engine on the real clock.
//
//   POST /v1/chat/completions, POST /v1/completions   stream or not
//   GET  /v1/models, GET /health
//   GET  /mock/stats[?rank=r]   a rank's engine counters (EngineStats)
//   POST /reset_prefix_cache    drop the prefix cache of every rank, like vLLM's endpoint
//
// A server may run several data-parallel ranks, each its own engine with its
// own KV cache, as one vLLM or SGLang server with --data-parallel-size does:
// `X-Data-Parallel-Rank` runs a request on that rank, and without it the
// server picks the rank with the fewest requests running and waiting. Each
// rank's event batches carry its rank.
//
// Fault-injection headers are described in fault-injection.ts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RealClock } from '../../router/clock.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import type { MockEngineOptions } from './engine-options.js';
import { MockEngine } from './engine.js';
import { faultsOf } from './fault-injection.js';
import { MockHandoff, type HandoffOptions } from './kv-handoff.js';
import { parseMockRequest, RequestError } from './openai-request.js';
import { LORA_ADMIN_PATHS, updateAdapters } from './lora-admin.js';
import { errorBody } from './openai-response.js';
import { bytePromptTokens, toTokenIds, type PromptKind, type PromptTokens, type PromptWithMedia } from './prompt-tokens.js';
import type { MediaSpan } from '../../router/media-keys.js';
import { sendJson, serveGeneration } from './serve-generation.js';

export interface MockServerOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /** Engine shape and sinks (of every rank); the clock is always a RealClock. */
  engine?: Omit<MockEngineOptions, 'clock' | 'dpRank'>;
  /** Data-parallel ranks behind the server, each an engine with its own cache (default 1). */
  dataParallelSize?: number;
  /** Prompt tokenizer; the default is the byte placeholder of prompt-tokens.ts. */
  promptTokens?: PromptTokens;
  /** Reported by /v1/models and in responses when the request names no model. */
  modelName?: string;
  /**
   * LoRA adapters served under their own model names (vLLM's --lora-modules):
   * a request naming one runs with it, its blocks hashed under the adapter.
   */
  adapters?: readonly string[];
  /** Output length when the request sets neither max_tokens nor max_completion_tokens. */
  defaultMaxTokens?: number;
  /** Largest accepted request body. */
  maxBodyBytes?: number;
  /** Its role in a disaggregated fleet and the protocol it speaks (default: both, vLLM's fields). */
  handoff?: HandoffOptions;
}

export interface MockServer {
  url: string;
  host: string;
  port: number;
  /** Rank 0's engine. */
  engine: MockEngine;
  handoff: MockHandoff;
  /** Every rank's engine, by rank. */
  ranks: MockEngine[];
  server: Server;
  close(): Promise<void>;
}

const GENERATION_PATHS: Record<string, PromptKind> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'completion',
};

function sendError(res: ServerResponse, error: RequestError): void {
  if (res.destroyed) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, error.status, errorBody(error.status, error.message, error.code, error.param));
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new RequestError(`request body exceeds ${limit} bytes`, 413, 'body_too_large'));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The rank a request asks for with X-Data-Parallel-Rank; null when it leaves the choice to the server. */
function requestedRank(req: IncomingMessage, ranks: number): number | null {
  const raw = req.headers['x-data-parallel-rank'];
  if (raw === undefined) return null;
  const text = (Array.isArray(raw) ? raw.join(',') : raw).trim();
  const rank = Number(text);
  if (!/^\d+$/.test(text) || rank >= ranks) {
    throw new RequestError(`X-Data-Parallel-Rank must be a rank in 0..${ranks - 1}, got ${JSON.stringify(text.slice(0, 32))}`, 400, 'invalid_request');
  }
  return rank;
}

/** The engine's own balancer: the rank with the fewest requests running and waiting (the lowest rank on a tie). */
function leastBusy(ranks: readonly MockEngine[]): MockEngine {
  let best = ranks[0]!;
  let load = Infinity;
  for (const engine of ranks) {
    const s = engine.stats();
    if (s.running + s.waiting < load) {
      best = engine;
      load = s.running + s.waiting;
    }
  }
  return best;
}

class MockHandler {
  private serial = 0;

  constructor(
    private readonly ranks: readonly MockEngine[],
    private readonly modelName: string,
    /** Loaded and unloaded at run time (lora-admin.ts). */
    private readonly adapters: Set<string>,
    private readonly promptTokens: PromptTokens,
    private readonly defaultMaxTokens: number,
    private readonly maxBodyBytes: number,
    private readonly handoff: MockHandoff,
  ) {}

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.route(req, res).catch((error: unknown) => {
      sendError(res, error instanceof RequestError ? error : new RequestError(`mock server error: ${String(error)}`, 500, 'internal_error'));
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const kind = GENERATION_PATHS[path];
    const method = req.method ?? 'GET';
    if (kind && method === 'POST') return this.generate(req, res, kind);
    if (path === '/health' && method === 'GET') return sendJson(res, 200, { status: 'ok' });
    if (path === '/v1/models' && method === 'GET') {
      const model = { id: this.modelName, object: 'model', created: 0, owned_by: 'kvrouter-mock' };
      const adapters = [...this.adapters].map((id) => ({ ...model, id, parent: this.modelName }));
      return sendJson(res, 200, { object: 'list', data: [model, ...adapters] });
    }
    if (path === '/mock/stats' && method === 'GET') return sendJson(res, 200, this.statsOf(req));
    if (path === '/reset_prefix_cache' && method === 'POST') {
      // Every rank is asked, as one reset call on an engine resets all its ranks.
      const reset = this.ranks.map((engine) => engine.resetPrefixCache());
      return sendJson(res, 200, { reset: reset.every(Boolean) });
    }
    if (path === '/mock/kv/pull' && method === 'POST') return this.handoff.servePull(await readBody(req, this.maxBodyBytes), res);
    const admin = LORA_ADMIN_PATHS.find((p) => p === path);
    if (admin && method === 'POST') {
      const text = updateAdapters(admin, await readBody(req, this.maxBodyBytes), this.adapters, this.modelName);
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(text);
      return;
    }
    const known = kind !== undefined || admin !== undefined || ['/health', '/v1/models', '/mock/stats', '/reset_prefix_cache', '/mock/kv/pull'].includes(path);
    if (known) throw new RequestError(`method ${method} is not allowed on ${path}`, 405, 'method_not_allowed');
    throw new RequestError(`no route for ${method} ${path}`, 404, 'not_found');
  }

  private statsOf(req: IncomingMessage): object {
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const raw = query.get('rank') ?? '0';
    const rank = Number(raw);
    if (!/^\d+$/.test(raw) || rank >= this.ranks.length) {
      throw new RequestError(`rank must be in 0..${this.ranks.length - 1}, got ${JSON.stringify(raw.slice(0, 32))}`, 400, 'invalid_request', 'rank');
    }
    return this.ranks[rank]!.stats();
  }

  private async generate(req: IncomingMessage, res: ServerResponse, kind: PromptKind): Promise<void> {
    const faults = faultsOf(req.headers);
    const rank = requestedRank(req, this.ranks.length);
    const raw = await readBody(req, this.maxBodyBytes);
    if (faults.headerDelayMs > 0) {
      await sleep(faults.headerDelayMs);
      if (res.destroyed) return;
    }
    if (faults.status !== null) {
      throw new RequestError(`mock failure: status ${faults.status} requested by x-mock-status`, faults.status, 'mock_status');
    }
    const request = parseMockRequest(raw, kind, this.defaultMaxTokens);
    let prompt = request.promptIds;
    let media: readonly MediaSpan[] | undefined;
    if (!prompt) {
      try {
        const out = await this.promptTokens(request.body, kind);
        if (out instanceof Uint32Array || Array.isArray(out)) prompt = toTokenIds(out as Uint32Array | readonly number[]);
        else {
          prompt = toTokenIds((out as PromptWithMedia).ids);
          media = (out as PromptWithMedia).media;
        }
      } catch (error) {
        throw new RequestError(`cannot tokenize the prompt: ${(error as Error).message}`, 400, 'tokenization_failed');
      }
      if (res.destroyed) return;
    }
    if (prompt.length === 0) throw new RequestError('the prompt tokenized to no tokens', 400, 'invalid_request', kind === 'chat' ? 'messages' : 'prompt');
    const part = await this.handoff.part(request.body, () => res.destroyed);
    if (res.destroyed) return;
    if (part.maxTokens !== undefined) request.maxTokens = part.maxTokens;
    const identity = {
      id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-mock-${++this.serial}`,
      created: Math.floor(Date.now() / 1000),
      model: request.model ?? this.modelName,
    };
    try {
      const engine = rank === null ? leastBusy(this.ranks) : this.ranks[rank]!;
      const lora = request.model !== null && this.adapters.has(request.model) ? request.model : null;
      serveGeneration(res, { engine, request, prompt, media, lora, identity, faults, remoteTokens: part.remoteTokens, finished: part.finished });
    } catch (error) {
      // The engine refused the request (too long for its cache, or closed).
      if (error instanceof RangeError) throw new RequestError(error.message, 400, 'context_length_exceeded');
      throw new RequestError((error as Error).message, 503, 'engine_unavailable');
    }
  }
}

/** Starts one mock worker; resolves once it listens. */
export async function startMockServer(options: MockServerOptions = {}): Promise<MockServer> {
  const size = options.dataParallelSize ?? 1;
  if (!Number.isInteger(size) || size < 1 || size > 1024) throw new RangeError(`dataParallelSize must be an integer in 1..1024, got ${size}`);
  const clock = new RealClock();
  const ranks = Array.from({ length: size }, (_, rank) => new MockEngine({ ...options.engine, dpRank: rank, clock }));
  const defaultMaxTokens = options.defaultMaxTokens ?? 16;
  if (!Number.isInteger(defaultMaxTokens) || defaultMaxTokens < 1) {
    throw new RangeError(`defaultMaxTokens must be an integer >= 1, got ${defaultMaxTokens}`);
  }
  const modelName = options.modelName ?? 'mock-model';
  const adapters = new Set(options.adapters ?? []);
  if (adapters.has(modelName)) throw new RangeError(`adapter "${modelName}" has the base model's name`);
  const handoff = new MockHandoff(options.handoff ?? {}, ranks[0]!.shape.blockSize, ranks[0]!.shape.speedup);
  const handler = new MockHandler(ranks, modelName, adapters, options.promptTokens ?? bytePromptTokens, defaultMaxTokens, options.maxBodyBytes ?? 64 << 20, handoff);
  const server = createServer((req, res) => handler.handle(req, res));
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  handoff.host = host;
  handoff.port = port;
  return {
    url: `http://${urlHost}:${port}`,
    host,
    port,
    engine: ranks[0]!,
    ranks,
    handoff,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        handoff.close();
        for (const engine of ranks) engine.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface MockFleetOptions extends Omit<MockServerOptions, 'port' | 'engine'> {
  workers: number;
  /** Worker i listens on basePort + i; 0 (the default) gives every worker a free port. */
  basePort?: number;
  engine?: Omit<MockEngineOptions, 'clock' | 'onEvents' | 'dpRank'>;
  /** Where worker i's KV event batches go (e.g. a ZeroMQ publisher on its own port); each batch names its rank. */
  onEvents?(worker: number, batch: KvEventBatch): void;
}

export interface MockFleet {
  servers: MockServer[];
  urls: string[];
  /** Each worker's rank-0 engine. */
  engines: MockEngine[];
  /** Each worker's engines, by rank. */
  ranks: MockEngine[][];
  close(): Promise<void>;
}

/** Starts `workers` mock servers in this process. */
export async function startMockFleet(options: MockFleetOptions): Promise<MockFleet> {
  const { workers, basePort = 0, onEvents, engine, ...common } = options;
  if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`workers must be an integer >= 1, got ${workers}`);
  if (!Number.isInteger(basePort) || basePort < 0 || basePort + workers - 1 > 65535) {
    throw new RangeError(`basePort must leave room for ${workers} ports below 65536, got ${basePort}`);
  }
  const servers: MockServer[] = [];
  try {
    for (let i = 0; i < workers; i++) {
      const sink = onEvents ? (batch: KvEventBatch) => onEvents(i, batch) : undefined;
      servers.push(
        await startMockServer({ ...common, port: basePort === 0 ? 0 : basePort + i, engine: { ...engine, onEvents: sink } }),
      );
    }
  } catch (error) {
    await Promise.all(servers.map((s) => s.close()));
    throw error;
  }
  return {
    servers,
    urls: servers.map((s) => s.url),
    engines: servers.map((s) => s.engine),
    ranks: servers.map((s) => s.ranks),
    close: async () => {
      await Promise.all(servers.map((s) => s.close()));
    },
  };
}
