// Decode bookings shared between router replicas over a real nats-server: a
// disaggregated request routed by replica a books its decode worker, and
// replica b (in front of the same prefill and decode mock workers) sees that
// decode load in its ledger and sends its own next decode elsewhere; the
// booking goes when the request ends, and expires with the replica's other
// bookings when its snapshots stop.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { createLocalNatsServer, type LocalNatsServer } from '../../server/nats/local-server.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import type { ModelRuntime } from '../../server/workers/model-runtime.js';
import { waitFor } from '../helpers/wait.js';
import { completion, MODEL, prompt, startDisaggStack, type DisaggStack } from './disagg-stack.js';
import { post } from './stack.js';

let nats: LocalNatsServer;
let stack: DisaggStack;
let b: RunningRouter;

const natsOf = (replica: string) => ({ url: nats.url, replica_id: replica, subject_prefix: 'kvrpd', sync_interval_ms: 200, peer_timeout_ms: 1500 });
const modelOf = (r: RunningRouter): ModelRuntime => r.runtime.models.get(MODEL)!;
/** Requests decoding on each decode worker, in a router's ledger. */
const decoding = (m: ModelRuntime) =>
  Object.fromEntries(
    m.route.fleet
      .load()
      .filter((w) => w.worker.startsWith('d'))
      .map((w) => [w.worker, w.activeRequests]),
  );

beforeAll(async () => {
  nats = await createLocalNatsServer();
  await nats.start();
  stack = await startDisaggStack({ engine: 'vllm', roles: ['prefill', 'decode', 'decode'], minRemotePrefillTokens: 64, edit: (d) => (d.nats = natsOf('a')) });
  b = await startRouter(configFromDocument({ ...stack.document, nats: natsOf('b') }));
  await waitFor(() => modelOf(b).route.scheduler.stats().inFlight === 0 && stack.router.runtime.replication !== null, 'both replicas up');
});
afterAll(async () => {
  await b?.close();
  await stack?.close();
  await nats?.close();
});

/** A long streamed disaggregated request on replica a, open until `leave`. */
async function longDecode(): Promise<{ leave(): Promise<void> }> {
  const res = await post(`${stack.url}/v1/completions`, completion(prompt(400), { max_tokens: 4000, stream: true }));
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  await reader.read();
  return { leave: () => reader.cancel() };
}

describe('decode bookings across replicas', () => {
  it("shows replica a's decode booking in replica b's ledger, steers b's next decode away from it, and frees it when the request ends", async () => {
    const running = await longDecode();
    const a = stack.model;
    expect(a.disagg!.liveDecodes).toBe(1);
    const onA = decoding(a);
    const busy = Object.keys(onA).find((w) => onA[w] === 1)!;
    expect(busy).toBeDefined();
    await waitFor(() => decoding(modelOf(b))[busy] === 1, "b's ledger to show a's decode booking");
    const other = Object.keys(onA).find((w) => w !== busy)!;
    expect(decoding(modelOf(b))[other]).toBe(0);
    // b's own decode pick for a new long prompt takes the other decode worker.
    const x = (await (await post(`${b.url}/router/explain`, completion(prompt(400)))).json()) as { disaggregation: { mode: string; decode: { chosen: string } } };
    expect(x.disaggregation.mode).toBe('disaggregated');
    expect(x.disaggregation.decode.chosen).toBe(other);
    await running.leave();
    await waitFor(() => a.disagg!.liveDecodes === 0, "a to release the decode booking");
    await waitFor(() => decoding(modelOf(b))[busy] === 0, "b's ledger to drop it");
  });

  it('expires a peer decode booking with the peer, when its snapshots stop', async () => {
    const running = await longDecode();
    const onA = decoding(stack.model);
    const busy = Object.keys(onA).find((w) => onA[w] === 1)!;
    await waitFor(() => decoding(modelOf(b))[busy] === 1, "b's ledger to show a's decode booking");
    await nats.kill();
    // a still holds it; b hears nothing more from a and drops a's bookings after peer_timeout_ms.
    await waitFor(() => decoding(modelOf(b))[busy] === 0, "b to expire a's decode booking");
    expect(stack.model.disagg!.liveDecodes).toBe(1);
    await running.leave();
    await waitFor(() => stack.model.disagg!.liveDecodes === 0, 'a to release it');
  });
});
