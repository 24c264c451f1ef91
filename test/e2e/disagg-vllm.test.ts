// Prefill/decode disaggregation with vLLM's protocol, end to end: the router
// in front of prefill-only and decode-only mock workers over real HTTP, KV
// events over real ZeroMQ, and the KV pulled between the mock workers.
import { afterEach, describe, expect, it } from 'vitest';
import { post, sseEvents, waitFor } from './stack.js';
import { BLOCK, completion, prompt, settledBoth, startDisaggStack, stats, type DisaggStack } from './disagg-stack.js';

let stack: DisaggStack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});


describe('disaggregation (vLLM)', () => {
  it('a long uncached prompt prefills on a prefill worker and decodes on a decode worker with the KV it pulled', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const text = prompt(1000);
    const res = await post(`${stack.url}/v1/completions`, completion(text));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
    const body = (await res.json()) as { usage: { completion_tokens: number }; kv_transfer_params?: unknown };
    expect(body.usage.completion_tokens).toBe(6);
    expect(body.kv_transfer_params).toBeUndefined();
    const [p, d] = [await stats(stack, 'p0'), await stats(stack, 'd0')];
    // The prefill ran the prompt for one token; the decode received every full block of it and computed the rest.
    expect(p).toMatchObject({ completed: 1, admittedPromptTokens: 1000, receivedTokens: 0 });
    expect(d).toMatchObject({ completed: 1, admittedPromptTokens: 1000, receivedTokens: Math.floor(1000 / BLOCK) * BLOCK });
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('streams the decode worker\'s tokens to the client', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(600), { stream: true, stream_options: { include_usage: true }, min_tokens: 2 }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const events = sseEvents(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.filter((e) => typeof e === 'object' && (e as { choices: unknown[] }).choices.length > 0)).toHaveLength(6);
    expect((await stats(stack, 'd0')).receivedTokens).toBe(592);
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('a short prompt runs whole on the decode worker; the prefill worker never sees it', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(100)));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
    expect((await stats(stack, 'p0')).admittedPromptTokens).toBe(0);
    expect((await stats(stack, 'd0')).receivedTokens).toBe(0);
  });

  it('a long prompt the decode worker caches runs there whole', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const text = prompt(800);
    expect((await post(`${stack.url}/v1/completions`, completion(text))).status).toBe(200);
    // The decode worker now caches the prompt's blocks (received KV is cached like computed KV); the router hears it.
    const explained = async () => (await (await post(`${stack!.url}/router/explain`, completion(text))).json()) as { disaggregation: { mode: string } };
    await waitFor(async () => (await explained()).disaggregation.mode === 'aggregated', 'the decode worker\'s cache to show in explain');
    const before = await stats(stack, 'p0');
    const res = await post(`${stack.url}/v1/completions`, completion(text));
    expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
    expect((await stats(stack, 'p0')).admittedPromptTokens).toBe(before.admittedPromptTokens);
  });

  it('explain shows the decision, the prefill pick and the decode pick', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'prefill', 'decode', 'decode'], minRemotePrefillTokens: 300 });
    const long = (await (await post(`${stack.url}/router/explain`, completion(prompt(900)))).json()) as Record<string, any>;
    expect(long.disaggregation).toMatchObject({ mode: 'disaggregated', engine: 'vllm', threshold_tokens: 300, uncached_tokens: 900 });
    expect(['p0', 'p1']).toContain(long.chosen);
    expect(long.disaggregation.prefill).toBe(long.chosen);
    expect(['d0', 'd1']).toContain(long.disaggregation.decode.chosen);
    expect(long.workers.filter((w: { eligible: boolean }) => w.eligible).map((w: { worker: string }) => w.worker).sort()).toEqual(['p0', 'p1']);
    const short = (await (await post(`${stack.url}/router/explain`, completion(prompt(50)))).json()) as Record<string, any>;
    expect(short.disaggregation).toMatchObject({ mode: 'aggregated', prefill: null, decode: null });
    expect(['d0', 'd1']).toContain(short.chosen);
  });

  it('many requests at once, long and short: every answer is whole and both ledgers settle', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'prefill', 'decode', 'decode'] });
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) => post(`${stack!.url}/v1/completions`, completion(prompt(i % 3 === 0 ? 120 : 700), { stream: i % 2 === 0 }))),
    );
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(res.headers.get('x-kvrouter-worker')).toMatch(/^d[01]$/);
      await res.text();
    }
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('a client that leaves mid-decode frees both sides', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const abort = new AbortController();
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(700), { stream: true, max_tokens: 5000 }), {}, abort.signal);
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle after the abort');
    await waitFor(async () => (await stats(stack!, 'd0')).aborted === 1, 'the decode worker to stop the request');
  });

  it('a client that leaves during the prefill frees both sides', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const abort = new AbortController();
    // The prefill worker holds its answer, so the client is gone before the handoff.
    const pending = post(`${stack.url}/v1/completions`, completion(prompt(700)), { 'x-mock-header-delay-ms': '60000' }, abort.signal).catch((e: Error) => e);
    await waitFor(() => stack!.model.disagg!.liveDecodes === 1, 'the decode booking beside the prefill');
    abort.abort();
    expect(await pending).toBeInstanceOf(Error);
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle after the abort');
  });
});
