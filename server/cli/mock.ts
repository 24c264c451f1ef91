// `kvrouter mock`: simulated engine workers (no GPU) behind OpenAI-compatible
// HTTP endpoints, to try the router or test against. Worker i listens on
// port + i; each has its own engines (one per data-parallel rank) and KV
// caches on the real clock. The defaults fit `kvrouter serve --config`
// (examples/mock-fleet.yaml): ports apart from the router's, the router's
// block size and default tokenizer, so the router's hashes meet the mock's.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { KvEventBatch } from '../../router/kv-events.js';
import type { MediaSpan } from '../../router/media-keys.js';
import { createTokenizer } from '../../router/tokenize/index.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { ENGINE_DEFAULTS } from '../../sim/mocker/engine-options.js';
import { startMockFleet, type MockFleet } from '../../sim/mocker/http-server.js';
import { TRANSFER_DEFAULTS, type HandoffProtocol, type MockRole } from '../../sim/mocker/kv-handoff.js';
import type { PromptTokens } from '../../sim/mocker/prompt-tokens.js';
import { DEFAULTS } from '../config/schema.js';
import { firstCollision, offsetEndpoint, rankSockets } from '../kv-events/rank-endpoints.js';
import { count, integer, listOf, matching, port, positive, real } from './options.js';
import { givenUuid, imagePartsOf } from '../request/media.js';
import { promptIds } from '../request/prompt.js';
import { FAMILY_NAMES, familyDefaults, type MultimodalFamily } from '../../router/multimodal/placeholders.js';

/** The first worker's default port: away from the router's 8000, so both run on one machine. */
export const MOCK_DEFAULT_PORT = 8100;

export interface MockCommandOptions {
  port: number;
  host: string;
  workers: number;
  /** Data-parallel ranks per worker, each with its own engine and cache (vLLM --data-parallel-size). */
  dataParallelSize?: number;
  engineSpeedup: number;
  numBlocks: number;
  blockSize: number;
  maxBatchedTokens: number;
  maxNumSeqs: number;
  /** Blocks of each worker's host-memory offload tier (published with medium CPU); 0: none. */
  offloadBlocks?: number;
  /** ms to load one token's KV from the offload tier back to the GPU. */
  offloadLoadMsPerToken?: number;
  model: string;
  /** LoRA adapters served under their own model names. */
  adapters?: string[];
  /** The router's tokenizer spec (tiktoken:<encoding>, hf:<dir>, bytes); absent: one token per byte of the body. */
  tokenizer?: string;
  /** Expand images into placeholder runs as this model family's engine does (with a tokenizer); absent: coarse runs. */
  multimodal?: MultimodalFamily;
  /** Key an image sent without a uuid by a digest the router does not reproduce, as vLLM does (else by the router's identifier). */
  ownImageDigests?: boolean;
  defaultMaxTokens: number;
  /** ZeroMQ PUB endpoint of worker 0's rank 0; each rank of each worker binds the next port (see eventPort). */
  kvEvents?: string;
  /** ZeroMQ ROUTER endpoint for event replay, numbered like kvEvents. */
  kvReplay?: string;
  kvTopic: string;
  /** Role in a disaggregated fleet (default both) and the handoff protocol it speaks (default vllm). */
  role?: MockRole;
  handoff?: HandoffProtocol;
  kvBytesPerToken?: number;
  kvBandwidth?: number;
}

/**
 * The port offset of a worker's rank: an engine offsets its ranks from its
 * own base port, and worker w's base is data_parallel_size ports after
 * worker w-1's, so a router config gives worker w the endpoint port + w x n.
 */
export function eventPortOffset(worker: number, rank: number, ranks: number): number {
  return worker * ranks + rank;
}

/** One vLLM-style publisher per rank of each worker; returns the sink that feeds them and a closer. */
export async function startKvPublishers(o: MockCommandOptions, print: (line: string) => void) {
  const ranks = o.dataParallelSize ?? 1;
  const publishers: ZmqKvPublisher[] = [];
  const close = async () => void (await Promise.all(publishers.map((p) => p.close())));
  if (o.kvEvents) {
    const endpoints = [{ field: '--kv-events', endpoint: o.kvEvents }];
    if (o.kvReplay) endpoints.push({ field: '--kv-replay', endpoint: o.kvReplay });
    const clash = firstCollision(rankSockets(endpoints, o.workers * ranks));
    if (clash) {
      throw new InvalidArgumentError(
        `${clash[1].field} ${o.kvReplay}: its port ${clash[1].address} is also one of ${clash[0].field}'s (${o.workers * ranks} ports from ${o.kvEvents}); leave more room between them`,
      );
    }
    try {
      for (let w = 0; w < o.workers; w++) {
        for (let r = 0; r < ranks; r++) {
          const offset = eventPortOffset(w, r, ranks);
          const publisher = new ZmqKvPublisher({
            endpoint: offsetEndpoint(o.kvEvents, offset),
            replayEndpoint: o.kvReplay ? offsetEndpoint(o.kvReplay, offset) : undefined,
            topic: o.kvTopic,
          });
          publishers.push(publisher);
          await publisher.start();
          const replay = publisher.replayEndpoint ? `, replay ${publisher.replayEndpoint}` : '';
          print(`worker ${w}${ranks > 1 ? ` rank ${r}` : ''}: kv events ${publisher.endpoint}${replay}`);
        }
      }
    } catch (error) {
      await close();
      throw error;
    }
  }
  return {
    endpoints: publishers.map((p) => p.endpoint),
    onEvents: publishers.length
      ? (worker: number, batch: KvEventBatch) => void publishers[eventPortOffset(worker, batch.dpRank ?? 0, ranks)]!.publish(batch)
      : undefined,
    close,
  };
}

/**
 * The mock's prompt tokenizer: the router's own for a spec (so both hash the
 * same ids, and key the same images), else the byte placeholder.
 */
async function mockPromptTokens(spec: string | undefined, family: MultimodalFamily | undefined, ownDigests: boolean): Promise<PromptTokens | undefined> {
  if (spec === undefined) return undefined;
  const tokenizer = await createTokenizer(spec, { readFile: (file) => readFile(file, 'utf8') });
  // An engine fetches http(s) images itself (vLLM within VLLM_IMAGE_FETCH_TIMEOUT, 5 s): so does the mock, to size them.
  const multimodal = family ? Object.freeze({ ...familyDefaults(family), fetchImages: { timeoutMs: 5000, maxBytes: 1 << 20 }, injectUuid: false }) : null;
  if (!ownDigests) return (body, kind) => promptIds(tokenizer, body, kind, { multimodal });
  return async (body, kind) => {
    const prompt = await promptIds(tokenizer, body, kind, { multimodal });
    return prompt.media ? { ids: prompt.ids, media: withEngineDigests(body, prompt.media) } : prompt;
  };
}

/**
 * The spans with each image the client sent without a uuid keyed by a digest
 * of the engine's own, as vLLM keys it by its blake3 digest, which the router
 * does not reproduce (an image with a uuid keeps it as its key). Spans are in
 * the order of the image parts.
 */
function withEngineDigests(body: Record<string, unknown>, media: readonly MediaSpan[]): MediaSpan[] {
  const parts = (body.messages as unknown[]).flatMap(imagePartsOf);
  return media.map((span, k) => (givenUuid(parts[k]!) === null ? { ...span, id: createHash('sha256').update('engine digest\u0000').update(span.id).digest('hex') } : span));
}

const names = listOf(matching(/^[^\s,]+$/, 'a name without spaces'), 'comma-separated names without spaces');

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
    dataParallelSize: o.dataParallelSize ?? 1,
    adapters: o.adapters ?? [],
    promptTokens: await mockPromptTokens(o.tokenizer, o.multimodal, o.ownImageDigests ?? false),
    basePort: o.port,
    host: o.host,
    modelName: o.model,
    defaultMaxTokens: o.defaultMaxTokens,
    handoff: { role: o.role, protocol: o.handoff, kvBytesPerToken: o.kvBytesPerToken, kvBandwidth: o.kvBandwidth },
    engine: {
      speedup: o.engineSpeedup,
      numBlocks: o.numBlocks,
      blockSize: o.blockSize,
      maxBatchedTokens: o.maxBatchedTokens,
      maxNumSeqs: o.maxNumSeqs,
      offloadBlocks: o.offloadBlocks,
      offloadLoadMsPerToken: o.offloadLoadMsPerToken,
    },
  });
  const shape = fleet.engines[0]!.shape;
  const ranks = (o.dataParallelSize ?? 1) > 1 ? ` x ${o.dataParallelSize} ranks` : '';
  const adapters = o.adapters?.length ? ` (adapters ${o.adapters.join(', ')})` : '';
  print(
    `kvrouter mock: ${o.workers} worker(s)${ranks}, model ${o.model}${adapters}, tokenizer ${o.tokenizer ?? 'one token per byte'}, ` +
      `${shape.numBlocks} blocks x ${shape.blockSize} tokens, budget ${shape.maxBatchedTokens} tokens, ${shape.maxNumSeqs} seqs, speedup ${shape.speedup}`,
  );
  const handoff = fleet.servers[0]!.handoff;
  if (handoff.role !== 'both') print(`role ${handoff.role} (${handoff.protocol} handoff), KV ${handoff.shape.kvBytesPerToken} bytes/token over ${handoff.shape.kvBandwidth} bytes/s`);
  fleet.urls.forEach((url, i) => print(`worker ${i}: ${url}/v1`));
  return fleet;
}

export function registerMock(program: Command): void {
  const d = ENGINE_DEFAULTS;
  program
    .command('mock')
    .description('run simulated engine workers (no GPU) with OpenAI-compatible endpoints; worker i listens on --port + i')
    .option('--port <n>', 'port of the first worker (0: any free ports)', port, MOCK_DEFAULT_PORT)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--workers <n>', 'number of workers', count, 1)
    .option('--data-parallel-size <n>', 'data-parallel ranks per worker, each with its own KV cache; X-Data-Parallel-Rank picks one', count, 1)
    .option('--engine-speedup <x>', 'divide every modelled step time by x', positive, d.speedup)
    .option('--num-blocks <n>', 'KV cache blocks per worker (per rank)', count, d.numBlocks)
    .option('--block-size <n>', "tokens per KV block (the router's default)", count, DEFAULTS.blockSize)
    .option('--max-batched-tokens <n>', 'token budget of one engine step', count, d.maxBatchedTokens)
    .option('--max-num-seqs <n>', 'most requests running at once per worker (per rank)', count, d.maxNumSeqs)
    .option('--offload-blocks <n>', 'blocks of a host-memory offload tier per worker, published as medium CPU, that prefixes the GPU evicted are loaded back from (0: none)', integer(0), d.offloadBlocks)
    .option('--offload-load-ms-per-token <ms>', "time to load one token's KV from the offload tier back to the GPU", real(0, Infinity, 'a number of ms >= 0'), d.offloadLoadMsPerToken)
    .option('--model <name>', 'model name reported by /v1/models', 'mock-model')
    .option('--adapters <names>', 'LoRA adapters served under their own model names, comma-separated (vLLM --lora-modules)', names)
    .option('--tokenizer <spec>', "prompt tokenizer, as the router's tokenizer field: tiktoken:<encoding>, hf:<model dir> or bytes", DEFAULTS.tokenizer)
    .addOption(new Option('--multimodal <family>', "expand images into the placeholder tokens this model family's engine gives them (the router's multimodal.family)").choices(FAMILY_NAMES))
    .option('--own-image-digests', "key an image sent without a uuid by a digest of the engine's own, which the router does not reproduce, as vLLM does (default: by the router's identifier)")
    .option('--default-max-tokens <n>', 'output tokens when a request sets no max_tokens', count, 16)
    .option('--kv-events <endpoint>', "publish KV events over ZeroMQ in vLLM's wire format (worker w's rank r binds port + w x ranks + r), e.g. tcp://127.0.0.1:5557")
    .option('--kv-replay <endpoint>', 'serve event replay for gap recovery, numbered like --kv-events, e.g. tcp://127.0.0.1:5657')
    .option('--kv-topic <topic>', 'topic frame of published KV events', 'kv-events')
    .addOption(new Option('--role <role>', 'role in a disaggregated fleet: prefill, decode or both').choices(['prefill', 'decode', 'both']).default('both'))
    .addOption(new Option('--handoff <protocol>', "the prefill/decode handoff's fields: vLLM's kv_transfer_params or SGLang's bootstrap room").choices(['vllm', 'sglang']).default('vllm'))
    .option('--kv-bytes-per-token <n>', 'KV bytes per token a decode worker pulls from a prefill worker', count, TRANSFER_DEFAULTS.kvBytesPerToken)
    .option('--kv-bandwidth <bytes/s>', 'bytes per second between a prefill and a decode worker', positive, TRANSFER_DEFAULTS.kvBandwidth)
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
