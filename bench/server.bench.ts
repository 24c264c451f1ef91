// The router over real HTTP, each part in its own process so CPU is counted
// where it is spent: the mock workers (`kvrouter mock`, publishing KV events),
// the router (`kvrouter serve --config`), a plain Fastify + undici
// pass-through proxy to the same workers, and a sink worker that answers at
// once (for the long-prompt CPU figure). The load generator is undici in this
// process.
//
//   proxy_rps_ratio           router req/s / plain proxy req/s, short streamed chats
//                             (~200 tokens), same workers, rounds alternated
//   proxy_rps_ratio_token_ids the same with completions given as token ids (no tokenization)
//   router_added_p50_ms_over_plain_proxy
//                             router p50 - plain proxy p50, one request at a time
//                             (and _token_ids: the same with token-id completions)
//   proxy_added_p50_ms        router p50 - direct-to-worker p50 (absolute, noisy)
//   cpu_ms_per_request_100k   router CPU (all threads, from their schedstat) per request for a
//                             ~100k-token chat whose last message is new, after a warm-up of
//                             such requests; the note splits it into the main thread and the others
//
// This file is also the entry point of the proxy and sink processes (--role).
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import type { BenchSuite, Figure } from './figures.js';
import { median, round } from './stats.js';

const CLI = fileURLToPath(new URL('../server/cli/main.js', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const WORKERS = 2;
/** 100k-token requests sent before the CPU per request is measured. */
const LONG_WARMUP = 30;

// ---- child processes ----

export interface Child {
  process: ChildProcess;
  /** Resolves with the first stdout match. */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
  output(): string;
  /** CPU time the process's threads have run so far, in ms (Linux /proc, to the nanosecond). */
  cpuMs(): number;
  /** The same for its main thread alone (JavaScript, and the collector's pauses). */
  mainThreadCpuMs(): number;
  stop(): Promise<void>;
}

// A thread's schedstat starts with the nanoseconds it has run: /proc/<pid>/stat
// counts in 10 ms ticks, too coarse for a figure of a few ms per request. The
// process's total sums its live threads (V8's and libuv's threads, and the
// tokenizer pool's, live as long as the process).
function threadCpuMs(pid: number, tid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return 0; // the thread has just exited
  }
}

function processCpuMs(pid: number): number {
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) total += threadCpuMs(pid, Number(tid));
  return total;
}

export function start(args: string[]): Child {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KVROUTER_LOG_LEVEL: 'warn' } });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  return {
    process: child,
    waitFor: (pattern) =>
      new Promise((resolve, reject) => {
        const deadline = Date.now() + 30_000;
        const poll = () => {
          const m = pattern.exec(out);
          if (m) return resolve(m);
          if (child.exitCode !== null || Date.now() > deadline) return reject(new Error(`${args.join(' ')}: no ${pattern} (stderr: ${err.slice(-400)})`));
          setTimeout(poll, 20);
        };
        poll();
      }),
    output: () => out,
    cpuMs: () => processCpuMs(child.pid!),
    mainThreadCpuMs: () => threadCpuMs(child.pid!, child.pid!),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A base port with `count` free ports after it (the mock's KV publishers bind base + i). */
export async function freePorts(count: number): Promise<number> {
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 30_000);
    const servers = [];
    try {
      for (let i = 0; i < count; i++) {
        const s = createNetServer();
        await new Promise<void>((resolve, reject) => s.once('error', reject).listen(base + i, '127.0.0.1', resolve));
        servers.push(s);
      }
      return base;
    } catch {
      // taken: try another base
    } finally {
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    }
  }
}

export interface MockFleet {
  mock: Child;
  /** Router config entries for the mock's workers (model `mock-model`, each with its KV-event endpoint). */
  workers: { id: string; url: string; model: string; kv_events: { endpoint: string; topic: string } }[];
}

/** `kvrouter mock` workers in their own process, each publishing KV events on a free port. */
export async function startMockFleet(workers: number, args: string[] = []): Promise<MockFleet> {
  const kvBase = await freePorts(workers);
  const mock = start([CLI, 'mock', '--port', '0', '--workers', String(workers), '--engine-speedup', '1000', ...args, '--kv-events', `tcp://127.0.0.1:${kvBase}`]);
  try {
    await mock.waitFor(new RegExp(`worker ${workers - 1}: http`));
  } catch (error) {
    await mock.stop();
    throw error;
  }
  const urls = [...mock.output().matchAll(/worker \d+: (http:\/\/[^/\s]+)\/v1/g)].map((m) => m[1]!);
  return {
    mock,
    workers: urls.map((url, i) => ({ id: `w${i}`, url, model: 'mock-model', kv_events: { endpoint: `tcp://127.0.0.1:${kvBase + i}`, topic: 'kv-events' } })),
  };
}

/** A router config on loopback and a free port, written to a temporary file; returns its path. */
export async function writeRouterConfig(models: object[], workers: object[]): Promise<string> {
  const config = join(await mkdtemp(join(tmpdir(), 'kvrouter-bench-')), 'router.json');
  await writeFile(config, JSON.stringify({ host: '127.0.0.1', port: 0, models, workers }));
  return config;
}

// ---- load generation ----

export async function call(pool: Pool, path: string, body: string): Promise<void> {
  const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body });
  await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${path} answered ${res.statusCode}`);
}

/** Closed loop: `concurrency` callers for `ms`; returns requests per second. */
async function throughput(pool: Pool, path: string, bodies: () => string, concurrency: number, ms: number): Promise<number> {
  const end = performance.now() + ms;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await call(pool, path, bodies());
        done++;
      }
    }),
  );
  return done / (ms / 1000);
}

/** Router and proxy throughput in alternated rounds (both see the same machine); medians. */
async function rpsRatio(router: Pool, proxy: Pool, path: string, bodies: () => string, concurrency: number, rounds: number, ms: number) {
  await throughput(router, path, bodies, concurrency, 300);
  await throughput(proxy, path, bodies, concurrency, 300);
  const r: number[] = [];
  const p: number[] = [];
  for (let i = 0; i < rounds; i++) {
    p.push(await throughput(proxy, path, bodies, concurrency, ms));
    r.push(await throughput(router, path, bodies, concurrency, ms));
  }
  return { router: median(r), proxy: median(p), ratio: median(r) / median(p) };
}

/**
 * p50 latency of each target, one request at a time. Each sample sends one
 * new body to every target, in rotating order, so no target always gets the
 * body the worker has just cached.
 */
async function p50s(targets: Record<string, () => Pool>, path: string, bodies: () => string, samples: number): Promise<Record<string, number>> {
  const names = Object.keys(targets);
  const times = Object.fromEntries(names.map((k) => [k, [] as number[]]));
  for (let i = 0; i < samples; i++) {
    const body = bodies();
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j) % names.length]!;
      const t0 = performance.now();
      await call(targets[name]!(), path, body);
      times[name]!.push(performance.now() - t0);
    }
  }
  return Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]));
}

// ---- request bodies ----

const SYSTEM = 'You are a helpful assistant for an online hardware store. Answer briefly, name the product, its price and whether it is in stock. '.repeat(5);

function shortChat(i: number, model: string): string {
  return JSON.stringify({
    model,
    stream: true,
    max_tokens: 4,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: `Customer ${i} asks: do you have a cordless drill with two batteries, a case and a charger, and can it be delivered by Friday?` },
    ],
  });
}

const WORDS = 'alpha beta gamma delta build test deploy error warning stack trace function return value index table route worker cache block token prefix'.split(' ');

/** A long agent conversation (~100k o200k tokens) as the JSON text of its messages, without the closing bracket. */
function longHistory(): string {
  const messages: unknown[] = [{ role: 'system', content: 'You are a coding agent working in a large repository.' }];
  let x = 7;
  const text = (words: number) => {
    const out: string[] = [];
    for (let i = 0; i < words; i++) {
      x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
      out.push(WORDS[x % WORDS.length]! + (x % 13 === 0 ? `_${x % 997}` : ''));
    }
    return out.join(' ');
  };
  for (let turn = 0; turn < 70; turn++) {
    messages.push({ role: 'user', content: text(120) });
    messages.push({ role: 'assistant', content: text(200), tool_calls: [{ id: `call_${turn}`, type: 'function', function: { name: 'run', arguments: `{"cmd":"npm test -- ${turn}"}` } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${turn}`, content: text(650) });
  }
  const json = JSON.stringify(messages);
  return json.slice(0, -1);
}

// ---- the suite ----

export const serverSuite: BenchSuite = {
  name: 'server',
  async run({ quick }): Promise<Figure[]> {
    const children: Child[] = [];
    const pools: Pool[] = [];
    try {
      const fleet = await startMockFleet(WORKERS);
      children.push(fleet.mock);
      const urls = fleet.workers.map((w) => w.url);
      const sink = start([SELF, '--role', 'sink']);
      children.push(sink);
      const sinkUrl = (await sink.waitFor(/listening (http:\S+)/))[1]!;

      const config = await writeRouterConfig(
        [{ name: 'mock-model', block_size: 64 }, { name: 'sink-model' }],
        [
          ...fleet.workers,
          // Event mode, as with real engines (the sink reports no events, as a turn adds only a block or two).
          { id: 'sink', url: sinkUrl, model: 'sink-model', kv_events: { source: 'http' } },
        ],
      );
      const router = start([CLI, 'serve', '--config', config]);
      children.push(router);
      const routerUrl = (await router.waitFor(/listening on (http:\S+)/))[1]!;
      const proxy = start([SELF, '--role', 'proxy', ...urls]);
      children.push(proxy);
      const proxyUrl = (await proxy.waitFor(/listening (http:\S+)/))[1]!;

      const concurrency = 32;
      const pool = (url: string) => {
        const p = new Pool(url, { connections: concurrency, keepAliveTimeout: 60_000 });
        pools.push(p);
        return p;
      };
      const routerPool = pool(routerUrl);
      const proxyPool = pool(proxyUrl);
      const direct = urls.map(pool);
      let n = 0;
      const chats = () => shortChat(n++, 'mock-model');
      // The same relay without tokenization: a completion whose prompt is ~200 token ids.
      const ids = Array.from({ length: 200 }, (_, i) => 1000 + i);
      const idPrompts = () => JSON.stringify({ model: 'mock-model', stream: true, max_tokens: 4, prompt: [...ids.slice(0, -1), 5000 + (n++ % 50_000)] });

      const roundMs = quick ? 1200 : 4000;
      const chat = await rpsRatio(routerPool, proxyPool, '/v1/chat/completions', chats, concurrency, quick ? 2 : 5, roundMs);
      const tokenIds = await rpsRatio(routerPool, proxyPool, '/v1/completions', idPrompts, concurrency, quick ? 1 : 3, roundMs);

      let d = 0;
      const samples = quick ? 150 : 1000;
      const latency = await p50s({ direct: () => direct[d++ % direct.length]!, proxy: () => proxyPool, router: () => routerPool }, '/v1/chat/completions', chats, samples);
      const idLatency = await p50s({ proxy: () => proxyPool, router: () => routerPool }, '/v1/completions', idPrompts, samples);

      // Router CPU per request on a ~100k-token chat whose last message is new.
      const history = longHistory();
      const longBody = (i: number) =>
        `{"model":"sink-model","stream":true,"max_tokens":4,"messages":${history},{"role":"user","content":"Now fix failing test number ${i} and explain the change."}]}`;
      const explained = (await (await fetch(`${routerUrl}/router/explain`, { method: 'POST', body: longBody(0) })).json()) as { prompt_tokens: number };
      // The steady cost: V8 first compiles the long path's code over the first few dozen such requests.
      for (let i = 1; i <= LONG_WARMUP; i++) await call(routerPool, '/v1/chat/completions', longBody(i));
      const longRequests = quick ? 60 : 200;
      const cpu0 = router.cpuMs();
      const main0 = router.mainThreadCpuMs();
      for (let i = 0; i < longRequests; i++) await call(routerPool, '/v1/chat/completions', longBody(1000 + i));
      const cpuPerLong = (router.cpuMs() - cpu0) / longRequests;
      const mainPerLong = (router.mainThreadCpuMs() - main0) / longRequests;

      const rps = (x: { router: number; proxy: number }) => `router ${Math.round(x.router)} vs proxy ${Math.round(x.proxy)} req/s, c=${concurrency}`;
      return [
        { key: 'proxy_rps_ratio', value: round(chat.ratio), unit: 'ratio', goal: '>= 0.9', note: `${rps(chat)}, streamed ~200-token chats` },
        { key: 'proxy_rps_ratio_token_ids', value: round(tokenIds.ratio), unit: 'ratio', note: `${rps(tokenIds)}, 200 token ids (no tokenization)` },
        {
          key: 'router_added_p50_ms_over_plain_proxy',
          value: round(latency.router! - latency.proxy!),
          unit: 'ms',
          goal: '<= 0.15',
          note: `p50 router ${round(latency.router!)} vs plain proxy ${round(latency.proxy!)} ms, c=1`,
        },
        {
          key: 'router_added_p50_ms_over_plain_proxy_token_ids',
          value: round(idLatency.router! - idLatency.proxy!),
          unit: 'ms',
          note: `p50 router ${round(idLatency.router!)} vs plain proxy ${round(idLatency.proxy!)} ms, c=1, 200 token ids (no tokenization)`,
        },
        { key: 'proxy_added_p50_ms', value: round(latency.router! - latency.direct!), unit: 'ms', note: `p50 router ${round(latency.router!)} vs direct ${round(latency.direct!)} ms, c=1` },
        { key: 'plain_proxy_added_p50_ms', value: round(latency.proxy! - latency.direct!), unit: 'ms', note: 'the same hop through the plain proxy, same run' },
        {
          key: 'cpu_ms_per_request_100k',
          value: round(cpuPerLong, 2),
          unit: 'ms',
          goal: '<= 2',
          note: `${explained.prompt_tokens} tokens, ${Math.round(longBody(0).length / 1024)} KB body, block size 16, event mode, ${longRequests} requests after ${LONG_WARMUP}; main thread ${round(mainPerLong, 2)} ms, other threads (V8's collector and compiler, tokenizer) ${round(cpuPerLong - mainPerLong, 2)} ms`,
        },
      ];
    } finally {
      await Promise.all(pools.map((p) => p.close()));
      await Promise.all(children.map((c) => c.stop()));
    }
  },
};

// ---- roles of the child processes ----

/** A plain Fastify + undici pass-through proxy, round-robin over the workers (the baseline). */
async function runProxy(upstreams: string[]): Promise<void> {
  const { default: Fastify } = await import('fastify');
  const app = Fastify({ logger: false });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  const upstreamPools = upstreams.map((u) => new Pool(u, { keepAliveTimeout: 60_000 }));
  let next = 0;
  const relay = (request: { url: string; body: unknown }, reply: { hijack(): void; raw: import('node:http').ServerResponse }) => {
    reply.hijack();
    const res = reply.raw;
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    upstreamPools[next++ % upstreamPools.length]!
      .stream(
        { path: request.url, method: 'POST', headers: { 'content-type': 'application/json' }, body: request.body as Buffer, signal: abort.signal, opaque: res },
        ({ statusCode, headers, opaque }) => {
          const out = opaque as typeof res;
          out.writeHead(statusCode, { 'content-type': String(headers['content-type'] ?? 'application/json') });
          return out;
        },
      )
      .catch(() => res.destroy());
  };
  app.post('/v1/chat/completions', relay);
  app.post('/v1/completions', relay);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address() as { port: number };
  console.log(`listening http://127.0.0.1:${address.port}`);
}

/** A worker that reads the request and answers a short SSE stream at once. */
async function runSink(): Promise<void> {
  const chunk = (text: string) => `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text } }] })}\n\n`;
  const answer = chunk('ok') + chunk(' done') + 'data: [DONE]\n\n';
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(`listening http://127.0.0.1:${(server.address() as { port: number }).port}`);
}

if (process.argv[2] === '--role' && process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const role = process.argv[3];
  if (role === 'proxy') await runProxy(process.argv.slice(4));
  else if (role === 'sink') await runSink();
  else throw new Error(`unknown role ${role}`);
  process.on('SIGTERM', () => process.exit(0));
}
