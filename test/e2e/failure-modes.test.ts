// The failure modes users of other routers hit, each checked against the
// live router: hot-spotting on a cached prefix, the cache-miss death spiral
// (misses sent by cache contents instead of load), and index memory that
// grows without bound.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, MODEL, post, settled, startStack, waitFor, type Stack } from './stack.js';

const SHARED = 'You are the support assistant of a large shop. '.repeat(30);

async function served(url: string, body: unknown, headers: Record<string, string> = {}): Promise<string> {
  const res = await post(`${url}/v1/chat/completions`, body, headers);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return res.headers.get('x-kvrouter-worker')!;
}

function counts(workers: string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const w of workers) out.set(w, (out.get(w) ?? 0) + 1);
  return out;
}

describe('cache stickiness and load', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ workers: 3, speedup: 5 });
  });
  afterAll(() => stack?.close());

  it('spreads a burst of requests that share a cached prefix instead of piling them on the worker that holds it', async () => {
    const holder = await served(stack.url, chat([{ role: 'system', content: SHARED }, { role: 'user', content: 'warm-up' }]), { 'x-worker-id': 'mock-1' });
    expect(holder).toBe('mock-1');
    const probe = chat([{ role: 'system', content: SHARED }, { role: 'user', content: 'probe' }]);
    await waitFor(async () => {
      const x = (await (await post(`${stack.url}/router/explain`, probe)).json()) as { workers: { worker: string; overlap_blocks: number }[] };
      return x.workers.find((w) => w.worker === 'mock-1')!.overlap_blocks > 10;
    }, 'the shared prefix to be indexed');
    const burst = await Promise.all(
      Array.from({ length: 24 }, (_, i) => served(stack.url, chat([{ role: 'system', content: SHARED }, { role: 'user', content: `question ${i}` }], { max_tokens: 32 }))),
    );
    const byWorker = counts(burst);
    // The cached worker is worth the most to each request, until the load booked on it outweighs
    // the prefill it saves: then the rest of the burst goes to the other workers.
    expect(byWorker.get('mock-1')!).toBeGreaterThanOrEqual(Math.max(...[...byWorker.values()]));
    expect(byWorker.get('mock-1')!).toBeLessThan(20);
    expect(byWorker.get('mock-0')).toBeGreaterThan(0);
    expect(byWorker.get('mock-2')).toBeGreaterThan(0);
    await waitFor(() => settled(stack.model), 'the burst to settle');
  });

  it('sends cache misses to the least loaded worker, not to the one with the emptiest cache', async () => {
    // A miss has no overlap anywhere, so only load can tell the workers apart: mock-0 is busy with long streams.
    const busy = Array.from({ length: 3 }, (_, i) =>
      post(`${stack.url}/v1/chat/completions`, chat(`long job ${i}: ${'summarise the archive '.repeat(20)}`, { stream: true, max_tokens: 400 }), {
        'x-worker-id': 'mock-0',
      }).then((r) => r.arrayBuffer()),
    );
    await waitFor(() => stack.model.route.fleet.load().find((l) => l.worker === 'mock-0')!.activeRequests === 3, 'mock-0 to be busy');
    const misses: string[] = [];
    for (let i = 0; i < 6; i++) misses.push(await served(stack.url, chat(`a cold question nobody asked before, number ${i}`)));
    expect(misses).not.toContain('mock-0');
    await Promise.all(busy);
  });
});

describe('index memory stays bounded', () => {
  it('approximate mode keeps at most approximate.max_blocks routed blocks', async () => {
    const stack = await startStack({
      edit: (doc) => {
        for (const w of doc.workers as Record<string, unknown>[]) delete w.kv_events;
        (doc.models as Record<string, unknown>[])[0]!.approximate = { max_blocks: 40 };
      },
    });
    try {
      for (let i = 0; i < 30; i++) await served(stack.url, { model: MODEL, messages: [{ role: 'user', content: `${i} `.repeat(200) }], max_tokens: 1 });
      const routed = await metric(stack.url, 'kvrouter_prefix_index', { stat: 'routed_blocks' });
      expect(routed).toBeGreaterThan(0);
      expect(routed).toBeLessThanOrEqual(40);
    } finally {
      await stack.close();
    }
  });

  it("event mode holds no more blocks than the engines' caches, as evictions arrive as removals", async () => {
    const stack = await startStack({ numBlocks: 64 });
    try {
      for (let i = 0; i < 24; i++) await served(stack.url, { model: MODEL, messages: [{ role: 'user', content: `${i} `.repeat(300) }], max_tokens: 1 });
      await waitFor(async () => (await metric(stack.url, 'kvrouter_kv_events_total', { type: 'removed' })) > 0, 'evictions');
      const cached = stack.embedded.fleet.engines.reduce((n, e) => n + e.stats().cachedBlocks, 0);
      await waitFor(async () => (await metric(stack.url, 'kvrouter_prefix_index', { stat: 'blocks' })) === cached, 'the index to match the engines');
      expect(cached).toBeLessThanOrEqual(2 * 64);
    } finally {
      await stack.close();
    }
  });
});
