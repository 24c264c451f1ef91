// KV events from engines: over ZeroMQ a sequence gap is recovered by replay
// when the engine still holds the batches, else the worker's entries are
// cleared (stale); over HTTP, numbered batches get the same gap check;
// /ready waits for every ZeroMQ subscription; counters show in /metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlockStored } from '../../router/kv-events.js';
import { refusedPort } from './refused-port.js';
import { metric, MODEL, post, startStack, waitFor, type Stack } from './stack.js';

const ids = (n: number, start: number) => Array.from({ length: n }, (_, i) => start + i);

function stored(tokens: number[], firstHash: bigint): BlockStored {
  return {
    type: 'stored',
    blockHashes: Array.from({ length: tokens.length / 16 }, (_, i) => firstHash + BigInt(i)),
    parentBlockHash: null,
    tokenIds: tokens,
    blockSize: 16,
    loraName: null,
    medium: 'GPU',
  };
}

let stack: Stack;
let silentEndpoint: string;
const overlaps = async (prompt: number[]) => {
  const x = (await (await post(`${stack.url}/router/explain`, { model: MODEL, prompt })).json()) as { workers: { worker: string; overlap_blocks: number }[] };
  return Object.fromEntries(x.workers.map((w) => [w.worker, w.overlap_blocks]));
};

beforeAll(async () => {
  silentEndpoint = `tcp://127.0.0.1:${refusedPort()}`;
  stack = await startStack({
    edit: (doc) => {
      const workers = doc.workers as { url: string }[];
      workers.push(
        { id: 'http-w', url: workers[0]!.url, model: MODEL, kv_events: { source: 'http' }, data_parallel_size: 2 } as never,
        { id: 'silent', url: workers[1]!.url, model: MODEL, kv_events: { endpoint: silentEndpoint } } as never,
      );
      doc.kv_ingest_token = 'ingest-secret';
    },
  });
});
afterAll(() => stack?.close());

describe('ZeroMQ KV events', () => {
  it('waits for every subscription before /ready says yes', async () => {
    const res = await fetch(`${stack.url}/ready`);
    expect(res.status).toBe(503);
    const body = (await res.json()) as { waiting_for_kv_events: string[] };
    await waitFor(async () => (await (await fetch(`${stack.url}/ready`)).json() as { waiting_for_kv_events: string[] }).waiting_for_kv_events.length === 1, 'the mock subscriptions');
    expect(body.waiting_for_kv_events).toContain('silent');
    expect(await metric(stack.url, 'kvrouter_kv_source_connected', { worker: 'silent' })).toBe(0);
    expect(await metric(stack.url, 'kvrouter_kv_source_connected', { worker: 'mock-0' })).toBe(1);
  });

  it('a gap the engine can no longer replay marks the worker stale and clears what the router knew of its cache', async () => {
    const prompt = ids(64, 1000);
    const res = await post(`${stack.url}/v1/completions`, { model: MODEL, prompt, max_tokens: 2 }, { 'x-worker-id': 'mock-0' });
    expect(res.status).toBe(200);
    await waitFor(async () => (await overlaps(prompt))['mock-0']! >= 3, "mock-0's stored events");
    const publisher = stack.embedded.publishers[0]!;
    // Numbers nobody published: the replay cannot fill the hole.
    await publisher.publish({ ts: 1, events: [], dpRank: 0 }, { seq: publisher.nextSeq + 4 });
    await waitFor(async () => (await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-0', type: 'stale' })) === 1, 'the stale report');
    expect((await overlaps(prompt))['mock-0']).toBe(0);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-0', type: 'gap' })).toBe(1);
  });

  it('a gap the engine still buffers is closed by replay, with nothing marked stale', async () => {
    const publisher = stack.embedded.publishers[1]!;
    const prompt = ids(48, 5000);
    // Kept in the replay ring but never sent live: the listener sees a hole at the next batch.
    await publisher.publish({ ts: 1, events: [stored(prompt, 77n)], dpRank: 0 }, { live: false });
    await publisher.publish({ ts: 2, events: [], dpRank: 0 });
    await waitFor(async () => (await overlaps(prompt))['mock-1'] === 3, 'the replayed batch');
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-1', type: 'replayed_batch' })).toBeGreaterThanOrEqual(1);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-1', type: 'stale' })).toBe(0);
  });

  it('a batch held while a replay fills the gap before it is applied after the replayed one, as published', async () => {
    const publisher = stack.embedded.publishers[1]!;
    const prompt = ids(96, 9000);
    const first = prompt.slice(0, 48);
    // The first half only in the replay ring; the second half, chained to it, live: the listener
    // holds the live batch (read first) until the replayed one (read after it) is applied.
    await publisher.publish({ ts: 3, events: [stored(first, 500n)], dpRank: 0 }, { live: false });
    const rest = { ...stored(prompt.slice(48), 600n), parentBlockHash: 502n };
    await publisher.publish({ ts: 4, events: [rest], dpRank: 0 });
    await waitFor(async () => (await overlaps(prompt))['mock-1'] === 6, 'both halves of the prompt');
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'mock-1', type: 'stale' })).toBe(0);
  });
});

describe('HTTP KV ingest', () => {
  const ingest = (body: unknown, token = 'ingest-secret') => post(`${stack.url}/router/kv-events`, body, { authorization: `Bearer ${token}` });
  const storedJson = (tokens: number[], first: number) => ({
    type: 'stored',
    block_hashes: Array.from({ length: tokens.length / 16 }, (_, i) => String(first + i)),
    parent_block_hash: null,
    token_ids: tokens,
    block_size: 16,
    medium: 'GPU',
  });

  it('applies posted events per rank and clears a rank whose numbered batches skip', async () => {
    const prompt = ids(32, 9000);
    expect((await ingest({ worker_id: 'http-w', dp_rank: 1, seq: 0, events: [storedJson(prompt, 1)] })).status).toBe(200);
    expect((await overlaps(prompt))['http-w#1']).toBe(2);
    expect((await overlaps(prompt))['http-w']).toBe(0);
    expect((await ingest({ worker_id: 'http-w', dp_rank: 1, seq: 1, events: [] })).status).toBe(200);
    expect((await ingest({ worker_id: 'http-w', dp_rank: 1, seq: 3, events: [] })).status).toBe(200);
    expect((await overlaps(prompt))['http-w#1']).toBe(0);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'http-w', type: 'gap' })).toBe(1);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { worker: 'http-w', type: 'stored' })).toBe(1);
  });

  it('refuses bad callers and bodies with errors that name the problem', async () => {
    expect((await ingest({ worker_id: 'http-w', events: [] }, 'wrong-token')).status).toBe(401);
    const bad = await ingest({ worker_id: 'http-w', events: [{ type: 'stored', block_hashes: ['x'] }] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/events\[0\]\.block_hashes/);
    expect((await ingest({ worker_id: 'nobody', events: [] })).status).toBe(404);
    const zmq = await ingest({ worker_id: 'mock-0', events: [] });
    expect(zmq.status).toBe(400);
    expect(((await zmq.json()) as { error: { message: string } }).error.message).toMatch(/not configured for HTTP KV events/);
    const rank = await ingest({ worker_id: 'http-w', dp_rank: 2, events: [] });
    expect(((await rank.json()) as { error: { param: string } }).error.param).toBe('dp_rank');
  });
});
