import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../router/kv-events.js';
import { startKvPublishers, startMockCommand } from '../../server/cli/mock.js';
import { ZmqKvListener } from '../../server/kv-events/zmq-listener.js';
import { offsetEndpoint } from '../../server/kv-events/rank-endpoints.js';

const main = fileURLToPath(new URL('../../dist/server/cli/main.js', import.meta.url));

describe('kvrouter mock', () => {
  it('passes the engine flags to every worker and prints each URL', async () => {
    const lines: string[] = [];
    const fleet = await startMockCommand(
      {
        port: 0,
        host: '127.0.0.1',
        workers: 2,
        engineSpeedup: 5,
        numBlocks: 100,
        blockSize: 8,
        maxBatchedTokens: 256,
        maxNumSeqs: 4,
        offloadLoadMsPerToken: 0.02,
        model: 'demo',
        defaultMaxTokens: 3,
        kvTopic: 'kv-events',
      },
      (line) => lines.push(line),
    );
    try {
      expect(fleet.engines.map((e) => e.shape)).toEqual(
        Array(2).fill({ numBlocks: 100, blockSize: 8, maxBatchedTokens: 256, maxNumSeqs: 4, speedup: 5, dpRank: 0, offloadBlocks: 0, offloadLoadMsPerToken: 0.02 }),
      );
      expect(lines.slice(1)).toEqual(fleet.urls.map((url, i) => `worker ${i}: ${url}/v1`));
      const body = (await (await fetch(`${fleet.urls[0]}/v1/completions`, { method: 'POST', body: '{"prompt":"x"}' })).json()) as {
        model: string;
        usage: { completion_tokens: number };
      };
      expect(body.model).toBe('demo');
      expect(body.usage.completion_tokens).toBe(3);
    } finally {
      await fleet.close();
    }
  });

  it("publishes each worker's KV events over ZeroMQ in the vLLM wire format (--kv-events)", async () => {
    const options = {
      port: 0,
      host: '127.0.0.1',
      workers: 1,
      engineSpeedup: 50,
      numBlocks: 100,
      blockSize: 4,
      maxBatchedTokens: 256,
      maxNumSeqs: 4,
      model: 'demo',
      defaultMaxTokens: 2,
      kvEvents: 'tcp://127.0.0.1:*',
      kvTopic: 'kv-events',
    };
    const publishers = await startKvPublishers(options, () => {});
    const fleet = await startMockCommand(options, () => {}, publishers.onEvents);
    const endpoint = publishers.endpoints;
    const batches: KvEventBatch[] = [];
    const listener = new ZmqKvListener({
      endpoint: endpoint[0]!,
      topic: 'kv-events',
      worker: { id: 'w0' },
      onBatch: (batch) => batches.push(batch),
      onStale: () => {},
    });
    try {
      await listener.start();
      // The subscriber joins late (slow joiner): keep sending distinct prompts until events arrive.
      for (let i = 0; batches.length === 0 && i < 50; i++) {
        await fetch(`${fleet.urls[0]}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: [i + 1, 2, 3, 4, 5, 6, 7, 8, 9] }) });
      }
      const stored = batches.flatMap((b) => b.events).find((e) => e.type === 'stored');
      expect(stored).toMatchObject({ type: 'stored', blockSize: 4, parentBlockHash: null });
      expect(stored && 'tokenIds' in stored && stored.tokenIds.slice(1, 8)).toEqual([2, 3, 4, 5, 6, 7, 8]);
    } finally {
      await listener.close();
      await fleet.close();
      await publishers.close();
    }
  });

  it('gives worker i its own event port (port + i)', () => {
    expect(offsetEndpoint('tcp://127.0.0.1:5557', 3)).toBe('tcp://127.0.0.1:5560');
    expect(() => offsetEndpoint('ipc:///tmp/kv', 1)).toThrow(/tcp:\/\/host:port/);
  });

  it('serves until SIGTERM, then stops cleanly with exit code 0', async () => {
    const child = spawn(process.execPath, [main, 'mock', '--port', '0', '--workers', '2', '--engine-speedup', '100'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const urls = await new Promise<string[]>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const found = [...out.matchAll(/worker \d: (\S+)\/v1/g)].map((m) => m[1]!);
          if (found.length === 2) resolve(found);
        });
        child.on('exit', () => reject(new Error(`mock exited early: ${out}`)));
      });
      for (const url of urls) expect((await fetch(`${url}/health`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(out).toContain('kvrouter mock: stopped');
  });

  it('rejects a bad flag value with a message naming it and a non-zero exit', async () => {
    const child = spawn(process.execPath, [main, 'mock', '--port', '0', '--num-blocks', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).not.toBe(0);
    expect(err).toContain("option '--num-blocks <n>' argument '0' is invalid. expected an integer >= 1.");
  });
});
