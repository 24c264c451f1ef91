// A long conversation's later turns are parsed from the kept parse of the
// earlier ones: the router routes on the same prompt the engine tokenizes
// from its own whole parse of the bytes, and /metrics counts the reuse.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIN_REUSE_BYTES } from '../../server/request/body-parser.js';
import { chat, metric, post, startStack, type Stack } from './stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ tokenizer: 'tiktoken:o200k_base' });
});
afterAll(() => stack?.close());

const SYSTEM = `You route freight. ${'List the carrier, the depot and the window for every load you are asked about. '.repeat(Math.ceil(MIN_REUSE_BYTES / 60))}`;

interface Usage {
  usage: { prompt_tokens: number };
  choices: { message: { content: string } }[];
}

describe('request bodies of a long conversation', () => {
  it("routes a later turn on the prompt the engine sees, parsing only the turn's new messages", async () => {
    let messages = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Where does load 77 go?' },
    ];
    const first = await post(`${stack.url}/v1/chat/completions`, chat(messages));
    expect(first.status).toBe(200);
    const reusedBefore = await metric(stack.url, 'kvrouter_request_bodies_reused_total');
    for (const question of ['And load 78?', 'Which depot is closest?', 'Summarise.']) {
      const answer = ((await (await post(`${stack.url}/v1/chat/completions`, chat(messages))).json()) as Usage).choices[0]!.message.content;
      messages = [...messages, { role: 'assistant', content: answer }, { role: 'user', content: question }];
      const explained = (await (await post(`${stack.url}/router/explain`, chat(messages))).json()) as { prompt_tokens: number };
      const served = await post(`${stack.url}/v1/chat/completions`, chat(messages));
      expect(served.status).toBe(200);
      // The mock engine parses the whole body and tokenizes it itself.
      expect(((await served.json()) as Usage).usage.prompt_tokens).toBe(explained.prompt_tokens);
    }
    // Each turn's explain and chat request, and each answer's repeat, came from a kept parse.
    expect((await metric(stack.url, 'kvrouter_request_bodies_reused_total')) - reusedBefore).toBeGreaterThanOrEqual(9);
    expect(await metric(stack.url, 'kvrouter_request_body_reused_bytes_total')).toBeGreaterThan(9 * MIN_REUSE_BYTES);
    expect(await metric(stack.url, 'kvrouter_request_body_kept_bytes')).toBeGreaterThan(MIN_REUSE_BYTES);
  });

  it('answers a 400 for a later turn whose new part is not JSON, as for any malformed body', async () => {
    const messages = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Where does load 90 go?' },
    ];
    expect((await post(`${stack.url}/v1/chat/completions`, chat(messages))).status).toBe(200);
    const text = JSON.stringify(chat([...messages, { role: 'user', content: 'and 91?' }]));
    const broken = text.replace('"and 91?"}', '"and 91?",}');
    const answer = await post(`${stack.url}/v1/chat/completions`, broken);
    expect(answer.status).toBe(400);
    const error = ((await answer.json()) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('KVR_ERR_INVALID_REQUEST');
    expect(error.message).toContain('not valid JSON');
  });
});
