// Adapters learned from the engines as they run: `kvrouter mock` workers load
// and unload LoRA adapters at run time (vLLM's /v1/load_lora_adapter and
// /v1/unload_lora_adapter) and list what is loaded in /v1/models; the router
// polls each worker's listing (adapters_poll_ms) and, with no adapter in its
// config, routes a newly loaded adapter's requests to the worker that has it,
// prefers it over one that could load it on demand, and stops sending there
// once it is unloaded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { complete, explain, post, startMockCommandStack, type MockCommandStack } from './mock-command-stack.js';

let stack: MockCommandStack;
beforeAll(async () => {
  stack = await startMockCommandStack({ workers: 3 }, ({ urls, eventPort, replayPort }) => {
    const events = (w: number) => ({ endpoint: `tcp://127.0.0.1:${eventPort + w}`, replay_endpoint: `tcp://127.0.0.1:${replayPort + w}`, topic: 'kv-events' });
    return {
      // No adapters in the config: the router learns them from the engines.
      models: [{ name: 'mock-model', tokenizer: 'bytes', block_size: 16, adapters_poll_ms: 50 }],
      workers: [
        { id: 'w0', url: urls[0], kv_events: events(0) },
        { id: 'w1', url: urls[1], kv_events: events(1) },
        // Loads any adapter on demand: serves each, preferred for none it has not loaded.
        { id: 'lazy', url: urls[2], kv_events: events(2), load_adapters: true },
      ],
    };
  });
});
afterAll(() => stack?.close());

const prompt = (tag: string) => `${tag}: a prompt long enough for several blocks of sixteen byte-tokens each. `.repeat(3);

async function lora(worker: number, action: 'load' | 'unload', name: string): Promise<Response> {
  return post(`${stack.fleet.urls[worker]}/v1/${action}_lora_adapter`, action === 'load' ? { lora_name: name, lora_path: `/adapters/${name}` } : { lora_name: name });
}

async function workersFor(model: string, n: number): Promise<Set<string | null>> {
  const seen = new Set<string | null>();
  for (let i = 0; i < n; i++) {
    const c = await complete(stack.url, { model, prompt: prompt(`${model} ${i} ${Math.random()}`), max_tokens: 1 });
    expect(c.status).toBe(200);
    seen.add(c.worker);
  }
  return seen;
}

const eligible = async (model: string) =>
  (await explain(stack.url, { model, prompt: prompt('explained') })).workers.filter((w) => w.eligible).map((w) => w.worker).sort();

describe('adapters learned from /v1/models', () => {
  it('the mock loads and unloads adapters as vLLM does, with its errors', async () => {
    expect((await lora(0, 'load', 'tmp-lora')).status).toBe(200);
    const models = (await (await fetch(`${stack.fleet.urls[0]}/v1/models`)).json()) as { data: { id: string; parent?: string }[] };
    expect(models.data.map((m) => [m.id, m.parent ?? null])).toEqual([['mock-model', null], ['tmp-lora', 'mock-model']]);
    const twice = await lora(0, 'load', 'tmp-lora');
    expect(twice.status).toBe(400);
    expect(((await twice.json()) as { error: { message: string } }).error.message).toMatch(/already been loaded/);
    const noPath = await post(`${stack.fleet.urls[0]}/v1/load_lora_adapter`, { lora_name: 'x' });
    expect(noPath.status).toBe(400);
    expect((await lora(0, 'unload', 'tmp-lora')).status).toBe(200);
    const gone = await lora(0, 'unload', 'tmp-lora');
    expect(gone.status).toBe(404);
  });

  it('routes a newly loaded adapter to the worker that has it, preferred over one that loads on demand', async () => {
    expect((await post(`${stack.url}/v1/completions`, { model: 'sql-lora', prompt: 'x', max_tokens: 1 })).status).toBe(404);
    expect((await lora(1, 'load', 'sql-lora')).status).toBe(200);
    await waitFor(async () => {
      const listed = (await (await fetch(`${stack.url}/v1/models`)).json()) as { data: { id: string; parent?: string }[] };
      return listed.data.some((m) => m.id === 'sql-lora' && m.parent === 'mock-model');
    }, 'the router to list the adapter w1 loaded');
    await waitFor(async () => (await eligible('sql-lora')).join() === 'lazy,w1', 'w1 and the on-demand worker to serve sql-lora');
    // Idle workers cost alike: without the preference for the loaded adapter, "lazy" would take some.
    expect([...(await workersFor('sql-lora', 8))]).toEqual(['w1']);
    // The base model still goes anywhere.
    expect((await eligible('mock-model')).join()).toBe('lazy,w0,w1');
  });

  it('moves an adapter to the worker that loads it once the one that had it unloads it', async () => {
    await waitFor(async () => (await eligible('sql-lora')).join() === 'lazy,w1', 'sql-lora on w1');
    expect((await lora(0, 'load', 'sql-lora')).status).toBe(200);
    expect((await lora(1, 'unload', 'sql-lora')).status).toBe(200);
    await waitFor(async () => (await eligible('sql-lora')).join() === 'lazy,w0', 'w0 to serve sql-lora and w1 no longer');
    expect([...(await workersFor('sql-lora', 8))]).toEqual(['w0']);
  });

  it('with the adapter unloaded everywhere, only the worker that loads on demand serves it', async () => {
    expect((await lora(0, 'unload', 'sql-lora')).status).toBe(200);
    await waitFor(async () => (await eligible('sql-lora')).join() === 'lazy', 'no worker to have sql-lora loaded');
    expect([...(await workersFor('sql-lora', 3))]).toEqual(['lazy']);
  });
});
