// The relay reads from the worker only as fast as the client reads: a paused
// client stalls the worker's writes instead of growing the router's buffers.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, post, settled, startStack, waitFor, type Stack } from './stack.js';

const CHUNK = `data: ${JSON.stringify({ pad: 'x'.repeat(16 * 1024) })}\n\n`;
const CHUNKS = 2000; // ~32 MB

let stack: Stack;
let worker: Server;
let written = 0;
/** Times the worker's socket refused more (write returned false), and whether it waits for 'drain' now. */
let stalls = 0;
let stalled = false;
beforeAll(async () => {
  // An SSE worker that honours backpressure: it writes only while its socket takes more.
  worker = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let sent = 0;
    const pump = () => {
      while (sent < CHUNKS) {
        sent++;
        written += CHUNK.length;
        if (!res.write(CHUNK)) {
          stalls++;
          stalled = true;
          return void res.once('drain', () => {
            stalled = false;
            pump();
          });
        }
      }
      res.end('data: [DONE]\n\n');
    };
    pump();
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(worker.address() as AddressInfo).port}`;
  stack = await startStack({ workers: 1, edit: (doc) => void (doc.workers as unknown[]).push({ id: 'firehose', url, model: 'mock-model' }) });
});
afterAll(async () => {
  await stack?.close();
  worker?.close();
});

describe('backpressure', () => {
  it('stalls the worker while the client does not read, and delivers every byte once it does', async () => {
    const res = await post(`${stack.url}/v1/chat/completions`, chat('flood me', { stream: true }), { 'x-worker-id': 'firehose' });
    const reader = res.body!.getReader();
    let received = (await reader.read()).value!.length;
    // Stalled for good: the worker waits for 'drain' and still waits after round trips through the
    // router (each several turns of the event loop in which a router that kept reading would drain it).
    await waitFor(async () => {
      if (!stalled) return false;
      const before = stalls;
      for (let i = 0; i < 10; i++) await (await fetch(`${stack.url}/health`)).arrayBuffer();
      return stalled && stalls === before;
    }, 'the worker to stay stalled');
    const total = CHUNKS * CHUNK.length;
    // Socket and stream buffers on each hop hold a few MB at most, far from the whole body.
    expect(written).toBeLessThan(total / 3);
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value.length;
    expect(received).toBe(total + 'data: [DONE]\n\n'.length);
    expect(settled(stack.model)).toBe(true);
  });
});
