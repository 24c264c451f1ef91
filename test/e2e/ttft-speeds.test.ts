// The default ttft policy over real HTTP: the router learns each worker's
// prefill speed from the first bytes it relays, and shows the learned figures
// per worker in /metrics and in /router/explain, with each worker's predicted
// time to first token next to its cost.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, MODEL, post, startStack, type Stack } from './stack.js';

interface Explain {
  policy: string;
  workers: {
    worker: string;
    cost: number | null;
    prefill_tokens: number;
    predicted_ttft_ms: number | null;
    speed: { tokens_per_second: number; base_ms: number; factor: number; speed_class: number; observations: number } | null;
  }[];
}

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 2 });
});
afterAll(() => stack?.close());

describe('learned worker speeds', () => {
  it('counts every first token as an observation of its worker, in /metrics and explain', async () => {
    const requests = 6;
    for (let i = 0; i < requests; i++) {
      const response = await post(`${stack.url}/v1/chat/completions`, chat(`question ${i}: ${'tell me about the shipments in the harbour today. '.repeat(4 + i)}`));
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    // One observation per request's first token, over the workers that served them.
    expect(await metric(stack.url, 'kvrouter_worker_speed', { model: MODEL, figure: 'observations' })).toBe(requests);
    const explained = (await (await post(`${stack.url}/router/explain`, chat('what about tomorrow?'))).json()) as Explain;
    expect(explained.policy).toBe('ttft');
    expect(explained.workers).toHaveLength(2);
    let observed = 0;
    for (const w of explained.workers) {
      const speed = w.speed!;
      observed += speed.observations;
      expect(speed.tokens_per_second).toBeGreaterThan(0);
      expect(speed.tokens_per_second).toBe(await metric(stack.url, 'kvrouter_worker_speed', { worker: w.worker, figure: 'tokens_per_second' }));
      // Idle workers: the prediction is the fixed part plus the request's own tokens at the learned speed.
      expect(w.prefill_tokens).toBeGreaterThan(0);
      expect(w.predicted_ttft_ms).toBeGreaterThan(speed.base_ms);
      expect(w.cost).not.toBeNull();
    }
    expect(observed).toBe(requests);
  });
});
