// The offload tier loaded back, end to end: mock engines write every block
// through to a host-memory tier and, when a prompt's prefix has left the GPU
// but is still in the tier, load it back instead of computing it, publishing
// the loaded blocks as GPU stores over real ZeroMQ. The router, crediting
// the CPU tier, sends the prompt (over real HTTP) to the worker that can
// load it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL, post, startStack, waitFor, type Stack } from './stack.js';

interface WorkerView {
  worker: string;
  overlap_by_tier: { gpu: number; cpu: number; disk: number };
  credited_blocks: number;
}
interface Explained {
  chosen: string;
  workers: WorkerView[];
}
interface Stats {
  loadedTokens: number;
  loading: number;
}

const BLOCK = 16;
const ids = (blocks: number, start: number) => Array.from({ length: blocks * BLOCK }, (_, i) => start + i);

let stack: Stack;

async function explain(prompt: number[]): Promise<Explained> {
  const res = await post(`${stack.url}/router/explain`, { model: MODEL, prompt });
  expect(res.status).toBe(200);
  return (await res.json()) as Explained;
}
const tiers = async (prompt: number[], worker: string) => (await explain(prompt)).workers.find((w) => w.worker === worker)!.overlap_by_tier;

async function complete(prompt: number[], headers: Record<string, string> = {}): Promise<{ worker: string | null; cached: number }> {
  const res = await post(`${stack.url}/v1/completions`, { model: MODEL, prompt, max_tokens: 1 }, headers);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
  return { worker: res.headers.get('x-kvrouter-worker'), cached: body.usage.prompt_tokens_details.cached_tokens };
}

const stats = async (worker: number) => (await (await fetch(`${stack.embedded.fleet.urls[worker]}/mock/stats`)).json()) as Stats;

beforeAll(async () => {
  // 64 GPU blocks a worker and a large CPU tier: a few prompts push a prefix off the GPU, never out of the tier.
  stack = await startStack({ workers: 2, blockSize: BLOCK, numBlocks: 64, offloadBlocks: 4096 });
  await waitFor(async () => ((await (await fetch(`${stack.url}/ready`)).json()) as { waiting_for_kv_events: string[] }).waiting_for_kv_events.length === 0, 'the subscriptions');
});
afterAll(() => stack?.close());

describe('loading an offloaded prefix', () => {
  it('routes a prompt whose prefix is only in a CPU tier to that worker, whose engine loads it back and publishes it on the GPU', async () => {
    const prompt = ids(20, 10_000);
    await complete(prompt, { 'x-worker-id': 'mock-0' });
    await waitFor(async () => (await tiers(prompt, 'mock-0')).cpu === 20, 'the CPU-tier store');
    let filler = 100_000;
    await waitFor(async () => {
      await complete(ids(20, (filler += 100_000)), { 'x-worker-id': 'mock-0' });
      return (await tiers(prompt, 'mock-0')).gpu === 0;
    }, 'the whole prefix leaving the GPU');
    const before = await stats(0);
    const x = await explain(prompt);
    expect(x.chosen).toBe('mock-0');
    expect(x.workers.find((w) => w.worker === 'mock-0')!.credited_blocks).toBe(15);

    // Routed freely: to mock-0, which loads 19 blocks (the last token is always computed) and reports them cached.
    const served = await complete(prompt);
    expect(served).toEqual({ worker: 'mock-0', cached: 19 * BLOCK });
    expect((await stats(0)).loadedTokens - before.loadedTokens).toBe(19 * BLOCK);
    // The loaded blocks (and the last one, computed) are GPU stores again, heard over ZeroMQ.
    await waitFor(async () => (await tiers(prompt, 'mock-0')).gpu === 20, 'the GPU stores of the loaded blocks');
    expect(await tiers(prompt, 'mock-0')).toEqual({ gpu: 20, cpu: 20, disk: 0 });
  });
});
