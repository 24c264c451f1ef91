// Mock workers misconfigured on purpose, and a router in front of them, for
// the diagnostics tests: the engines are the project's simulated engine over
// real HTTP, publishing real KV events over ZeroMQ (or not at all).
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { configFromDocument } from '../../server/config/load.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { startMockFleet, type MockFleet } from '../../sim/mocker/http-server.js';
import type { PromptTokens } from '../../sim/mocker/prompt-tokens.js';
import { refusedPort } from './refused-port.js';

export const MODEL = 'mock-model';

export interface Mocks {
  fleet: MockFleet;
  /** Worker i's KV-event endpoint, for all its ranks (a port nobody publishes on when publishing is off). */
  endpoints: string[];
  close(): Promise<void>;
}

export interface MockOptions {
  workers?: number;
  blockSize: number;
  /** Data-parallel ranks behind each mock server; every rank's batches go out on the server's one publisher. */
  dataParallelSize?: number;
  /** Whether the engines publish KV events (default true). */
  publish?: boolean;
  /** The engines' tokenizer (default: the mock's byte placeholder). */
  promptTokens?: PromptTokens;
}

export async function startMocks(o: MockOptions): Promise<Mocks> {
  const workers = o.workers ?? 1;
  const publishers: ZmqKvPublisher[] = [];
  const endpoints: string[] = [];
  for (let i = 0; i < workers; i++) {
    if (o.publish === false) {
      endpoints.push(`tcp://127.0.0.1:${refusedPort(i)}`);
      continue;
    }
    const p = new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', topic: 'kv-events' });
    await p.start();
    publishers.push(p);
    endpoints.push(p.endpoint);
  }
  const fleet = await startMockFleet({
    workers,
    host: '127.0.0.1',
    modelName: MODEL,
    promptTokens: o.promptTokens,
    dataParallelSize: o.dataParallelSize ?? 1,
    engine: { speedup: 20, blockSize: o.blockSize, numBlocks: 4096 },
    onEvents: publishers.length > 0 ? (i, batch) => void publishers[i]!.publish(batch) : undefined,
  });
  return {
    fleet,
    endpoints,
    close: async () => {
      await fleet.close();
      await Promise.all(publishers.map((p) => p.close()));
    },
  };
}

export interface DiagnosedRouter {
  router: RunningRouter;
  url: string;
  /** Warning lines the router logged. */
  warnings(): string[];
  close(): Promise<void>;
}

/** A router over the given document (host, port and log level filled in), its warnings kept. */
export async function startDiagnosedRouter(document: Record<string, unknown>): Promise<DiagnosedRouter> {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push((JSON.parse(line) as { msg: string }).msg);
      done();
    },
  });
  const config = configFromDocument({ host: '127.0.0.1', port: 0, log_level: 'warn', ...document });
  const router = await startRouter(config, { logger: pino({ level: 'warn' }, sink) });
  return { router, url: router.url, warnings: () => [...lines], close: () => router.close() };
}

export interface Diagnosis {
  summary: Record<string, number>;
  workers: {
    worker: string;
    verdict: string;
    causes: { cause: string; detail: string; fix: string }[];
    events: { stored: number };
    requests_sent: number;
    blocks_held: number;
    tokenizer_check: string;
  }[];
}

export async function diagnose(url: string, headers: Record<string, string> = {}): Promise<Diagnosis> {
  const res = await fetch(`${url}/router/diagnose`, { headers });
  if (!res.ok) throw new Error(`/router/diagnose answered ${res.status}`);
  return (await res.json()) as Diagnosis;
}

/** A worker rank's verdict and causes, by label. */
export async function rankOf(url: string, worker: string) {
  const found = (await diagnose(url)).workers.find((w) => w.worker === worker);
  if (!found) throw new Error(`no diagnosis for ${worker}`);
  return found;
}

/** Completion requests with token-id prompts that share a prefix (so later ones hit the cache). */
export async function sendShared(url: string, count: number, blocks: number, blockSize: number, headers: Record<string, string> = {}, first = 100): Promise<void> {
  const shared = Array.from({ length: blocks * blockSize }, (_, i) => first + i);
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: MODEL, prompt: [...shared, 9000 + i, 9001 + i], max_tokens: 2 }),
    });
    if (res.status !== 200) throw new Error(`completion answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  }
}
