// Failures around a prefill/decode handoff, end to end over real HTTP: a
// prefill worker that fails before the handoff is replaced by another, a
// decode worker that fails after it ends the response with an error, and in
// every case both sides' bookings are released.
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineKind } from '../../router/disagg/roles.js';
import { metric, post, sseEvents, waitFor } from './stack.js';
import { completion, prompt, settledBoth, startDisaggStack, stats, type DisaggStack } from './disagg-stack.js';

let stack: DisaggStack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});


/** The prefill worker that ran a prompt, and a longer prompt it will be picked for again (its prefix is cached there only). */
async function primePrefill(s: DisaggStack): Promise<{ prefill: string; other: string; next: number[] }> {
  const first = prompt(600);
  expect((await post(`${s.url}/v1/completions`, completion(first))).status).toBe(200);
  const prefill = (await stats(s, 'p0')).admittedPromptTokens > 0 ? 'p0' : 'p1';
  const next = [...first, ...prompt(600)];
  // Wait until the router knows where the prefix is.
  await waitFor(async () => {
    const x = (await (await post(`${s.url}/router/explain`, completion(next))).json()) as { chosen: string; disaggregation: { mode: string } };
    return x.disaggregation.mode === 'disaggregated' && x.chosen === prefill;
  }, 'the router to prefer the prefill worker that caches the prefix');
  return { prefill, other: prefill === 'p0' ? 'p1' : 'p0', next };
}

describe.each<EngineKind>(['vllm', 'sglang'])('handoff failures (%s)', (engine) => {
  it('a prefill worker that fails before the handoff: the request prefills on another and completes', async () => {
    stack = await startDisaggStack({ engine, roles: ['prefill', 'prefill', 'decode'] });
    const { prefill, other, next } = await primePrefill(stack);
    await stack.servers.get(prefill)!.close();
    const before = (await stats(stack, other)).admittedPromptTokens;
    const res = await post(`${stack.url}/v1/completions`, completion(next, { stream: true }));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
    const events = sseEvents(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.some((e) => typeof e === 'object' && 'error' in (e as object))).toBe(false);
    expect((await stats(stack, other)).admittedPromptTokens - before).toBe(next.length);
    expect(await metric(stack.url, 'kvrouter_upstream_retries_total', { worker: prefill })).toBe(1);
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('a decode worker that fails mid-stream: the stream ends with an error event', async () => {
    stack = await startDisaggStack({ engine, roles: ['prefill', 'decode'] });
    // The mock decode drops the connection after three tokens (the one-token prefill never reaches three).
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(700), { stream: true, max_tokens: 50 }), { 'x-mock-disconnect-after': '3' });
    expect(res.status).toBe(200);
    const events = sseEvents(await res.text());
    const last = events.at(-1) as { error?: { code?: string; message?: string } };
    expect(last.error?.code).toBe('KVR_ERR_UPSTREAM_INTERRUPTED');
    expect(last.error?.message).toMatch(/worker d0 failed mid-response/);
    expect(events.filter((e) => typeof e === 'object' && 'choices' in (e as object))).toHaveLength(3);
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('a decode worker that fails after the handoff, before its first byte: an error answer, not a second prefill', async () => {
    stack = await startDisaggStack({ engine, roles: ['prefill', 'decode'], limits: { max_retries: 2 } });
    await stack.servers.get('d0')!.close();
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(700)));
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('KVR_ERR_UPSTREAM');
    if (engine === 'vllm') {
      expect(body.error.message).toMatch(/worker d0 failed: .*after the prefill handed it the request's KV/);
      expect((await stats(stack, 'p0')).completed).toBe(1);
    }
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });
});

describe('handoff answers (vLLM)', () => {
  it('a prefill worker that refuses the request itself: the client gets its answer, both sides settle', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode'] });
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(700), { n: 2 }));
    expect(res.status).toBe(400);
    expect(res.headers.get('x-kvrouter-worker')).toBe('p0');
    expect(JSON.stringify(await res.json())).toMatch(/n must be 1/);
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('every prefill worker fails: the client learns why, and nothing stays booked', async () => {
    stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'prefill', 'decode'] });
    await stack.servers.get('p0')!.close();
    await stack.servers.get('p1')!.close();
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(700)));
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('KVR_ERR_UPSTREAM');
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });
});
