// Safe defaults: the embedded setup listens on loopback unless told
// otherwise; KV events over HTTP are refused beyond loopback without a token
// (at start-up for configured workers, per request for workers added at
// runtime); and every ingest call and every HTTP-fed worker is capped in
// blocks, so no caller can grow the index without bound.
import type { AddressInfo } from 'node:net';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve } from '../../server/cli/serve.js';
import { configFromDocument } from '../../server/config/load.js';
import type { RunningRouter } from '../../server/server.js';
import { startBareRouter } from './bare-router.js';
import { metric, MODEL, post, startStack, type Stack } from './stack.js';

const quiet = () => {};
const boundTo = (router: RunningRouter) => (router.app.server.address() as AddressInfo).address;

describe('kvrouter serve binds', () => {
  it('to loopback for the embedded setup (no config), to HOST when it is set', async () => {
    const served = await serve({ mockWorkers: 1, mockSpeedup: 20, replicas: 1, port: 0 }, { KVROUTER_LOG_LEVEL: 'silent' }, quiet);
    try {
      expect(boundTo(served.router)).toBe('127.0.0.1');
    } finally {
      await served.close();
    }
    const open = await serve({ mockWorkers: 1, mockSpeedup: 20, replicas: 1, port: 0 }, { KVROUTER_LOG_LEVEL: 'silent', HOST: '0.0.0.0' }, quiet);
    try {
      expect(boundTo(open.router)).toBe('0.0.0.0');
    } finally {
      await open.close();
    }
  });

  it('to the configured host for a config file, all interfaces by default', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvrouter-bind-'));
    const file = join(dir, 'router.yaml');
    await writeFile(file, 'log_level: silent\nworkers:\n  - { id: w0, url: "http://127.0.0.1:9", model: m }\n');
    const served = await serve({ config: file, mockWorkers: 1, mockSpeedup: 1, replicas: 1, port: 0 }, {}, quiet);
    try {
      expect(boundTo(served.router)).toBe('0.0.0.0');
    } finally {
      await served.close();
    }
  });
});

/** Blocks first..first+blocks-1 of one chain (engine ids = block numbers), under block first-1 unless `root`. */
const storedJson = (first: number, blocks: number, root = first === 1) => ({
  type: 'stored',
  block_hashes: Array.from({ length: blocks }, (_, i) => String(first + i)),
  parent_block_hash: root ? null : String(first - 1),
  token_ids: Array.from({ length: blocks * 16 }, (_, i) => first * 16 + i),
  block_size: 16,
  medium: 'GPU',
});

async function overlapOf(url: string, worker: string, prompt: number[]): Promise<number> {
  const x = (await (await post(`${url}/router/explain`, { model: MODEL, prompt })).json()) as { workers: { worker: string; overlap_blocks: number }[] };
  return x.workers.find((w) => w.worker === worker)!.overlap_blocks;
}

describe('KV events over HTTP beyond loopback without a token', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      edit: (doc) => {
        doc.host = '0.0.0.0';
        doc.admin_token = 'admin-secret';
      },
    });
  });
  afterAll(() => stack?.close());

  it('are refused with a 403, so a worker added at runtime cannot have its cache rewritten by anyone', async () => {
    const url = stack.url;
    const added = await post(`${url}/admin/workers`, { id: 'late', url: 'http://127.0.0.1:9', model: MODEL, kv_events: { source: 'http' } }, { authorization: 'Bearer admin-secret' });
    expect(added.status).toBe(201);
    const prompt = Array.from({ length: 64 }, (_, i) => 16 + i);
    const res = await post(`${url}/router/kv-events`, { worker_id: 'late', events: [storedJson(1, 4)] });
    expect(res.status).toBe(403);
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error).toMatchObject({ code: 'KVR_ERR_INGEST_FORBIDDEN', type: 'permission_error' });
    expect(body.error.message).toMatch(/kv_ingest_token/);
    expect(await overlapOf(url, 'late', prompt)).toBe(0);
  });

  it('are refused at start-up for a configured HTTP source, naming the fields', () => {
    expect(() => configFromDocument({ host: '0.0.0.0', workers: [{ id: 'w', url: 'http://10.0.0.5:8000', model: 'm', kv_events: { source: 'http' } }] })).toThrow(
      /^kv_ingest_token: is required: host "0\.0\.0\.0" is not a loopback address and workers\[0\]\.kv_events\.source is http/,
    );
  });
});

describe('KV ingest caps', () => {
  let router: RunningRouter;
  let url: string;
  const ingest = (body: unknown) => post(`${url}/router/kv-events`, body);
  const indexBlocks = () => metric(url, 'kvrouter_prefix_index', { stat: 'blocks' });

  beforeAll(async () => {
    router = await startBareRouter({
      limits: { kv_ingest_max_blocks_per_call: 8, kv_ingest_max_blocks_per_worker: 20 },
      workers: [
        { id: 'h0', url: 'http://127.0.0.1:9', model: MODEL, kv_events: { source: 'http' } },
        { id: 'h1', url: 'http://127.0.0.1:9', model: MODEL, kv_events: { source: 'http' } },
      ],
    });
    url = router.url;
  });
  afterAll(() => router?.close());

  async function expectLimit(res: Response, limit: string): Promise<void> {
    expect(res.status).toBe(413);
    const body = (await res.json()) as { error: { code: string; type: string; limit: string; param: string; message: string } };
    expect(body.error).toMatchObject({ code: 'KVR_ERR_KV_EVENTS_LIMIT', type: 'invalid_request_error', limit, param: 'events' });
  }

  it('a call listing more block hashes than the per-call cap is a 413 and changes nothing', async () => {
    await expectLimit(await ingest({ worker_id: 'h0', events: [storedJson(1, 5), { type: 'removed', block_hashes: ['1', '2', '3', '4'] }] }), 'blocks_per_call');
    expect(await indexBlocks()).toBe(0);
    expect((await ingest({ worker_id: 'h0', events: [storedJson(1, 8)] })).status).toBe(200);
    expect(await indexBlocks()).toBe(8);
  });

  it('a worker cannot be fed more blocks than the per-worker cap; removals and clears make room again', async () => {
    expect((await ingest({ worker_id: 'h0', events: [storedJson(9, 8)] })).status).toBe(200);
    // 16 held: 8 more would make 24 > 20.
    await expectLimit(await ingest({ worker_id: 'h0', events: [storedJson(17, 8)] }), 'blocks_per_worker');
    expect(await indexBlocks()).toBe(16);
    // Storing blocks it already holds grows nothing and is counted as such.
    expect((await ingest({ worker_id: 'h0', events: [storedJson(13, 4)] })).status).toBe(200);
    expect((await ingest({ worker_id: 'h0', events: [storedJson(17, 4)] })).status).toBe(200);
    expect(await indexBlocks()).toBe(20);
    await expectLimit(await ingest({ worker_id: 'h0', events: [storedJson(21, 1)] }), 'blocks_per_worker');
    // The cap is per worker: another worker has its own.
    expect((await ingest({ worker_id: 'h1', events: [storedJson(1, 8)] })).status).toBe(200);
    expect(await indexBlocks()).toBe(28);
    expect((await ingest({ worker_id: 'h0', events: [{ type: 'removed', block_hashes: ['17', '18', '19', '20'] }] })).status).toBe(200);
    expect((await ingest({ worker_id: 'h0', events: [storedJson(17, 4)] })).status).toBe(200);
    expect((await ingest({ worker_id: 'h0', events: [{ type: 'cleared' }] })).status).toBe(200);
    expect(await indexBlocks()).toBe(8);
    expect((await ingest({ worker_id: 'h0', events: [storedJson(1, 8)] })).status).toBe(200);
    expect((await ingest({ worker_id: 'h0', events: [storedJson(9, 8)] })).status).toBe(200);
    expect(await indexBlocks()).toBe(24);
  });

  it('200 posts cannot grow the index past the caps', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++) {
      const res = await ingest({ worker_id: 'h1', events: [storedJson(1000 + i * 8, 8, true)] });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    // h1 held 8 of its 20: one more call of 8 fits, the other 199 are refused.
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 413)).toHaveLength(199);
    expect(await indexBlocks()).toBe(16 + 16);
  });
});
