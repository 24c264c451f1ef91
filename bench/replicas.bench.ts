// Router replicas over NATS, each part in its own process: a private
// nats-server, the mock workers (`kvrouter mock`, publishing KV events), two
// router replicas sharing ledger and session bindings over NATS, and two
// routers without NATS for the baseline. Every router subscribes to the
// workers' KV events itself. The load generator (this process) sends request
// i to replica i mod 2, as a load balancer would.
//
// The generator and the mock workers share the machine's cores with the
// routers, so two replicas cannot double the throughput here; the figures
// are what the design controls:
//
//   replica_sync_cpu_overhead  router CPU per request, the synced pair / the
//                              unsynced pair, at the same paced request rate
//                              (CPU per request falls as load rises, so the
//                              pairs must see the same rate), rounds alternated
//   replicas_rps_ratio         req/s through 2 synced replicas / through 1
//   replicas_reuse_delta_pts   prefix-cache reuse the engines saw for a
//                              multi-turn workload sent through 2 replicas
//                              (turns alternating) minus through 1, in points
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { createLocalNatsServer, type LocalNatsServer } from '../server/nats/local-server.js';
import type { BenchSuite, Figure } from './figures.js';
import { call, freePorts, start, type Child } from './server.bench.js';
import { median, round } from './stats.js';

const CLI = fileURLToPath(new URL('../server/cli/main.js', import.meta.url));
const WORKERS = 4;
const CONCURRENCY = 32;
/** The paced rate of the CPU figure: well under what the routers manage here. */
const RATE = 250;

interface Replicas {
  children: Child[];
  pools: Pool[];
}

/** Open loop: `rate` requests per second for `ms`, request i to pools[i % n]; returns requests sent. */
async function paced(pools: Pool[], bodies: () => string, rate: number, ms: number): Promise<number> {
  const start = performance.now();
  const pending: Promise<Error | undefined>[] = [];
  let i = 0;
  for (; performance.now() - start < ms; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    // Settled at once, so a failure waits for the end of the round instead of escaping unhandled.
    pending.push(call(pools[i % pools.length]!, '/v1/chat/completions', bodies()).then(() => undefined, (error: Error) => error));
  }
  const failed = (await Promise.all(pending)).filter((e) => e !== undefined);
  if (failed.length > 0) throw new Error(`${failed.length} of ${i} paced requests failed, the first: ${failed[0]!.message}`);
  return i;
}

/** Closed loop: `concurrency` callers for `ms`, request i to pools[i % n]; returns requests done. */
async function drive(pools: Pool[], bodies: () => string, ms: number): Promise<number> {
  const end = performance.now() + ms;
  let done = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        await call(pools[next++ % pools.length]!, '/v1/chat/completions', bodies());
        done++;
      }
    }),
  );
  return done;
}

const SYSTEM = 'You are a support agent for a bicycle shop. Answer in two sentences and name the part you recommend. '.repeat(4);

function shortChat(i: number): string {
  return JSON.stringify({
    model: 'mock-model',
    stream: true,
    max_tokens: 4,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: `Rider ${i} asks which chain fits an eleven-speed cassette and whether it needs a special tool.` },
    ],
  });
}

/** Turn `turn` of conversation `c` in run `run`: the whole history so far plus a new question. */
function turnBody(run: string, c: number, turn: number): string {
  const messages: { role: string; content: string }[] = [{ role: 'system', content: SYSTEM }];
  for (let t = 0; t <= turn; t++) {
    messages.push({ role: 'user', content: `[${run}] conversation ${c}, question ${t}: my ${t % 2 ? 'rear derailleur' : 'front brake'} makes a noise after ${t + 3} kilometres of riding in the rain, what should I check first and what can I do myself at home?` });
    if (t < turn) messages.push({ role: 'assistant', content: `Check the ${t % 2 ? 'cable tension and the hanger alignment' : 'pads for glazing and the rotor for contamination'}, then clean and test it again (answer ${t}).` });
  }
  return JSON.stringify({ model: 'mock-model', max_tokens: 8, messages });
}

async function engineCounters(urls: string[]): Promise<{ hits: number; prompt: number }> {
  let hits = 0;
  let prompt = 0;
  for (const url of urls) {
    const s = (await (await fetch(`${url}/mock/stats`)).json()) as { prefixHitTokens: number; admittedPromptTokens: number };
    hits += s.prefixHitTokens;
    prompt += s.admittedPromptTokens;
  }
  return { hits, prompt };
}

/** Conversations run side by side, each turn after the previous answer; returns the engines' reuse in percent. */
async function multiTurn(pools: Pool[], urls: string[], run: string, conversations: number, turns: number): Promise<number> {
  const before = await engineCounters(urls);
  await Promise.all(
    Array.from({ length: conversations }, async (_, c) => {
      for (let t = 0; t < turns; t++) {
        const pool = pools[(c + t) % pools.length]!;
        const res = await pool.request({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json', 'x-session-id': `${run}-${c}` },
          body: turnBody(run, c, t),
        });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`turn ${t} answered ${res.statusCode}`);
      }
    }),
  );
  const after = await engineCounters(urls);
  return (100 * (after.hits - before.hits)) / (after.prompt - before.prompt);
}

export const replicasSuite: BenchSuite = {
  name: 'replicas',
  async run({ quick }): Promise<Figure[]> {
    let nats: LocalNatsServer | null = null;
    const all: Replicas = { children: [], pools: [] };
    try {
      nats = await createLocalNatsServer();
      await nats.start();
      const kvBase = await freePorts(WORKERS);
      const mock = start([CLI, 'mock', '--port', '0', '--workers', String(WORKERS), '--engine-speedup', '1000', '--kv-events', `tcp://127.0.0.1:${kvBase}`]);
      all.children.push(mock);
      await mock.waitFor(new RegExp(`worker ${WORKERS - 1}: http`));
      const urls = [...mock.output().matchAll(/worker \d+: (http:\/\/[^/\s]+)\/v1/g)].map((m) => m[1]!);
      const dir = await mkdtemp(join(tmpdir(), 'kvrouter-bench-replicas-'));
      const router = async (name: string, natsBlock: Record<string, unknown> | null) => {
        const file = join(dir, `${name}.json`);
        await writeFile(
          file,
          JSON.stringify({
            host: '127.0.0.1',
            port: 0,
            ...(natsBlock && { nats: natsBlock }),
            // The mock's blocks are 64 tokens.
            models: [{ name: 'mock-model', block_size: 64, session_affinity: { ttl_ms: 600_000 } }],
            workers: urls.map((url, i) => ({ id: `w${i}`, url, model: 'mock-model', kv_events: { endpoint: `tcp://127.0.0.1:${kvBase + i}`, topic: 'kv-events' } })),
          }),
        );
        const child = start([CLI, 'serve', '--config', file]);
        all.children.push(child);
        const url = (await child.waitFor(/listening on (http:\S+)/))[1]!;
        const pool = new Pool(url, { connections: CONCURRENCY, keepAliveTimeout: 60_000 });
        all.pools.push(pool);
        return { child, pool };
      };
      const synced = [await router('a', { url: nats.url, replica_id: 'a' }), await router('b', { url: nats.url, replica_id: 'b' })];
      const solo = [await router('solo-a', null), await router('solo-b', null)];
      // Both replicas hear each other before measuring.
      await new Promise((resolve) => setTimeout(resolve, 1500));

      let n = 0;
      const chats = () => shortChat(n++);
      const roundMs = quick ? 1500 : 4000;
      const rounds = quick ? 2 : 5;
      const cpuOf = (pair: typeof synced) => pair.reduce((sum, r) => sum + r.child.cpuMs(), 0);
      const cpuPerRequest = async (pair: typeof synced) => {
        const cpu0 = cpuOf(pair);
        const sent = await paced(pair.map((r) => r.pool), chats, RATE, roundMs);
        return (cpuOf(pair) - cpu0) / sent;
      };
      const rps = async (pools: Pool[]) => (await drive(pools, chats, roundMs)) / (roundMs / 1000);
      await drive([...synced, ...solo].map((r) => r.pool), chats, 500);
      const on: number[] = [];
      const off: number[] = [];
      const two: number[] = [];
      const one: number[] = [];
      for (let i = 0; i < rounds; i++) {
        // Which pair goes first alternates, so neither always follows the other's load.
        if (i % 2 === 0) on.push(await cpuPerRequest(synced));
        off.push(await cpuPerRequest(solo));
        if (i % 2 === 1) on.push(await cpuPerRequest(synced));
        two.push(await rps(synced.map((r) => r.pool)));
        one.push(await rps([synced[0]!.pool]));
      }

      const conversations = quick ? 8 : 24;
      const turns = quick ? 4 : 6;
      const deltas: number[] = [];
      const reuse: { two: number[]; one: number[] } = { two: [], one: [] };
      for (let i = 0; i < (quick ? 1 : 3); i++) {
        const r2 = await multiTurn(synced.map((r) => r.pool), urls, `two-${i}`, conversations, turns);
        const r1 = await multiTurn([synced[0]!.pool], urls, `one-${i}`, conversations, turns);
        reuse.two.push(r2);
        reuse.one.push(r1);
        deltas.push(r2 - r1);
      }
      // What the sync buys: the same workload through two routers that share nothing.
      const unsynced = await multiTurn(solo.map((r) => r.pool), urls, 'unsynced', conversations, turns);

      return [
        {
          key: 'replica_sync_cpu_overhead',
          value: round(median(on) / median(off)),
          unit: 'ratio',
          goal: '<= 1.10',
          note: `router CPU per request ${round(median(on), 3)} ms synced vs ${round(median(off), 3)} ms unsynced at ${RATE} req/s (2 routers each, summed; nats-server not counted)`,
        },
        {
          key: 'replicas_rps_ratio',
          value: round(median(two) / median(one)),
          unit: 'ratio',
          note: `${Math.round(median(two))} req/s through 2 replicas vs ${Math.round(median(one))} through 1, c=${CONCURRENCY}; the generator, mock workers and routers share this machine's cores`,
        },
        {
          key: 'replicas_reuse_delta_pts',
          value: round(median(deltas)),
          unit: 'pts',
          goal: '>= -2',
          note: `engine prefix reuse ${round(median(reuse.two))}% through 2 replicas (turns alternating) vs ${round(median(reuse.one))}% through 1 (${round(unsynced)}% through 2 routers without sync); ${conversations} conversations x ${turns} turns`,
        },
      ];
    } finally {
      await Promise.all(all.pools.map((p) => p.close()));
      await Promise.all(all.children.map((c) => c.stop()));
      await nats?.close();
    }
  },
};
