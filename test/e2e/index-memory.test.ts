// The prefix index at its memory bound and when it cannot store an event,
// over real HTTP and ZeroMQ: evictions show in /metrics and /router/explain;
// a batch the core cannot store leaves the worker cleared and its stream
// stale, and over ZeroMQ the stream is resynchronised from the engine's
// replay buffer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlockStored } from '../../router/kv-events.js';
import { metric, MODEL, post, startStack, waitFor, type Stack } from './stack.js';

interface Explained {
  index_evicted_blocks: number;
  workers: { worker: string; overlap_blocks: number; evicted_blocks: number; overlap_may_be_underestimated: boolean }[];
}

let stack: Stack;
const explain = async (prompt: number[]) => (await (await post(`${stack.url}/router/explain`, { model: MODEL, prompt })).json()) as Explained;
const overlap = async (prompt: number[], worker: string) => (await explain(prompt)).workers.find((w) => w.worker === worker)!.overlap_blocks;
const ingest = (body: unknown) => post(`${stack.url}/router/kv-events`, body);
const failNextAllocation = () => stack.model.route.fleet.core!.kernel<{ coreFailAllocation(after: number, trap: boolean): void }>().coreFailAllocation(0, false);

/** A stored event of `blocks` blocks of 16 tokens, token and hash values from `first`. */
function stored(blocks: number, first: number): BlockStored {
  return {
    type: 'stored',
    blockHashes: Array.from({ length: blocks }, (_, i) => BigInt(first + i)),
    parentBlockHash: null,
    tokenIds: Array.from({ length: blocks * 16 }, (_, i) => first + i),
    blockSize: 16,
    loraName: null,
    medium: 'GPU',
  };
}

const storedJson = (blocks: number, first: number) => {
  const e = stored(blocks, first);
  return { type: 'stored', block_hashes: e.blockHashes.map(String), parent_block_hash: null, token_ids: e.tokenIds, block_size: 16, medium: 'GPU' };
};

beforeAll(async () => {
  stack = await startStack({
    edit: (doc) => {
      const workers = doc.workers as { url: string }[];
      workers.push({ id: 'http-w', url: workers[0]!.url, model: MODEL, kv_events: { source: 'http' } } as never);
      (doc.models as Record<string, unknown>[])[0]!.index_memory_bytes = 1 << 21;
    },
  });
  await waitFor(async () => (await fetch(`${stack.url}/ready`)).status === 200, 'the router to be ready');
});
afterAll(() => stack?.close());

describe('the prefix index at its memory bound', () => {
  it('forgets the coldest blocks past the bound and says so in /metrics and /router/explain', async () => {
    expect(await metric(stack.url, 'kvrouter_prefix_index', { stat: 'bound_bytes' })).toBe(1 << 21);
    const first = Array.from({ length: 32 * 16 }, (_, i) => 1_000_000 + i);
    expect((await ingest({ worker_id: 'http-w', seq: 0, events: [storedJson(32, 1_000_000)] })).status).toBe(200);
    expect(await overlap(first, 'http-w')).toBe(32);
    // 80,000 more blocks of its own: about 4 MiB at some 50 bytes each.
    for (let seq = 1; seq <= 80; seq++) {
      expect((await ingest({ worker_id: 'http-w', seq, events: [storedJson(1000, 2_000_000 + seq * 1000)] })).status).toBe(200);
    }
    expect(await metric(stack.url, 'kvrouter_prefix_index_evicted_blocks_total')).toBeGreaterThan(30_000);
    expect(await metric(stack.url, 'kvrouter_prefix_index', { stat: 'bytes' })).toBeLessThan(1.5 * (1 << 21));
    const x = await explain(first);
    expect(x.index_evicted_blocks).toBeGreaterThan(30_000);
    const http = x.workers.find((w) => w.worker === 'http-w')!;
    // The oldest blocks went first: the first event's are gone, and explain says the overlap may be more.
    expect(http).toMatchObject({ overlap_blocks: 0, overlap_may_be_underestimated: true });
    expect(http.evicted_blocks).toBeGreaterThan(30_000);
    expect(x.workers.find((w) => w.worker === 'mock-0')).toMatchObject({ evicted_blocks: 0, overlap_may_be_underestimated: false });
  });
});

describe('an event the index cannot store', () => {
  it('over HTTP: the worker is cleared, its stream marked stale, the failure counted', async () => {
    const stale = await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'http-w', type: 'stale' });
    const kept = Array.from({ length: 8 * 16 }, (_, i) => 5_000_000 + i);
    expect((await ingest({ worker_id: 'http-w', seq: 81, events: [storedJson(8, 5_000_000)] })).status).toBe(200);
    expect(await overlap(kept, 'http-w')).toBe(8);
    failNextAllocation();
    // 5,000 new blocks: the worker's id table must grow, and that allocation fails.
    expect((await ingest({ worker_id: 'http-w', seq: 82, events: [storedJson(5000, 6_000_000)] })).status).toBe(200);
    expect(await overlap(kept, 'http-w')).toBe(0);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'http-w', type: 'stale' })).toBe(stale + 1);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'http-w', type: 'index_failure' })).toBe(1);
    expect(await metric(stack.url, 'kvrouter_prefix_index_failures_total')).toBe(1);
    // The stream goes on: the next batch is applied on the cleared worker.
    expect((await ingest({ worker_id: 'http-w', seq: 83, events: [storedJson(8, 5_000_000)] })).status).toBe(200);
    expect(await overlap(kept, 'http-w')).toBe(8);
  });

  it('over ZeroMQ: the stream is resynchronised from the engine replay buffer, restoring the worker', async () => {
    const publisher = stack.embedded.publishers[0]!;
    const before = Array.from({ length: 6 * 16 }, (_, i) => 7_000_000 + i);
    await publisher.publish({ ts: 1, events: [stored(6, 7_000_000)], dpRank: 0 });
    await waitFor(async () => (await overlap(before, 'mock-0')) === 6, "mock-0's batch");
    failNextAllocation();
    await publisher.publish({ ts: 2, events: [stored(5000, 8_000_000)], dpRank: 0 });
    await waitFor(async () => (await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-0', type: 'resync' })) === 1, 'the resync');
    // The replay from 0 brings back both batches; the failure was one allocation only.
    const big = Array.from({ length: 5000 * 16 }, (_, i) => 8_000_000 + i).slice(0, 64 * 16);
    await waitFor(async () => (await overlap(big, 'mock-0')) === 64, 'the replayed big batch');
    expect(await overlap(before, 'mock-0')).toBe(6);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-0', type: 'index_failure' })).toBe(1);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-0', type: 'stale' })).toBe(1);
  });
});
