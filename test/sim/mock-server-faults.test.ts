import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../router/kv-events.js';
import { startMockFleet, startMockServer, type MockServer } from '../../sim/mocker/http-server.js';
import { waitFor } from '../helpers/wait.js';
import { delayedMarker, postJson, readStream, sseEvents } from './mock-server-fixtures.js';

type Json = Record<string, any>;

let mock: MockServer;
beforeAll(async () => {
  mock = await startMockServer({ engine: { blockSize: 16, speedup: 100 } });
});
afterAll(() => mock.close());

const quiet = (m: MockServer) => m.engine.stats().running === 0 && m.engine.stats().activeBlocks === 0;

describe('mock server: fault injection', () => {
  it('x-mock-status answers with that status and an error body, and never reaches the engine', async () => {
    const before = mock.engine.stats().admittedPromptTokens;
    for (const stream of [false, true]) {
      const res = await postJson(`${mock.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], stream }, { 'x-mock-status': '503' });
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toBe('application/json');
      const body = (await res.json()) as Json;
      expect(body.error).toMatchObject({ type: 'server_error', code: 'mock_status' });
    }
    const tooMany = await postJson(`${mock.url}/v1/completions`, { prompt: 'x' }, { 'x-mock-status': '429' });
    expect(tooMany.status).toBe(429);
    expect(((await tooMany.json()) as Json).error.type).toBe('rate_limit_error');
    // The mock answers the status before it would hand the prompt to the engine, so with the answers in, nothing is left to reach it.
    expect(mock.engine.stats().admittedPromptTokens).toBe(before);
  });

  it('x-mock-disconnect-after destroys the stream after n tokens and frees the engine request', async () => {
    for (const n of [0, 3]) {
      const res = await postJson(`${mock.url}/v1/completions`, { prompt: 'disconnect me', max_tokens: 50, stream: true }, { 'x-mock-disconnect-after': String(n) });
      expect(res.status).toBe(200);
      const { text, broken } = await readStream(res);
      expect(broken).toBe(true);
      expect(sseEvents(text)).toHaveLength(n);
      await waitFor(() => quiet(mock), 'the engine to go quiet');
    }
    expect(mock.engine.stats().aborted).toBe(2);
  });

  it('x-mock-disconnect-after on a non-streaming request drops the connection without a response', async () => {
    await expect(
      postJson(`${mock.url}/v1/completions`, { prompt: 'drop', max_tokens: 20 }, { 'x-mock-disconnect-after': '2' }),
    ).rejects.toThrow();
    await waitFor(() => quiet(mock), 'the engine to go quiet');
  });

  it('x-mock-header-delay-ms holds the response headers back', async () => {
    const started = Date.now();
    const res = await postJson(`${mock.url}/v1/completions`, { prompt: 'slow', max_tokens: 1 }, { 'x-mock-header-delay-ms': '150' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(145);
    expect(res.status).toBe(200);
    await res.json();
  });

  it('a client that leaves during the header delay never reaches the engine', async () => {
    const before = mock.engine.stats().admittedPromptTokens;
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    const request = fetch(`${mock.url}/v1/completions`, {
      method: 'POST',
      body: '{"prompt":"gone","max_tokens":5}',
      headers: { 'x-mock-header-delay-ms': '120' },
      signal: controller.signal,
    });
    await expect(request).rejects.toThrow();
    // Out of its delay after the one that left: only the marker's three tokens reach the engine.
    await delayedMarker(mock.url, 120, [1, 2, 3]);
    expect(mock.engine.stats().admittedPromptTokens).toBe(before + 3);
  });

  it('a malformed fault header is a 400 naming it', async () => {
    const res = await postJson(`${mock.url}/v1/completions`, { prompt: 'x' }, { 'x-mock-status': '200' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.param).toBe('x-mock-status');
  });
});

describe('mock server: engine coupling', () => {
  it('client disconnect frees the engine request and its blocks', async () => {
    const slow = await startMockServer({ engine: { blockSize: 16 } });
    try {
      const controller = new AbortController();
      const res = await fetch(`${slow.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'a long answer that the client will not wait for', max_tokens: 5000, stream: true }),
        signal: controller.signal,
      });
      const reader = res.body!.getReader();
      await reader.read(); // at least the first token chunk
      expect(slow.engine.stats().running).toBe(1);
      expect(slow.engine.stats().activeBlocks).toBeGreaterThan(0);
      controller.abort();
      await waitFor(() => quiet(slow), 'the engine to go quiet');
      expect(slow.engine.stats().aborted).toBe(1);
      expect(slow.engine.stats().completed).toBe(0);
    } finally {
      await slow.close();
    }
  });

  it('SSE pacing follows the engine: one chunk per engine step, and concurrent streams share steps', async () => {
    const paced = await startMockServer({ engine: { blockSize: 16, speedup: 50 } });
    try {
      const one = await postJson(`${paced.url}/v1/completions`, { prompt: 'pace one', max_tokens: 12, stream: true });
      expect(sseEvents(await one.text())).toHaveLength(13);
      // Prefill step + 11 decode steps, one token each.
      expect(paced.engine.stats().steps).toBe(12);
      const both = await Promise.all(
        ['pace two', 'pace three'].map((prompt) => postJson(`${paced.url}/v1/completions`, { prompt, max_tokens: 12, stream: true })),
      );
      for (const res of both) expect(sseEvents(await res.text())).toHaveLength(13);
      // 24 tokens in far fewer than 24 more steps: the two requests were batched.
      expect(paced.engine.stats().steps - 12).toBeLessThan(20);
    } finally {
      await paced.close();
    }
  });

  it('a fleet runs one engine per worker and routes each worker\'s events to its sink', async () => {
    const events: [number, KvEventBatch][] = [];
    const fleet = await startMockFleet({ workers: 3, engine: { blockSize: 4, speedup: 100 }, onEvents: (w, b) => events.push([w, b]) });
    try {
      expect(new Set(fleet.urls).size).toBe(3);
      const res = await postJson(`${fleet.urls[1]}/v1/completions`, { prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens: 2 });
      expect(res.status).toBe(200);
      await res.json();
      expect(events.map(([w]) => w)).toEqual([1]);
      expect(events[0]![1].events[0]).toMatchObject({ type: 'stored', tokenIds: new Uint32Array([1, 2, 3, 4, 5, 6, 7, 8]), medium: 'GPU' });
      expect(fleet.engines.map((e) => e.stats().completed)).toEqual([0, 1, 0]);
    } finally {
      await fleet.close();
    }
  });

  it('a fleet on a base port takes consecutive ports', async () => {
    // A free port's neighbour may belong to another suite running beside this one: probe again then.
    let fleet: Awaited<ReturnType<typeof startMockFleet>> | undefined;
    let base = 0;
    for (let attempt = 0; fleet === undefined; attempt++) {
      const probe = await startMockServer();
      base = probe.port;
      await probe.close();
      try {
        fleet = await startMockFleet({ workers: 2, basePort: base });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 20) throw error;
      }
    }
    try {
      expect(fleet.servers.map((s) => s.port)).toEqual([base, base + 1]);
    } finally {
      await fleet.close();
    }
  });

  it('resetting the prefix cache over HTTP clears it', async () => {
    await (await postJson(`${mock.url}/v1/completions`, { prompt: 'cache me please, sixteen bytes at least', max_tokens: 1 })).json();
    await waitFor(() => quiet(mock), 'the engine to go quiet');
    expect(mock.engine.stats().cachedBlocks).toBeGreaterThan(0);
    const res = await fetch(`${mock.url}/reset_prefix_cache`, { method: 'POST' });
    expect(await res.json()).toEqual({ reset: true });
    expect(mock.engine.stats().cachedBlocks).toBe(0);
    const stats = (await (await fetch(`${mock.url}/mock/stats`)).json()) as Json;
    expect(stats.cachedBlocks).toBe(0);
  });
});
