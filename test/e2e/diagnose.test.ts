// The router diagnosing misconfigured fleets end to end: mock engines over
// real HTTP and ZeroMQ, set up wrong each way an operator gets it wrong, and
// GET /router/diagnose names the cause (and its fix), logs it once, and shows
// it in /metrics. A fleet set up right is ok, and its hit rates in /metrics
// add up to what the engines reported to the client.
import { afterEach, describe, expect, it } from 'vitest';
import { createTokenizer } from '../../router/tokenize/index.js';
import { promptTokens } from '../../server/request/prompt.js';
import { metric, post, startStack, waitFor } from './stack.js';
import { diagnose, MODEL, rankOf, sendShared, startDiagnosedRouter, startMocks, type DiagnosedRouter, type Mocks } from './diagnose-fleet.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()!();
});

async function fleet(mocks: Mocks, document: Record<string, unknown>): Promise<DiagnosedRouter> {
  closers.push(() => mocks.close());
  const router = await startDiagnosedRouter(document);
  closers.push(() => router.close());
  return router;
}

const worker = (id: string, url: string, endpoint: string, extra: Record<string, unknown> = {}) => ({
  id,
  url,
  model: MODEL,
  kv_events: { source: 'zmq', endpoint, topic: 'kv-events' },
  ...extra,
});

const linesAbout = (r: DiagnosedRouter, worker: string, cause: string) => r.warnings().filter((l) => l.startsWith(`diagnose: worker ${worker} `) && l.includes(cause));

describe('a fleet set up right', () => {
  it('is ok on every rank, its engines reproduce the routed prompts, and its hit rates match what the engines reported', async () => {
    const stack = await startStack();
    closers.push(() => stack.close());
    let reportedCached = 0;
    let reportedPrompt = 0;
    const shared = 'You are a careful assistant. '.repeat(20);
    for (let i = 0; i < 8; i++) {
      const res = await post(`${stack.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: 'system', content: shared }, { role: 'user', content: `question ${i}` }], max_tokens: 3 });
      const body = (await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } };
      reportedCached += body.usage.prompt_tokens_details.cached_tokens;
      reportedPrompt += body.usage.prompt_tokens;
    }
    const d = await diagnose(stack.url);
    expect(d.workers.map((w) => w.verdict)).toEqual(['ok', 'ok']);
    const used = d.workers.filter((w) => w.requests_sent > 0);
    expect(used.length).toBeGreaterThan(0);
    await waitFor(async () => (await diagnose(stack.url)).workers.filter((w) => w.requests_sent > 0).every((w) => w.tokenizer_check === 'reproduced'), 'the engines to store a routed prompt');
    expect(reportedCached).toBeGreaterThan(0);
    expect(await metric(stack.url, 'kvrouter_prefix_cached_tokens_total', { source: 'reported' })).toBe(reportedCached);
    expect(await metric(stack.url, 'kvrouter_prefix_prompt_tokens_total', { source: 'reported' })).toBe(reportedPrompt);
    expect(await metric(stack.url, 'kvrouter_prefix_requests_total', { source: 'reported' })).toBe(8);
    // The predicted side is what the router booked: the model-wide counter it already kept.
    expect(await metric(stack.url, 'kvrouter_prefix_cached_tokens_total', { source: 'predicted' })).toBe(await metric(stack.url, 'kvrouter_routed_cached_tokens_total'));
    expect(await metric(stack.url, 'kvrouter_worker_diagnosis', { verdict: 'ok' })).toBe(2);
    expect(await metric(stack.url, 'kvrouter_worker_diagnosis_cause')).toBe(0);
  });
});

describe('a fleet set up wrong', () => {
  it('wrong block size: the engine stores 32-token blocks, the router is told 16', async () => {
    const mocks = await startMocks({ blockSize: 32 });
    const r = await fleet(mocks, { models: [{ name: MODEL, tokenizer: 'bytes', block_size: 16 }], workers: [worker('w0', mocks.fleet.urls[0]!, mocks.endpoints[0]!)] });
    await sendShared(r.url, 3, 4, 32);
    await waitFor(async () => (await rankOf(r.url, 'w0')).verdict === 'mismatch', 'the mismatch verdict');
    const w = await rankOf(r.url, 'w0');
    const cause = w.causes.find((c) => c.cause === 'block_size')!;
    expect(cause.detail).toContain('blocks of 32 tokens');
    expect(cause.detail).toContain("block_size is 16");
    expect(cause.fix).toContain('block_size');
    expect(await metric(r.url, 'kvrouter_worker_diagnosis_cause', { worker: 'w0', cause: 'block_size' })).toBe(1);
    const evidence = await metric(r.url, 'kvrouter_diagnosis_evidence_total', { worker: 'w0', cause: 'block_size' });
    expect(evidence).toBeGreaterThan(0);
    // More of the same evidence, and more looks at it, log nothing new.
    await sendShared(r.url, 2, 4, 32, {}, 50_000);
    await waitFor(async () => (await metric(r.url, 'kvrouter_diagnosis_evidence_total', { worker: 'w0', cause: 'block_size' })) > evidence, 'more mismatching events');
    await diagnose(r.url);
    expect(linesAbout(r, 'w0', "block size differs")).toHaveLength(1);
  });

  it('no events: the engine publishes nothing on the configured endpoint while requests go to it', async () => {
    const mocks = await startMocks({ blockSize: 16, publish: false });
    const r = await fleet(mocks, {
      models: [{ name: MODEL, tokenizer: 'bytes', block_size: 16 }],
      workers: [worker('quiet', mocks.fleet.urls[0]!, mocks.endpoints[0]!)],
      diagnostics: { silent_after_ms: 300 },
    });
    expect((await rankOf(r.url, 'quiet')).verdict).toBe('ok');
    await sendShared(r.url, 2, 4, 16);
    await waitFor(async () => (await rankOf(r.url, 'quiet')).verdict === 'silent', 'the silent verdict');
    const w = await rankOf(r.url, 'quiet');
    expect(w.causes.map((c) => c.cause)).toEqual(['no_events']);
    expect(w.causes[0]!.detail).toContain('no KV event ever arrived');
    expect(w.causes[0]!.fix).toContain('--kv-events-config');
    expect(await metric(r.url, 'kvrouter_worker_diagnosis', { worker: 'quiet', verdict: 'silent' })).toBe(1);
    await waitFor(() => linesAbout(r, 'quiet', 'no KV events arrived').length === 1, 'the log line');
  });

  it("different tokenizer: the engine (kvrouter mock's byte tokenizer) never stores what the router (o200k) routed", async () => {
    const mocks = await startMocks({ blockSize: 16 });
    const r = await fleet(mocks, { models: [{ name: MODEL, tokenizer: 'tiktoken:o200k_base', block_size: 16 }], workers: [worker('w0', mocks.fleet.urls[0]!, mocks.endpoints[0]!)] });
    for (let i = 0; i < 12; i++) {
      const res = await post(`${r.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: 'user', content: `Request ${i}: ${'summarise the quarterly report for the board, '.repeat(8)}` }], max_tokens: 2 });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    await waitFor(async () => (await rankOf(r.url, 'w0')).causes.some((c) => c.cause === 'tokenizer'), 'the tokenizer cause');
    const w = await rankOf(r.url, 'w0');
    expect(w.verdict).toBe('mismatch');
    expect(w.tokenizer_check).toBe('differs');
    expect(w.causes.find((c) => c.cause === 'tokenizer')!.fix).toContain('tokenizer');
    expect(await metric(r.url, 'kvrouter_worker_diagnosis_cause', { worker: 'w0', cause: 'tokenizer' })).toBe(1);
    await waitFor(() => linesAbout(r, 'w0', 'never reproduce').length === 1, 'the log line');
  });

  it('the same engines with the tokenizer the router uses are ok (the check above is about the tokenizer)', async () => {
    const tokenizer = await createTokenizer('tiktoken:o200k_base', { readFile: () => Promise.reject(new Error('no files')) });
    const mocks = await startMocks({ blockSize: 16, promptTokens: (body, kind) => promptTokens(tokenizer, body, kind) });
    const r = await fleet(mocks, { models: [{ name: MODEL, tokenizer: 'tiktoken:o200k_base', block_size: 16 }], workers: [worker('w0', mocks.fleet.urls[0]!, mocks.endpoints[0]!)] });
    for (let i = 0; i < 6; i++) {
      const res = await post(`${r.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: 'user', content: `Request ${i}: ${'summarise the quarterly report for the board, '.repeat(8)}` }], max_tokens: 2 });
      await res.arrayBuffer();
    }
    await waitFor(async () => (await rankOf(r.url, 'w0')).tokenizer_check === 'reproduced', 'a reproduced prompt');
    expect((await rankOf(r.url, 'w0')).verdict).toBe('ok');
  });

  it('wrong DP port: an engine publishes every rank on one port, read as rank 0 by a two-rank worker and by a one-rank worker', async () => {
    const mocks = await startMocks({ blockSize: 16, dataParallelSize: 2, workers: 2 });
    const r = await fleet(mocks, {
      models: [{ name: MODEL, tokenizer: 'bytes', block_size: 16 }],
      workers: [
        // Two ranks: the router reads rank 0 on the endpoint's port and rank 1 on the next; the engine's rank 1 publishes on the first.
        worker('dp2', mocks.fleet.urls[0]!, mocks.endpoints[0]!, { data_parallel_size: 2 }),
        // One rank in the config; the engine behind it balances over two.
        worker('dp1', mocks.fleet.urls[1]!, mocks.endpoints[1]!),
      ],
    });
    await sendShared(r.url, 2, 4, 16, { 'x-worker-id': 'dp2#1' });
    // Requests at once, so the engine puts some on its second rank.
    await waitFor(
      async () => {
        await Promise.all(Array.from({ length: 6 }, (_, i) => sendShared(r.url, 1, 4, 16, { 'x-worker-id': 'dp1' }, 20_000 + 1000 * i)));
        return (await rankOf(r.url, 'dp1')).verdict === 'mismatch';
      },
      'rank 1 batches on the one-rank worker',
    );
    await waitFor(async () => (await rankOf(r.url, 'dp2')).verdict === 'mismatch', "the two-rank worker's mismatch");
    const dp2 = (await rankOf(r.url, 'dp2')).causes.find((c) => c.cause === 'unknown_rank')!;
    expect(dp2.detail).toContain('dp_rank 1 arrived on the endpoint of rank 0');
    const dp1 = (await rankOf(r.url, 'dp1')).causes.find((c) => c.cause === 'unknown_rank')!;
    expect(dp1.detail).toContain('dp_rank 1 arrived on a worker with ranks 0..0');
    expect(dp1.fix).toContain('data_parallel_size');
    expect(await metric(r.url, 'kvrouter_worker_diagnosis_cause', { cause: 'unknown_rank' })).toBe(2);
    await waitFor(() => linesAbout(r, 'dp1', 'data-parallel rank').length === 1, 'the log line');
  });
});

describe('KV events over HTTP for a rank the config does not know', () => {
  it('are refused with 400 and the worker is a mismatch naming the rank', async () => {
    const mocks = await startMocks({ blockSize: 16, publish: false });
    const r = await fleet(mocks, { models: [{ name: MODEL, tokenizer: 'bytes', block_size: 16 }], workers: [{ id: 'h', url: mocks.fleet.urls[0]!, model: MODEL, kv_events: { source: 'http' } }] });
    const res = await post(`${r.url}/router/kv-events`, { worker_id: 'h', dp_rank: 2, events: [] });
    expect(res.status).toBe(400);
    const w = await rankOf(r.url, 'h');
    expect(w.verdict).toBe('mismatch');
    expect(w.causes.find((c) => c.cause === 'unknown_rank')!.detail).toContain('dp_rank 2 arrived on a worker with ranks 0..0');
  });
});

describe('GET /router/diagnose with an admin token', () => {
  it('answers 401 without the token and the report with it', async () => {
    const mocks = await startMocks({ blockSize: 16 });
    const r = await fleet(mocks, { admin_token: 'diagnose-secret', models: [{ name: MODEL, tokenizer: 'bytes', block_size: 16 }], workers: [worker('w0', mocks.fleet.urls[0]!, mocks.endpoints[0]!)] });
    const denied = await fetch(`${r.url}/router/diagnose`);
    expect(denied.status).toBe(401);
    expect(((await denied.json()) as { error: { code: string } }).error.code).toBe('KVR_ERR_UNAUTHORIZED');
    expect((await diagnose(r.url, { authorization: 'Bearer diagnose-secret' })).workers.map((w) => w.worker)).toEqual(['w0']);
  });
});
