// Load is counted on every path: after any mix of requests (streaming or not,
// queued behind a busy worker, cut by their worker before or after the first
// byte, failing with 5xx, timing out, left by their client at any point), the
// router's ledger, in-flight set and queues are empty again.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, post, settled, startStack, waitFor, type Stack } from './stack.js';

type Fault = 'none' | 'status-500' | 'cut-before' | 'cut-mid' | 'slow-headers' | 'timeout';

interface Call {
  stream: boolean;
  fault: Fault;
  /** Abort from the client after this many ms (null: never). */
  abortAfterMs: number | null;
  prompt: number;
}

const faultHeaders: Record<Fault, Record<string, string>> = {
  none: {},
  'status-500': { 'x-mock-status': '500' },
  'cut-before': { 'x-mock-disconnect-after': '0' },
  'cut-mid': { 'x-mock-disconnect-after': '2' },
  'slow-headers': { 'x-mock-header-delay-ms': '60' },
  timeout: { 'x-mock-header-delay-ms': '1000' },
};

const callArb: fc.Arbitrary<Call> = fc.record({
  stream: fc.boolean(),
  fault: fc.constantFrom<Fault>('none', 'none', 'status-500', 'cut-before', 'cut-mid', 'slow-headers', 'timeout'),
  abortAfterMs: fc.option(fc.integer({ min: 0, max: 80 }), { nil: null }),
  prompt: fc.integer({ min: 0, max: 5 }),
});

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    edit: (doc) => {
      doc.limits = { headers_timeout_ms: 300, max_retries: 1 };
      // Tight enough that concurrent requests queue behind each other's prefill.
      doc.policy_classes = [{ name: 'default', busy: { prefill_tokens: 200 } }];
    },
  });
});
afterAll(() => stack?.close());

async function run(call: Call): Promise<void> {
  const abort = new AbortController();
  const timer = call.abortAfterMs === null ? null : setTimeout(() => abort.abort(), call.abortAfterMs);
  try {
    const body = chat(`conversation ${call.prompt} ${'with some shared context '.repeat(8)}`, { stream: call.stream, max_tokens: 6 });
    const res = await post(`${stack.url}/v1/chat/completions`, body, faultHeaders[call.fault], abort.signal);
    await res.arrayBuffer();
  } catch {
    // aborted by the test, or a broken stream: both are outcomes under test
  } finally {
    if (timer) clearTimeout(timer);
  }
}

describe('the ledger after mixed traffic with faults', () => {
  it('is empty once every request has ended, whatever ended it', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(callArb, { minLength: 1, maxLength: 10 }), async (calls) => {
        await Promise.all(calls.map(run));
        await waitFor(() => settled(stack.model), 'every booking to be released');
        expect(stack.router.runtime.live.size).toBe(0);
      }),
      { numRuns: 12, seed: 20240611 },
    );
    // The mix really went through the failure paths.
    expect(await metric(stack.url, 'kvrouter_requests_total', { outcome: 'aborted' })).toBeGreaterThan(0);
    expect(await metric(stack.url, 'kvrouter_requests_total', { outcome: 'error' })).toBeGreaterThan(0);
    expect(await metric(stack.url, 'kvrouter_upstream_retries_total')).toBeGreaterThan(0);
    expect(await metric(stack.url, 'kvrouter_requests_in_flight')).toBe(0);
    for (const kind of ['prefill_tokens', 'decode_blocks', 'active_requests']) expect(await metric(stack.url, 'kvrouter_worker_load', { kind })).toBe(0);
  });
});
