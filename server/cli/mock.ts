// `kvrouter mock`: simulated engine workers (no GPU) behind OpenAI-compatible
// HTTP endpoints, to try the router or test against. Worker i listens on
// port + i; each has its own engine and KV cache on the real clock.
import type { Command } from 'commander';
import type { KvEventBatch } from '../../router/kv-events.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { ENGINE_DEFAULTS } from '../../sim/mocker/engine-options.js';
import { startMockFleet, type MockFleet } from '../../sim/mocker/http-server.js';
import { offsetEndpoint } from '../workers/rank-endpoint.js';
import { count, port, positive } from './options.js';

export interface MockCommandOptions {
  port: number;
  host: string;
  workers: number;
  engineSpeedup: number;
  numBlocks: number;
  blockSize: number;
  maxBatchedTokens: number;
  maxNumSeqs: number;
  model: string;
  defaultMaxTokens: number;
  /** ZeroMQ PUB endpoint for worker 0's KV events; worker i binds port + i, like vLLM's dp ranks. */
  kvEvents?: string;
  /** ZeroMQ ROUTER endpoint for worker 0's event replay; worker i binds port + i. */
  kvReplay?: string;
  kvTopic: string;
}

/** One vLLM-style publisher per worker; returns the sink that feeds them and a closer. */
export async function startKvPublishers(o: MockCommandOptions, print: (line: string) => void) {
  const publishers: ZmqKvPublisher[] = [];
  if (o.kvEvents) {
    for (let i = 0; i < o.workers; i++) {
      const publisher = new ZmqKvPublisher({
        endpoint: offsetEndpoint(o.kvEvents, i),
        replayEndpoint: o.kvReplay ? offsetEndpoint(o.kvReplay, i) : undefined,
        topic: o.kvTopic,
      });
      await publisher.start();
      publishers.push(publisher);
      print(`worker ${i}: kv events ${publisher.endpoint}${publisher.replayEndpoint ? `, replay ${publisher.replayEndpoint}` : ''}`);
    }
  }
  return {
    endpoints: publishers.map((p) => p.endpoint),
    onEvents: publishers.length ? (worker: number, batch: KvEventBatch) => void publishers[worker]!.publish(batch) : undefined,
    close: async () => void (await Promise.all(publishers.map((p) => p.close()))),
  };
}

/**
 * Starts the fleet the options describe and prints where each worker listens.
 * `onEvents` receives each worker's KV event batches (e.g. a ZeroMQ publisher).
 */
export async function startMockCommand(
  o: MockCommandOptions,
  print: (line: string) => void,
  onEvents?: (worker: number, batch: KvEventBatch) => void,
): Promise<MockFleet> {
  const fleet = await startMockFleet({
    onEvents,
    workers: o.workers,
    basePort: o.port,
    host: o.host,
    modelName: o.model,
    defaultMaxTokens: o.defaultMaxTokens,
    engine: {
      speedup: o.engineSpeedup,
      numBlocks: o.numBlocks,
      blockSize: o.blockSize,
      maxBatchedTokens: o.maxBatchedTokens,
      maxNumSeqs: o.maxNumSeqs,
    },
  });
  const shape = fleet.engines[0]!.shape;
  print(
    `kvrouter mock: ${o.workers} worker(s), model ${o.model}, ${shape.numBlocks} blocks x ${shape.blockSize} tokens, ` +
      `budget ${shape.maxBatchedTokens} tokens, ${shape.maxNumSeqs} seqs, speedup ${shape.speedup}`,
  );
  fleet.urls.forEach((url, i) => print(`worker ${i}: ${url}/v1`));
  return fleet;
}

export function registerMock(program: Command): void {
  const d = ENGINE_DEFAULTS;
  program
    .command('mock')
    .description('run simulated engine workers (no GPU) with OpenAI-compatible endpoints; worker i listens on --port + i')
    .option('--port <n>', 'port of the first worker (0: any free ports)', port, 8000)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--workers <n>', 'number of workers', count, 1)
    .option('--engine-speedup <x>', 'divide every modelled step time by x', positive, d.speedup)
    .option('--num-blocks <n>', 'KV cache blocks per worker', count, d.numBlocks)
    .option('--block-size <n>', 'tokens per KV block', count, d.blockSize)
    .option('--max-batched-tokens <n>', 'token budget of one engine step', count, d.maxBatchedTokens)
    .option('--max-num-seqs <n>', 'most requests running at once per worker', count, d.maxNumSeqs)
    .option('--model <name>', 'model name reported by /v1/models', 'mock-model')
    .option('--default-max-tokens <n>', 'output tokens when a request sets no max_tokens', count, 16)
    .option('--kv-events <endpoint>', "publish KV events over ZeroMQ in vLLM's wire format (worker i binds port + i), e.g. tcp://127.0.0.1:5557")
    .option('--kv-replay <endpoint>', 'serve event replay for gap recovery (worker i binds port + i), e.g. tcp://127.0.0.1:5657')
    .option('--kv-topic <topic>', 'topic frame of published KV events', 'kv-events')
    .action(async (options: MockCommandOptions) => {
      let fleet: MockFleet;
      let publishers: Awaited<ReturnType<typeof startKvPublishers>> | undefined;
      try {
        publishers = await startKvPublishers(options, (line) => console.log(line));
        fleet = await startMockCommand(options, (line) => console.log(line), publishers.onEvents);
      } catch (error) {
        await publishers?.close();
        console.error(`kvrouter mock: ${(error as Error).message}`);
        process.exitCode = 1;
        return;
      }
      await new Promise<void>((resolve) => {
        const stop = () => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          void fleet.close().then(() => publishers!.close()).then(resolve);
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      });
      console.log('kvrouter mock: stopped');
    });
}
