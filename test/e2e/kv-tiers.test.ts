// Offloaded tiers and multimodal prompts end to end: mock engines with a
// host-memory offload tier publish GPU and CPU events over real ZeroMQ, the
// router indexes each tier and credits it by its weight, and /router/explain
// shows the overlap per tier; chat prompts with images are routed (over real
// HTTP) only to the worker that cached the same image, and that worker's
// engine reuses its cache for them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, MODEL, post, startStack, waitFor, type Stack } from './stack.js';

interface WorkerView {
  worker: string;
  overlap_blocks: number;
  overlap_by_tier: { gpu: number; cpu: number; disk: number };
  credited_blocks: number;
}
interface Explained {
  chosen: string;
  media_items: number;
  tier_weights: { gpu: number; cpu: number; disk: number };
  workers: WorkerView[];
}

const BLOCK = 16;
const ids = (blocks: number, start: number) => Array.from({ length: blocks * BLOCK }, (_, i) => start + i);

let stack: Stack;

async function explain(body: Record<string, unknown>): Promise<Explained> {
  const res = await post(`${stack.url}/router/explain`, { model: MODEL, ...body });
  expect(res.status).toBe(200);
  return (await res.json()) as Explained;
}

const view = (x: Explained, worker: string) => x.workers.find((w) => w.worker === worker)!;

async function complete(prompt: number[], worker: string): Promise<void> {
  const res = await post(`${stack.url}/v1/completions`, { model: MODEL, prompt, max_tokens: 1 }, { 'x-worker-id': worker });
  expect(res.status).toBe(200);
  await res.text();
}

beforeAll(async () => {
  // 64 GPU blocks a worker, so a few prompts push older ones out to the CPU tier.
  // The kv cost weighs credited overlap against load alone; the default ttft policy also weighs the
  // speeds it learns from observed first tokens, which vary with how busy the test machine is.
  stack = await startStack({
    workers: 2,
    blockSize: BLOCK,
    numBlocks: 64,
    offloadBlocks: 4096,
    edit: (doc) => {
      (doc.models as Record<string, unknown>[])[0]!.selection = { policy: 'kv' };
    },
  });
  await waitFor(async () => ((await (await fetch(`${stack.url}/ready`)).json()) as { ready?: boolean; waiting_for_kv_events: string[] }).waiting_for_kv_events.length === 0, 'the subscriptions');
});
afterAll(() => stack?.close());

describe('offloaded KV tiers over ZeroMQ', () => {
  it('indexes a prompt in both tiers, then, once the GPU evicts it, credits its CPU blocks at 0.75', async () => {
    const prompt = ids(20, 10_000);
    await complete(prompt, 'mock-0');
    await waitFor(async () => view(await explain({ prompt }), 'mock-0').overlap_by_tier.cpu === 20, 'the CPU-tier store');
    expect(view(await explain({ prompt }), 'mock-0')).toMatchObject({ overlap_blocks: 20, overlap_by_tier: { gpu: 20, cpu: 20, disk: 0 }, credited_blocks: 20 });
    // Three other prompts of 20 blocks need the GPU blocks it left cached: it is evicted there, and stays offloaded.
    for (const start of [200_000, 300_000, 400_000]) await complete(ids(20, start), 'mock-0');
    await waitFor(async () => view(await explain({ prompt }), 'mock-0').overlap_by_tier.gpu < 20, 'the GPU eviction');
    const x = await explain({ prompt });
    const a = view(x, 'mock-0');
    expect(a.overlap_by_tier.cpu).toBe(20);
    expect(a.overlap_blocks).toBe(20);
    expect(a.credited_blocks).toBe(a.overlap_by_tier.gpu + 0.75 * (20 - a.overlap_by_tier.gpu));
    expect(x.tier_weights).toEqual({ gpu: 1, cpu: 0.75, disk: 0.25 });
  });

  it('picks a shorter GPU-resident prefix over a longer offloaded one when the weights say so', async () => {
    const prompt = ids(20, 50_000);
    await complete(prompt, 'mock-0');
    await waitFor(async () => view(await explain({ prompt }), 'mock-0').overlap_by_tier.cpu === 20, 'the CPU-tier store');
    // Other prompts until none of it is left on the GPU (the cache evicts leaves first, the prompt's root last).
    let filler = 600_000;
    await waitFor(async () => {
      await complete(ids(20, (filler += 100_000)), 'mock-0');
      return view(await explain({ prompt }), 'mock-0').overlap_by_tier.gpu === 0;
    }, 'the whole prefix leaving the GPU');
    // mock-1 holds the first 12 blocks on its GPU: 12 credited against mock-0's 20 x 0.75 = 15.
    await complete(prompt.slice(0, 12 * BLOCK), 'mock-1');
    await waitFor(async () => view(await explain({ prompt }), 'mock-1').overlap_by_tier.gpu === 12, "mock-1's store");
    const x = await explain({ prompt });
    expect([view(x, 'mock-0').credited_blocks, view(x, 'mock-1').credited_blocks]).toEqual([15, 12]);
    expect(x.chosen).toBe('mock-0');
  });
});

describe('multimodal prompts', () => {
  const system = { role: 'system', content: 'You describe pictures carefully. '.repeat(8) };
  const withImage = (url: string, extra: Record<string, unknown> = {}) =>
    chat([system, { role: 'user', content: [{ type: 'text', text: 'What is in this picture, and what colour is it?' }, { type: 'image_url', image_url: { url }, ...extra }] } as never], { max_tokens: 1 });

  it('routes an image prompt to the worker that cached the same image, and that engine reuses it', async () => {
    const cat = withImage('https://example.com/cat.png');
    const dog = withImage('https://example.com/dog.png');
    for (const [body, worker] of [[cat, 'mock-0'], [dog, 'mock-1']] as const) {
      const res = await post(`${stack.url}/v1/chat/completions`, body, { 'x-worker-id': worker });
      expect(res.status).toBe(200);
      await res.text();
    }
    // Each worker's events arrive on their own socket: wait until each prompt
    // is indexed past the shared system prompt on the worker that served it.
    await waitFor(async () => {
      const [x, y] = await Promise.all([explain(cat), explain(dog)]);
      return view(x, 'mock-0').overlap_blocks > view(x, 'mock-1').overlap_blocks && view(y, 'mock-1').overlap_blocks > view(y, 'mock-0').overlap_blocks;
    }, "the image prompts' stores");
    const forCat = await explain(cat);
    const forDog = await explain(dog);
    expect(forCat.media_items).toBe(1);
    expect(forCat.chosen).toBe('mock-0');
    expect(forDog.chosen).toBe('mock-1');
    // The system prompt before the image is shared: the other worker matches it, and only it.
    const shared = view(forCat, 'mock-1').overlap_blocks;
    expect(shared).toBeGreaterThan(0);
    expect(view(forCat, 'mock-0').overlap_blocks).toBeGreaterThan(shared);
    expect(view(forDog, 'mock-0').overlap_blocks).toBe(shared);
    // Routed freely, the cat prompt goes to mock-0, whose engine serves it from cache past the shared prefix.
    const res = await post(`${stack.url}/v1/chat/completions`, cat);
    expect(res.headers.get('x-kvrouter-worker')).toBe('mock-0');
    const usage = ((await res.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } }).usage;
    expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(shared * BLOCK);
  });

  it('an image given a uuid is that item wherever it is fetched from', async () => {
    const a = withImage('https://cdn-a.example.com/x.png', { uuid: 'sku-7' });
    const res = await post(`${stack.url}/v1/chat/completions`, a, { 'x-worker-id': 'mock-1' });
    expect(res.status).toBe(200);
    await res.text();
    const b = withImage('https://cdn-b.example.com/other-name.png', { uuid: 'sku-7' });
    await waitFor(async () => (await explain(b)).chosen === 'mock-1', 'the uuid-keyed store');
    const unkeyed = await explain(withImage('https://cdn-b.example.com/other-name.png'));
    expect(view(unkeyed, 'mock-1').overlap_blocks).toBeLessThan(view(await explain(b), 'mock-1').overlap_blocks);
  });

  it('answers 400 naming the field for an image part without a URL', async () => {
    const res = await post(`${stack.url}/v1/chat/completions`, chat([{ role: 'user', content: [{ type: 'image_url', image_url: {} }] } as never]));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/messages\[0\]\.content\[0\]\.image_url\.url/);
  });
});
