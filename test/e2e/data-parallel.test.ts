// Data-parallel ranks end to end: one `kvrouter mock` worker runs two ranks,
// each its own engine and KV cache, publishing its events on port + rank as
// vLLM does; the router places, books and matches per rank, and sends the
// rank it chose in X-Data-Parallel-Rank, so the rank that cached a prefix is
// the rank that serves the next request for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { complete, explain, overlapOn, startMockCommandStack, type MockCommandStack } from './mock-command-stack.js';

let stack: MockCommandStack;
beforeAll(async () => {
  stack = await startMockCommandStack({ workers: 1, dataParallelSize: 2 }, ({ urls, eventPort, replayPort }) => ({
    models: [{ name: 'mock-model', tokenizer: 'bytes', block_size: 16 }],
    workers: [
      {
        id: 'dp',
        url: urls[0],
        data_parallel_size: 2,
        kv_events: { endpoint: `tcp://127.0.0.1:${eventPort}`, replay_endpoint: `tcp://127.0.0.1:${replayPort}`, topic: 'kv-events' },
      },
    ],
  }));
});
afterAll(() => stack?.close());

const completed = (rank: number) => stack.fleet.ranks[0]![rank]!.stats().completed;

describe('data-parallel ranks', () => {
  it("runs a request on the rank the router chose, whatever rank the client's own header names", async () => {
    const before = [completed(0), completed(1)];
    const r = await complete(stack.url, { model: 'mock-model', prompt: 'rank one, by pin '.repeat(8), max_tokens: 2 }, { 'x-worker-id': 'dp#1', 'x-data-parallel-rank': '0' });
    expect(r.status).toBe(200);
    expect(r.worker).toBe('dp#1');
    // Left to itself the engine would have taken its idle rank 0.
    expect([completed(0) - before[0]!, completed(1) - before[1]!]).toEqual([0, 1]);
  });

  it('indexes each rank from its own event port and sends the next request for a prefix to the rank that holds it', async () => {
    const prompt = 'a prefix that only rank one has seen, long enough for several sixteen-token blocks of bytes. '.repeat(4);
    const first = await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 2 }, { 'x-worker-id': 'dp#1' });
    expect(first.worker).toBe('dp#1');
    const again = { model: 'mock-model', prompt, max_tokens: 2 };
    await waitFor(async () => overlapOn(await explain(stack.url, again), 'dp#1') > 0, "rank 1's KV events");
    const x = await explain(stack.url, again);
    expect(overlapOn(x, 'dp')).toBe(0);
    expect(x.chosen).toBe('dp#1');

    const second = await complete(stack.url, again);
    expect(second.worker).toBe('dp#1');
    // The engine's rank 1 reused what the router expected it to hold.
    expect(second.cachedTokens).toBe(x.workers.find((w) => w.worker === 'dp#1')!.cached_tokens);
    expect(second.cachedTokens).toBeGreaterThan(0);
  });

  it("keeps the ranks' caches apart in the engine: the same prompt on rank 0 computes everything", async () => {
    const prompt = 'cached on rank one only, then asked of rank zero by pin. '.repeat(5);
    await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 2 }, { 'x-worker-id': 'dp#1' });
    const other = await complete(stack.url, { model: 'mock-model', prompt, max_tokens: 2 }, { 'x-worker-id': 'dp' });
    expect(other.worker).toBe('dp');
    expect(other.cachedTokens).toBe(0);
  });
});
