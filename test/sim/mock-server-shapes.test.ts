// The mock server as vLLM runs in production fleets: data-parallel ranks with
// their own caches behind one URL (X-Data-Parallel-Rank, or the engine's own
// balancer), LoRA adapters served under their own model names, and cache
// salts; each visible in the KV events it publishes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlockStored, KvEventBatch } from '../../router/kv-events.js';
import { startMockServer, type MockServer } from '../../sim/mocker/http-server.js';
import { waitFor } from '../helpers/wait.js';
import { postJson } from './mock-server-fixtures.js';

type Json = Record<string, any>;

let mock: MockServer;
const batches: KvEventBatch[] = [];
beforeAll(async () => {
  mock = await startMockServer({ dataParallelSize: 2, adapters: ['sql'], engine: { blockSize: 4, speedup: 200, onEvents: (b) => batches.push(b) } });
});
afterAll(() => mock.close());

const ids = (n: number, start: number) => Array.from({ length: n }, (_, i) => start + i);
const complete = async (body: Json, headers: Record<string, string> = {}) => {
  const res = await postJson(`${mock.url}/v1/completions`, { max_tokens: 1, ...body }, headers);
  return { status: res.status, body: (await res.json()) as Json };
};
const cached = (r: { body: Json }) => r.body.usage.prompt_tokens_details.cached_tokens as number;
const storedSince = (mark: number) => batches.slice(mark).flatMap((b) => b.events.filter((e): e is BlockStored => e.type === 'stored').map((e) => ({ rank: b.dpRank, e })));

describe('data-parallel ranks', () => {
  it('runs a request on the rank X-Data-Parallel-Rank names, and publishes its events as that rank', async () => {
    const before = mock.ranks.map((e) => e.stats().completed);
    const mark = batches.length;
    expect((await complete({ prompt: ids(8, 100) }, { 'x-data-parallel-rank': '1' })).status).toBe(200);
    expect(mock.ranks.map((e, r) => e.stats().completed - before[r]!)).toEqual([0, 1]);
    expect(storedSince(mark).map((s) => s.rank)).toEqual([1]);
  });

  it('keeps a cache per rank', async () => {
    await complete({ prompt: ids(12, 200) }, { 'x-data-parallel-rank': '1' });
    expect(cached(await complete({ prompt: ids(12, 200) }, { 'x-data-parallel-rank': '0' }))).toBe(0);
    expect(cached(await complete({ prompt: ids(12, 200) }, { 'x-data-parallel-rank': '1' }))).toBe(8);
  });

  it('refuses a rank it does not have, or one that is not a number, with a 400', async () => {
    for (const rank of ['2', 'one', '-1', '']) {
      const r = await complete({ prompt: ids(4, 1) }, { 'x-data-parallel-rank': rank });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain('X-Data-Parallel-Rank must be a rank in 0..1');
    }
  });

  it('without the header, runs the request on the rank with fewer requests in it', async () => {
    const slow = await startMockServer({ dataParallelSize: 2, engine: { blockSize: 4 } });
    try {
      const controller = new AbortController();
      const long = await fetch(`${slow.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: ids(8, 1), max_tokens: 20_000, stream: true }),
        headers: { 'x-data-parallel-rank': '0' },
        signal: controller.signal,
      });
      await waitFor(() => slow.ranks[0]!.stats().running === 1, 'the long request running on rank 0');
      const r = await postJson(`${slow.url}/v1/completions`, { prompt: ids(8, 50), max_tokens: 1 });
      expect(r.status).toBe(200);
      expect(slow.ranks[1]!.stats().completed).toBe(1);
      controller.abort();
      await long.body?.cancel().catch(() => {});
    } finally {
      await slow.close();
    }
  });

  it("reports a rank's counters at /mock/stats?rank=r", async () => {
    const stats = (await (await fetch(`${mock.url}/mock/stats?rank=1`)).json()) as Json;
    expect(stats.completed).toBe(mock.ranks[1]!.stats().completed);
    expect((await fetch(`${mock.url}/mock/stats?rank=2`)).status).toBe(400);
  });
});

describe('LoRA adapters and cache salts', () => {
  it('lists each adapter with its base model', async () => {
    const models = (await (await fetch(`${mock.url}/v1/models`)).json()) as Json;
    expect(models.data.map((m: Json) => [m.id, m.parent ?? null])).toEqual([
      ['mock-model', null],
      ['sql', 'mock-model'],
    ]);
  });

  it("publishes an adapter's blocks with lora_name and the adapter in every block's extra keys, the salt in the first's", async () => {
    const mark = batches.length;
    await complete({ model: 'sql', prompt: ids(12, 300), cache_salt: 'tenant-a' }, { 'x-data-parallel-rank': '0' });
    const [stored] = storedSince(mark);
    expect(stored!.e).toMatchObject({ loraName: 'sql', parentBlockHash: null, extraKeys: [['sql', 'tenant-a'], ['sql'], ['sql']] });
    const salted = batches.length;
    await complete({ prompt: ids(8, 400), cache_salt: 'tenant-b' }, { 'x-data-parallel-rank': '0' });
    expect(storedSince(salted)[0]!.e).toMatchObject({ loraName: null, extraKeys: [['tenant-b'], null] });
    const plain = batches.length;
    await complete({ prompt: ids(8, 500) }, { 'x-data-parallel-rank': '0' });
    expect('extraKeys' in storedSince(plain)[0]!.e).toBe(false);
  });

  it('caches an adapter\'s and a salt\'s blocks for the same adapter and salt only', async () => {
    const prompt = ids(12, 600);
    const on0 = { 'x-data-parallel-rank': '0' };
    await complete({ model: 'sql', prompt }, on0);
    expect(cached(await complete({ model: 'sql', prompt }, on0))).toBe(8);
    expect(cached(await complete({ prompt }, on0))).toBe(0);
    await complete({ prompt, cache_salt: 'a' }, on0);
    expect(cached(await complete({ prompt, cache_salt: 'a' }, on0))).toBe(8);
    expect(cached(await complete({ prompt, cache_salt: 'b' }, on0))).toBe(0);
  });

  it('refuses a cache_salt that is not a non-empty string, naming it', async () => {
    for (const salt of ['', 3]) {
      const r = await complete({ prompt: ids(4, 1), cache_salt: salt });
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe('cache_salt');
    }
  });
});
