// LoRA adapters and cache salts end to end: `kvrouter mock` workers serve
// adapters under their own model names and salt requests' blocks as vLLM
// does, publishing lora_name and per-block extra keys over ZeroMQ; the router
// resolves the adapter from the request's model, hashes its blocks (and a
// salt's first block) the same way, keeps adapter requests to the workers
// that serve the adapter and prefers those that have it loaded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { complete, explain, overlapOn, post, startMockCommandStack, type MockCommandStack } from './mock-command-stack.js';

let stack: MockCommandStack;
beforeAll(async () => {
  stack = await startMockCommandStack({ workers: 3, adapters: ['sql-lora', 'chat-lora'] }, ({ urls, eventPort, replayPort }) => {
    const events = (w: number) => ({ endpoint: `tcp://127.0.0.1:${eventPort + w}`, replay_endpoint: `tcp://127.0.0.1:${replayPort + w}`, topic: 'kv-events' });
    return {
      // Overlap against load, with no speeds learned from wall-clock first tokens: on a busy machine the
      // learned speeds of three workers that served a handful of requests each can outweigh a few blocks.
      selection: { policy: 'kv' },
      models: [{ name: 'mock-model', tokenizer: 'bytes', block_size: 16, adapters: ['sql-lora', 'chat-lora'] }],
      workers: [
        // sql-lora loaded; nothing else.
        { id: 'sql', url: urls[0], kv_events: events(0), adapters: ['sql-lora'] },
        // chat-lora loaded, and any other adapter loaded on demand.
        { id: 'chat', url: urls[1], kv_events: events(1), adapters: ['chat-lora'], load_adapters: true },
        // The base model only.
        { id: 'base', url: urls[2], kv_events: events(2), adapters: [] },
      ],
    };
  });
});
afterAll(() => stack?.close());

const long = (tag: string) => `${tag}: a prompt long enough for several blocks of sixteen byte-tokens each. `.repeat(4);

describe('LoRA adapters', () => {
  it('lists adapters in /v1/models with their base model', async () => {
    const models = (await (await fetch(`${stack.url}/v1/models`)).json()) as { data: { id: string; parent?: string }[] };
    expect(models.data.map((m) => [m.id, m.parent ?? null])).toEqual([
      ['mock-model', null],
      ['sql-lora', 'mock-model'],
      ['chat-lora', 'mock-model'],
    ]);
  });

  it('sends adapter requests only to workers that serve the adapter, preferring the one that has it loaded', async () => {
    const sql = new Set<string | null>();
    const chat = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      sql.add((await complete(stack.url, { model: 'sql-lora', prompt: long(`sql ${i}`), max_tokens: 1 })).worker);
      chat.add((await complete(stack.url, { model: 'chat-lora', prompt: long(`chat ${i}`), max_tokens: 1 })).worker);
    }
    // Idle workers cost alike: without the preference, "chat" (which can load sql-lora) would take some of them.
    expect([...sql]).toEqual(['sql']);
    expect([...chat]).toEqual(['chat']);
    const x = await explain(stack.url, { model: 'sql-lora', prompt: long('explained') });
    expect(x.adapter).toBe('sql-lora');
    expect(x.workers.find((w) => w.worker === 'base')!.eligible).toBe(false);
    expect(x.workers.find((w) => w.worker === 'chat')!.eligible).toBe(true);
  });

  it("pinning an adapter request to a worker that does not serve it finds no worker", async () => {
    const res = await post(`${stack.url}/v1/completions`, { model: 'chat-lora', prompt: 'x', max_tokens: 1 }, { 'x-worker-id': 'sql' });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('KVR_ERR_NO_WORKERS');
  });

  it("matches an adapter's own cached blocks, and never the base model's or another adapter's", async () => {
    const prompt = long('shared text under sql-lora');
    const first = await complete(stack.url, { model: 'sql-lora', prompt, max_tokens: 1 });
    expect(first.worker).toBe('sql');
    await waitFor(async () => overlapOn(await explain(stack.url, { model: 'sql-lora', prompt }), 'sql') > 0, "the sql worker's KV events under sql-lora");
    const asAdapter = await explain(stack.url, { model: 'sql-lora', prompt });
    expect(overlapOn(asAdapter, 'sql')).toBeGreaterThan(3);
    const asBase = await explain(stack.url, { model: 'mock-model', prompt });
    expect(asBase.workers.every((w) => w.overlap_blocks === 0)).toBe(true);
    const asOther = await explain(stack.url, { model: 'chat-lora', prompt });
    expect(asOther.workers.every((w) => w.overlap_blocks === 0)).toBe(true);

    const second = await complete(stack.url, { model: 'sql-lora', prompt, max_tokens: 1 });
    expect(second.worker).toBe('sql');
    expect(second.cachedTokens).toBe(asAdapter.workers.find((w) => w.worker === 'sql')!.cached_tokens);
    // The engine keeps the base model's blocks apart too: the same text on the base model reuses nothing there.
    const base = await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 1 }, { 'x-worker-id': 'sql' });
    expect(base.cachedTokens).toBe(0);
  });
});

describe('cache_salt', () => {
  it('gives tenants with the same prompt and different salts no shared overlap, and each its own', async () => {
    const prompt = long('the same system prompt for every tenant');
    const a = await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 1, cache_salt: 'tenant-a' }, { 'x-worker-id': 'base' });
    expect(a.status).toBe(200);
    const explainWith = (salt?: string) => explain(stack.url, { model: 'mock-model', prompt, ...(salt ? { cache_salt: salt } : {}) });
    await waitFor(async () => overlapOn(await explainWith('tenant-a'), 'base') > 0, "tenant-a's KV events");
    const own = await explainWith('tenant-a');
    expect(overlapOn(own, 'base')).toBeGreaterThan(3);
    expect((await explainWith('tenant-b')).workers.every((w) => w.overlap_blocks === 0)).toBe(true);
    expect((await explainWith()).workers.every((w) => w.overlap_blocks === 0)).toBe(true);

    // The engine agrees: tenant b on the same worker reuses nothing, tenant a reuses what the router expected.
    const b = await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 1, cache_salt: 'tenant-b' }, { 'x-worker-id': 'base' });
    expect(b.cachedTokens).toBe(0);
    const again = await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 1, cache_salt: 'tenant-a' });
    expect(again.worker).toBe('base');
    expect(again.cachedTokens).toBe(own.workers.find((w) => w.worker === 'base')!.cached_tokens);
  });

  it('salts adapter requests too: same adapter, different salts, no shared overlap', async () => {
    const prompt = long('salted under an adapter');
    await complete(stack.url, { model: 'sql-lora', prompt, max_tokens: 1, cache_salt: 'tenant-a' });
    await waitFor(async () => overlapOn(await explain(stack.url, { model: 'sql-lora', prompt, cache_salt: 'tenant-a' }), 'sql') > 0, 'the salted adapter blocks');
    expect((await explain(stack.url, { model: 'sql-lora', prompt, cache_salt: 'tenant-b' })).workers.every((w) => w.overlap_blocks === 0)).toBe(true);
    expect((await explain(stack.url, { model: 'sql-lora', prompt })).workers.every((w) => w.overlap_blocks === 0)).toBe(true);
  });

  it('refuses a cache_salt that is not a non-empty string with a 400 naming it', async () => {
    for (const salt of ['', 7, ['a']]) {
      const res = await post(`${stack.url}/v1/completions`, { model: 'mock-model', prompt: 'x', cache_salt: salt });
      expect(res.status).toBe(400);
      const error = ((await res.json()) as { error: { code: string; param: string } }).error;
      expect(error).toMatchObject({ code: 'KVR_ERR_INVALID_REQUEST', param: 'cache_salt' });
    }
  });
});
