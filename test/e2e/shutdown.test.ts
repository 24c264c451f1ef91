// Graceful shutdown: the router stops taking requests, lets responses in
// flight finish up to shutdown_timeout_ms, then ends the rest with an error
// event and frees their bookings.
import { describe, expect, it } from 'vitest';
import { chat, post, settled, sseEvents, startStack, waitFor } from './stack.js';

describe('graceful shutdown', () => {
  it('drains a stream in flight and refuses new requests', async () => {
    const stack = await startStack({ workers: 1, speedup: 5, edit: (doc) => void (doc.limits = { shutdown_timeout_ms: 5000 }) });
    try {
      const res = await post(`${stack.url}/v1/chat/completions`, chat('finish me', { stream: true, max_tokens: 40 }));
      const reader = res.body!.getReader();
      const first = await reader.read();
      const closing = stack.router.close();
      const late = await post(`${stack.url}/v1/chat/completions`, chat('too late')).then((r) => r.status, () => 'refused');
      expect([503, 'refused']).toContain(late);
      let text = new TextDecoder().decode(first.value);
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
      const events = sseEvents(text);
      expect(events.at(-1)).toBe('[DONE]');
      expect(events).toHaveLength(41);
      await closing;
      expect(settled(stack.model)).toBe(true);
    } finally {
      await stack.close();
    }
  });

  it('ends streams still running at the timeout with an error event', async () => {
    const stack = await startStack({ workers: 1, speedup: 5, edit: (doc) => void (doc.limits = { shutdown_timeout_ms: 150 }) });
    try {
      const res = await post(`${stack.url}/v1/chat/completions`, chat('never finishes in time', { stream: true, max_tokens: 20_000 }));
      const text = res.text();
      await waitFor(() => stack.embedded.fleet.engines[0]!.stats().running === 1, 'the stream to be generating');
      await stack.router.close();
      const last = sseEvents(await text).at(-1) as { error: { code: string } };
      expect(last.error.code).toBe('KVR_ERR_SHUTTING_DOWN');
      expect(settled(stack.model)).toBe(true);
    } finally {
      await stack.close();
    }
  });
});
