// The embedded default: with no config file, `kvrouter serve` (and `npm
// start`) runs simulated engine workers in this process, on free loopback
// ports, each publishing real KV events over ZeroMQ (with replay) and
// tokenizing prompts with the router's own tokenizer, so the whole path
// (HTTP, tokenization, events, cache-aware routing) works with no GPU. The
// command composes it: the router gets the workers' URLs in its config and
// the tokenizers they share, and knows nothing of the simulation.
import { createTokenizer } from '../../router/tokenize/index.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { startMockFleet, type MockFleet } from '../../sim/mocker/http-server.js';
import { DEFAULTS } from '../config/schema.js';
import { promptIds } from '../request/prompt.js';
import type { TokenizerCache } from '../workers/model-runtime.js';

export interface EmbeddedOptions {
  workers: number;
  /** Divides the simulated engines' step times. */
  speedup: number;
  model: string;
  tokenizer: string;
  blockSize: number;
  /** KV cache blocks per worker. */
  numBlocks: number;
  maxBatchedTokens: number;
  /** Blocks of each worker's host-memory offload tier (published with medium CPU); 0: none. */
  offloadBlocks?: number;
}

export const EMBEDDED_DEFAULTS: EmbeddedOptions = {
  workers: 4,
  speedup: 1,
  model: 'mock-model',
  tokenizer: DEFAULTS.tokenizer,
  blockSize: DEFAULTS.blockSize,
  numBlocks: 16_384,
  maxBatchedTokens: 8192,
};

export interface EmbeddedFleet {
  /** The config document for the router (models and workers), before environment overrides. */
  document: Record<string, unknown>;
  tokenizers: TokenizerCache;
  fleet: MockFleet;
  /** Worker i's KV-event publisher. */
  publishers: ZmqKvPublisher[];
  close(): Promise<void>;
}

export async function startEmbeddedFleet(options: EmbeddedOptions = EMBEDDED_DEFAULTS): Promise<EmbeddedFleet> {
  const loading = createTokenizer(options.tokenizer, { readFile: () => Promise.reject(new Error('the embedded default reads no files')) });
  const tokenizer = await loading;
  const publishers: ZmqKvPublisher[] = [];
  let fleet: MockFleet | undefined;
  const close = async () => {
    await fleet?.close();
    await Promise.all(publishers.map((p) => p.close()));
  };
  try {
    for (let i = 0; i < options.workers; i++) {
      const publisher = new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: 'kv-events' });
      publishers.push(publisher);
      await publisher.start();
    }
    fleet = await startMockFleet({
      workers: options.workers,
      host: '127.0.0.1',
      modelName: options.model,
      promptTokens: (body, kind) => promptIds(tokenizer, body, kind),
      engine: {
        speedup: options.speedup,
        blockSize: options.blockSize,
        numBlocks: options.numBlocks,
        maxBatchedTokens: options.maxBatchedTokens,
        offloadBlocks: options.offloadBlocks ?? 0,
      },
      onEvents: (worker, batch) => void publishers[worker]!.publish(batch),
    });
  } catch (error) {
    await close();
    throw error;
  }
  const document = {
    models: [{ name: options.model, tokenizer: options.tokenizer, block_size: options.blockSize }],
    workers: fleet.urls.map((url, i) => ({
      id: `mock-${i}`,
      url,
      model: options.model,
      kv_events: { source: 'zmq', endpoint: publishers[i]!.endpoint, replay_endpoint: publishers[i]!.replayEndpoint, topic: 'kv-events' },
      total_blocks: options.numBlocks,
      max_batched_tokens: options.maxBatchedTokens,
    })),
  };
  return { document, tokenizers: new Map([[options.tokenizer, loading]]), fleet, publishers, close };
}
