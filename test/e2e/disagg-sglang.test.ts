// Prefill/decode disaggregation with SGLang's bootstrap protocol, end to end:
// the router sends both requests at once with the prefill server's bootstrap
// host and port and one room; the decode mock waits for that room's KV on the
// prefill mock (real HTTP between them) and the client reads the decode's answer.
import { afterEach, describe, expect, it } from 'vitest';
import { post, sseEvents, waitFor } from './stack.js';
import { BLOCK, completion, prompt, settledBoth, startDisaggStack, stats, type DisaggStack } from './disagg-stack.js';

let stack: DisaggStack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});


describe('disaggregation (SGLang)', () => {
  it('pairs a prefill and a decode server through one bootstrap room', async () => {
    stack = await startDisaggStack({ engine: 'sglang', roles: ['prefill', 'decode'] });
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(900)));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(6);
    expect(await stats(stack, 'p0')).toMatchObject({ completed: 1, admittedPromptTokens: 900 });
    expect(await stats(stack, 'd0')).toMatchObject({ completed: 1, receivedTokens: Math.floor(900 / BLOCK) * BLOCK });
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('streams the decode server\'s answer, held until the prefill answered', async () => {
    stack = await startDisaggStack({ engine: 'sglang', roles: ['prefill', 'prefill', 'decode', 'decode'] });
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(`${stack!.url}/v1/completions`, completion(prompt(700), { stream: true }))));
    for (const res of answers) {
      expect(res.status).toBe(200);
      const events = sseEvents(await res.text());
      expect(events.at(-1)).toBe('[DONE]');
      expect(events).toHaveLength(7);
    }
    expect((await stats(stack, 'd0')).receivedTokens + (await stats(stack, 'd1')).receivedTokens).toBe(8 * 688);
    await waitFor(() => settledBoth(stack!.model), 'both bookings to settle');
  });

  it('a decode-mode server cannot run whole requests: short prompts split too when no worker has role both', async () => {
    stack = await startDisaggStack({ engine: 'sglang', roles: ['prefill', 'decode'] });
    const x = (await (await post(`${stack.url}/router/explain`, completion(prompt(40)))).json()) as Record<string, any>;
    expect(x.disaggregation).toMatchObject({ mode: 'disaggregated', reason: 'no live worker runs whole requests', prefill: 'p0' });
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(40)));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
  });

  it('with a worker of role both, short prompts run whole there', async () => {
    stack = await startDisaggStack({ engine: 'sglang', roles: ['prefill', 'decode', 'both'] });
    const res = await post(`${stack.url}/v1/completions`, completion(prompt(40)));
    expect(res.status).toBe(200);
    expect(res.headers.get('x-kvrouter-worker')).toBe('b0');
    expect((await stats(stack, 'p0')).admittedPromptTokens).toBe(0);
  });

  it('the mock decode server refuses a request without a bootstrap room, as SGLang does', async () => {
    stack = await startDisaggStack({ engine: 'sglang', roles: ['prefill', 'decode'] });
    const res = await post(`${stack.servers.get('d0')!.url}/v1/completions`, completion(prompt(40)));
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toMatch(/bootstrap host/);
  });
});
