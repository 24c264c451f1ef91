// The replica commands as real processes: `kvrouter relay` carries an engine's
// ZeroMQ KV events into JetStream for a router (a sequence gap recovered
// through the engine's replay socket, a relay restart skipping what it had
// already relayed), and `kvrouter serve --replicas 2` answers on one port
// with both replicas serving.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { EMBEDDED_DEFAULTS, startEmbeddedFleet } from '../../server/cli/embedded-fleet.js';
import { createLocalNatsServer, type LocalNatsServer } from '../../server/nats/local-server.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { spawnKvrouter } from '../server/cli-process.js';
import { storedEvent as stored } from '../helpers/stored-event.js';
import { metric, post, waitFor } from './stack.js';


/** These tests start several node processes each (relays, a primary and its replicas). */
const PROCESSES_TIMEOUT_MS = 300_000;

function run(args: string[], env: Record<string, string> = {}) {
  const proc = spawnKvrouter(args, env);
  // A process start (node, tsx, the whole CLI) is the slowest thing here on a busy machine.
  const waitOut = async (pattern: RegExp, timeoutMs = 90_000) => {
    await waitFor(() => pattern.test(proc.out()), () => `${pattern} in the output (stdout: ${proc.out().slice(-400)} stderr: ${proc.err().slice(-400)})`, timeoutMs);
    return pattern.exec(proc.out())!;
  };
  return { ...proc, waitOut };
}

const ids = (n: number, start: number) => Array.from({ length: n }, (_, i) => start + i);

describe('kvrouter relay', () => {
  let nats: LocalNatsServer;
  let publisher: ZmqKvPublisher;
  let router: RunningRouter;
  const relayArgs = () => ['relay', '--worker-id', 'gpu.0', '--endpoint', publisher.endpoint, '--replay-endpoint', publisher.replayEndpoint!, '--topic', 'kv', '--nats', nats.url, '--subject-prefix', 'relaytest'];
  let ts = 1;
  /** ZeroMQ subscriptions connect in the background: publish the blocks again until `done`. */
  const publishUntil = async (tokens: number[], done: () => Promise<boolean>, what: string) => {
    const deadline = Date.now() + 30_000;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await publisher.publish({ ts: ts++, events: [stored(tokens)], dpRank: 0 });
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  };
  const overlap = async (prompt: number[]) => {
    const x = (await (await post(`${router.url}/router/explain`, { model: 'm', prompt })).json()) as { workers: { overlap_blocks: number }[] };
    return x.workers[0]!.overlap_blocks;
  };

  beforeAll(async () => {
    nats = await createLocalNatsServer();
    await nats.start();
    publisher = new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: 'kv' });
    await publisher.start();
    const config = configFromDocument({
      host: '127.0.0.1',
      port: 0,
      log_level: 'silent',
      nats: { url: nats.url, subject_prefix: 'relaytest' },
      models: [{ name: 'm', tokenizer: 'bytes', block_size: 16 }],
      workers: [{ id: 'gpu.0', url: 'http://127.0.0.1:9', model: 'm', kv_events: { source: 'nats' } }],
    });
    router = await startRouter(config);
  });
  afterAll(async () => {
    await router?.close();
    await publisher?.close();
    await nats?.close();
  });

  it('carries batches to the router, recovers a gap through the replay socket, and resumes after a restart without replaying', { timeout: PROCESSES_TIMEOUT_MS }, async () => {
    let relay = run(relayArgs());
    try {
      await relay.waitOut(/kvrouter relay: worker gpu\.0: tcp:\/\/\S+ \(replay tcp:\/\/\S+\) -> nats:\/\/\S+ stream relaytest_kv, relaytest\.kv\.gpu%2E0\.0/);
      const first = ids(64, 100);
      await publishUntil(first, async () => (await overlap(first)) === 4, 'the first batch reaches the router');

      // A batch the relay never received live: the next one shows the gap, the replay socket fills it.
      const missed = ids(32, 1000);
      const after = ids(48, 2000);
      await publisher.publish({ ts: ts++, events: [stored(missed)], dpRank: 0 }, { live: false });
      await publisher.publish({ ts: ts++, events: [stored(after)], dpRank: 0 });
      await waitFor(async () => (await overlap(after)) === 3, 'the batch after the gap');
      expect(await overlap(missed)).toBe(2);

      // The relay goes away; batches published meanwhile wait in the engine's replay ring.
      relay.child.kill('SIGTERM');
      expect(await relay.exited).toBe(0);
      expect(relay.out()).toMatch(/stopped after relaying \d+ batches/);
      const whileDown = ids(32, 3000);
      await publisher.publish({ ts: ts++, events: [stored(whileDown)], dpRank: 0 });
      relay = run(relayArgs());
      await relay.waitOut(/kvrouter relay: worker gpu\.0:/);
      // The next live batch shows the relay where the engine is; it fetches the rest from the replay ring.
      const next = ids(16, 4000);
      await publishUntil(next, async () => (await overlap(next)) === 1, 'a batch after the restart');
      expect(await overlap(whileDown)).toBe(2);
      expect(await overlap(first)).toBe(4);
      // Every batch applied once, in order: no gap or restart reached the router's sequencer.
      for (const type of ['stale', 'gap', 'restart']) expect(await metric(router.url, 'kvrouter_kv_events_total', { worker: 'gpu.0', type })).toBe(0);
      expect(await metric(router.url, 'kvrouter_kv_events_total', { worker: 'gpu.0', type: 'stored' })).toBeGreaterThanOrEqual(4);
    } finally {
      relay.child.kill('SIGKILL');
    }
  });
});

describe('kvrouter serve --replicas', () => {
  it('answers on one port with both replicas serving, sharing state over a private nats-server', { timeout: PROCESSES_TIMEOUT_MS }, async () => {
    const fleet = await startEmbeddedFleet({ ...EMBEDDED_DEFAULTS, workers: 2, speedup: 20, tokenizer: 'bytes', numBlocks: 1024 });
    const dir = await mkdtemp(join(tmpdir(), 'kvrouter-replicas-'));
    const file = join(dir, 'router.json');
    await writeFile(file, JSON.stringify({ ...fleet.document, log_level: 'warn' }));
    const proc = run(['serve', '--replicas', '2', '--config', file], { PORT: '0', HOST: '127.0.0.1' });
    try {
      const [, url] = await proc.waitOut(/kvrouter: 2 replicas \(\S+, \S+\) listening on (http:\/\/127\.0\.0\.1:\d+)/);
      expect(proc.out()).toMatch(/started a private nats-server at nats:\/\/127\.0\.0\.1:\d+/);
      // Each fresh connection may land on either replica: both must answer.
      const seen = new Set<string>();
      for (let i = 0; i < 40 && seen.size < 2; i++) {
        const dispatcher = new Agent();
        const text = await (await fetch(`${url}/metrics`, { dispatcher } as RequestInit)).text();
        await dispatcher.close();
        seen.add(/kvrouter_replica_info\{replica="([^"]+)"\} 1/.exec(text)![1]!);
      }
      expect(seen.size).toBe(2);
      const answers = await Promise.all(
        Array.from({ length: 6 }, async (_, i) => {
          const dispatcher = new Agent();
          const res = await fetch(`${url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: EMBEDDED_DEFAULTS.model, messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 3 }),
            dispatcher,
          } as RequestInit);
          await res.text();
          await dispatcher.close();
          return res.status;
        }),
      );
      expect(answers).toEqual([200, 200, 200, 200, 200, 200]);
      // Each replica hears the other over NATS.
      await waitFor(async () => {
        const dispatcher = new Agent();
        const text = await (await fetch(`${url}/metrics`, { dispatcher } as RequestInit)).text();
        await dispatcher.close();
        return /kvrouter_replica_peers\{model="mock-model",kind="replicas"\} 1/.test(text);
      }, 'a replica that hears its peer');
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      expect(proc.out()).toMatch(/kvrouter: stopped/);
    } finally {
      proc.child.kill('SIGKILL');
      await fleet.close();
    }
  });
});
