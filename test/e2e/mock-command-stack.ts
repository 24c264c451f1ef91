// A router in front of `kvrouter mock` workers started with the command's own
// code (startKvPublishers + startMockCommand, as the CLI does): real HTTP, real
// ZeroMQ publishers on consecutive ports (one per rank, port + rank), and the
// router's config written the way an operator would write it for that fleet.
import { configFromDocument } from '../../server/config/load.js';
import { startKvPublishers, startMockCommand, type MockCommandOptions } from '../../server/cli/mock.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import type { MockFleet } from '../../sim/mocker/http-server.js';
import { waitFor } from '../helpers/wait.js';

export interface MockCommandStack {
  url: string;
  router: RunningRouter;
  fleet: MockFleet;
  /** The first rank's event and replay ports (worker w's rank r uses + w x ranks + r). */
  eventPort: number;
  replayPort: number;
  close(): Promise<void>;
}

export const MOCK_OPTIONS: MockCommandOptions = {
  port: 0,
  host: '127.0.0.1',
  workers: 1,
  engineSpeedup: 50,
  numBlocks: 2048,
  blockSize: 16,
  maxBatchedTokens: 4096,
  maxNumSeqs: 32,
  model: 'mock-model',
  tokenizer: 'bytes',
  defaultMaxTokens: 2,
  kvTopic: 'kv-events',
};

/** Replay ports sit this far above the event ports: room for every rank of every worker. */
const REPLAY_GAP = 100;

/**
 * Starts the mock fleet on a free run of event ports (a random base, tried
 * again elsewhere if a port is taken), then a router whose document
 * `routerDocument` writes for that fleet, and waits until the router is ready
 * (every KV subscription connected).
 */
export async function startMockCommandStack(
  mock: Partial<MockCommandOptions>,
  routerDocument: (fleet: { urls: string[]; eventPort: number; replayPort: number }) => Record<string, unknown>,
): Promise<MockCommandStack> {
  const options = { ...MOCK_OPTIONS, ...mock };
  let publishers: Awaited<ReturnType<typeof startKvPublishers>> | undefined;
  let eventPort = 0;
  for (let attempt = 0; !publishers; attempt++) {
    eventPort = 20_000 + Math.floor(Math.random() * 20_000);
    try {
      publishers = await startKvPublishers(
        { ...options, kvEvents: `tcp://127.0.0.1:${eventPort}`, kvReplay: `tcp://127.0.0.1:${eventPort + REPLAY_GAP}` },
        () => {},
      );
    } catch (error) {
      if (attempt >= 20) throw error;
    }
  }
  const replayPort = eventPort + REPLAY_GAP;
  let fleet: MockFleet | undefined;
  let router: RunningRouter | undefined;
  try {
    fleet = await startMockCommand(options, () => {}, publishers.onEvents);
    const document = { host: '127.0.0.1', port: 0, log_level: 'silent', ...routerDocument({ urls: fleet.urls, eventPort, replayPort }) };
    router = await startRouter(configFromDocument(document));
    const url = router.url;
    await waitFor(async () => (await fetch(`${url}/ready`)).status === 200, 'the router to be ready (KV subscriptions connected)');
  } catch (error) {
    await router?.close();
    await fleet?.close();
    await publishers.close();
    throw error;
  }
  const ready = router;
  const workers = fleet;
  return {
    url: ready.url,
    router: ready,
    fleet: workers,
    eventPort,
    replayPort,
    close: async () => {
      await ready.close();
      await workers.close();
      await publishers!.close();
    },
  };
}

export function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

export interface Explained {
  chosen: string | null;
  adapter: string | null;
  tokenizer_engine: string;
  error: { code: string; message: string } | null;
  workers: { worker: string; eligible: boolean; filtered: string | null; overlap_blocks: number; cached_tokens: number }[];
}

export async function explain(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Explained> {
  return (await (await post(`${url}/router/explain`, body, headers)).json()) as Explained;
}

/** The overlap explain reports for one worker label. */
export function overlapOn(x: Explained, worker: string): number {
  const row = x.workers.find((w) => w.worker === worker);
  if (!row) throw new Error(`explain has no row for ${worker}: ${JSON.stringify(x.workers.map((w) => w.worker))}`);
  return row.overlap_blocks;
}

export interface Completion {
  status: number;
  worker: string | null;
  cachedTokens: number;
  body: Record<string, any>;
}

/** Sends a completion (a chat when `messages` is given) and reads where it ran and what the engine reused. */
export async function complete(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Completion> {
  const path = body.messages ? '/v1/chat/completions' : '/v1/completions';
  const res = await post(`${url}${path}`, body, headers);
  const json = (await res.json()) as Record<string, any>;
  return { status: res.status, worker: res.headers.get('x-kvrouter-worker'), cachedTokens: json.usage?.prompt_tokens_details?.cached_tokens ?? 0, body: json };
}
