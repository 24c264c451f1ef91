// Cache-aware routing end to end: mock workers publish real ZeroMQ KV events,
// the router indexes them and sends the next turn of a conversation where its
// prefix is cached; the official openai client talks to the router.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, MODEL, post, startStack, waitFor, type Stack } from './stack.js';

interface Explain {
  chosen: string;
  prompt_tokens: number;
  workers: { worker: string; overlap_blocks: number; cached_tokens: number }[];
}

const SYSTEM = `You are a careful assistant for a logistics company. ${'Answer with the route, the load and the time window for every shipment you are asked about. '.repeat(12)}`;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ tokenizer: 'tiktoken:o200k_base', workers: 3 });
});
afterAll(() => stack?.close());

describe('cache-aware routing over real KV events', () => {
  it("sends a conversation's second turn to the worker that cached the first, and explain shows the overlap", async () => {
    const turn1 = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Where is shipment 4411 going?' },
    ];
    const first = await post(`${stack.url}/v1/chat/completions`, chat(turn1));
    expect(first.status).toBe(200);
    const cachedOn = first.headers.get('x-kvrouter-worker')!;
    const answer = ((await first.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    const turn2 = chat([...turn1, { role: 'assistant', content: answer }, { role: 'user', content: 'And shipment 4412?' }]);

    let explained: Explain | undefined;
    await waitFor(async () => {
      explained = (await (await post(`${stack.url}/router/explain`, turn2)).json()) as Explain;
      return explained.workers.some((w) => w.overlap_blocks > 0);
    }, 'the first turn\'s KV events');
    const holder = explained!.workers.find((w) => w.worker === cachedOn)!;
    expect(holder.overlap_blocks).toBeGreaterThan(5);
    expect(explained!.workers.filter((w) => w.worker !== cachedOn).every((w) => w.overlap_blocks === 0)).toBe(true);
    expect(explained!.chosen).toBe(cachedOn);

    const second = await post(`${stack.url}/v1/chat/completions`, turn2);
    expect(second.headers.get('x-kvrouter-worker')).toBe(cachedOn);
    const usage = ((await second.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }).usage;
    // The engine tokenized the same prompt and reused exactly the blocks the router saw in its events.
    expect(usage.prompt_tokens).toBe(explained!.prompt_tokens);
    expect(usage.prompt_tokens_details.cached_tokens).toBe(holder.cached_tokens);
  });

  it('hashes the whole conversation: a different later message changes the prompt, an equal first message does not make it equal', async () => {
    const base = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
    ];
    const explain = async (body: unknown) => (await (await post(`${stack.url}/router/explain`, body)).json()) as Explain;
    const a = await explain(chat([...base, { role: 'user', content: 'tell me about shipment 1' }]));
    const b = await explain(chat([...base, { role: 'user', content: 'tell me about shipment 1 and the weather in the harbour today' }]));
    const withTools = await explain(chat([...base, { role: 'user', content: 'tell me about shipment 1' }], { tools: [{ type: 'function', function: { name: 'track', parameters: { type: 'object' } } }] }));
    expect(b.prompt_tokens).toBeGreaterThan(a.prompt_tokens);
    expect(withTools.prompt_tokens).toBeGreaterThan(a.prompt_tokens);
    const tokenizer = stack.model.tokenizer;
    expect(a.prompt_tokens).toBe(tokenizer.encodeChat([...base, { role: 'user', content: 'tell me about shipment 1' }]).length);
  });

  it('streams a chat completion to the official openai client', async () => {
    const client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'sk-local', maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say something short.' }],
      stream: true,
      max_tokens: 5,
    });
    const parts: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      parts.push(chunk.choices[0]?.delta.content ?? '');
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(parts.filter((p) => p.length > 0)).toHaveLength(5);
    expect(finish).toBe('length');
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  });

  it('reports health, readiness and the metric families, with the hit ratio of routed requests', async () => {
    expect(await (await fetch(`${stack.url}/health`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${stack.url}/ready`)).status).toBe(200);
    const text = await (await fetch(`${stack.url}/metrics`)).text();
    for (const family of [
      'kvrouter_requests_total',
      'kvrouter_time_to_first_token_seconds',
      'kvrouter_request_duration_seconds',
      'kvrouter_routing_decision_seconds',
      'kvrouter_queue_wait_seconds',
      'kvrouter_queue_depth',
      'kvrouter_kv_events_total',
      'kvrouter_cache_hit_ratio',
      'kvrouter_prefix_index',
      'kvrouter_core_live_bytes',
      'kvrouter_worker_load',
      'kvrouter_kv_source_connected',
    ]) {
      expect(text).toContain(`# TYPE ${family} `);
    }
    const prompt = await metric(stack.url, 'kvrouter_routed_prompt_tokens_total');
    const cached = await metric(stack.url, 'kvrouter_routed_cached_tokens_total');
    expect(cached).toBeGreaterThan(0);
    expect(await metric(stack.url, 'kvrouter_cache_hit_ratio', { model: MODEL })).toBeCloseTo(cached / prompt, 6);
    expect(await metric(stack.url, 'kvrouter_requests_total', { outcome: 'success', code: '200' })).toBe(3);
    expect(await metric(stack.url, 'kvrouter_kv_events_total', { type: 'stored' })).toBeGreaterThan(0);
    expect(await metric(stack.url, 'kvrouter_prefix_index', { stat: 'blocks' })).toBeGreaterThan(0);
  });
});
