// Router replicas sharing state over NATS: conversations stick to one worker
// whichever replica receives a turn, ledgers agree after a burst, a late replica catches up from JetStream, and a NATS outage
// degrades to local state and converges again when NATS returns.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat, metric, post, waitFor } from './stack.js';
import { APPROX, loadOf, MODEL, startReplicaStack, type Replica, type ReplicaStack } from './replicas-stack.js';

let stack: ReplicaStack;
let a: Replica;
let b: Replica;

beforeAll(async () => {
  stack = await startReplicaStack();
  [a, b] = stack.replicas as [Replica, Replica];
  await waitFor(async () => (await fetch(`${a.url}/ready`)).status === 200 && (await fetch(`${b.url}/ready`)).status === 200, 'both replicas ready');
  await waitFor(async () => (await metric(a.url, 'kvrouter_replica_peers', { kind: 'replicas', model: MODEL })) === 1, 'a hears b', 5000);
});
afterAll(() => stack?.close());

/** A conversation's next turn: the history so far plus a new user message. */
function turnBody(model: string, conversation: number, turn: number): Record<string, unknown> {
  const messages: { role: string; content: string }[] = [];
  for (let t = 0; t <= turn; t++) {
    messages.push({ role: 'user', content: `conversation ${conversation} turn ${t}: ${'tell me more about the routing of requests '.repeat(6)}` });
    if (t < turn) messages.push({ role: 'assistant', content: `answer ${t} of conversation ${conversation} `.repeat(4) });
  }
  return chat(messages, { model, max_tokens: 4 });
}

async function send(replica: Replica, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<string> {
  const res = await post(`${replica.url}/v1/chat/completions`, body, headers);
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('x-kvrouter-worker')!;
}

async function overlapOn(replica: Replica, body: Record<string, unknown>): Promise<Record<string, number>> {
  const x = (await (await post(`${replica.url}/router/explain`, body)).json()) as { workers: { worker: string; overlap_blocks: number }[] };
  return Object.fromEntries(x.workers.map((w) => [w.worker, w.overlap_blocks]));
}

/**
 * Starts `n` streamed requests split across the replicas and resolves once each has its first chunk.
 * They are long enough (seconds of decoding) to stay in flight however slowly the test runs, until
 * `leave` cancels them.
 */
async function burst(n: number, tag: string): Promise<{ leave(): Promise<void> }> {
  const readers = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const replica = i % 2 === 0 ? a : b;
      const res = await post(`${replica.url}/v1/completions`, { model: MODEL, prompt: `${tag} burst ${i} `.repeat(20 + i), max_tokens: 4000, stream: true });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();
      return reader;
    }),
  );
  return { leave: () => Promise.all(readers.map((r) => r.cancel())).then(() => {}) };
}

const booked = (r: Replica) => r.model().route.fleet.bookedRequests;

describe('replicas over NATS', () => {
  it("keeps a multi-turn conversation's turns on one worker whichever replica receives them", async () => {
    for (const model of [MODEL, APPROX]) {
      for (let c = 0; c < 3; c++) {
        const workers = new Set<string>();
        const session = `${model}-conv-${c}`;
        let last: string | null = null;
        for (let turn = 0; turn < 4; turn++) {
          const replica = turn % 2 === 0 ? a : b;
          // The binding the other replica made reaches this one over NATS; the turn goes once it has.
          const bound = () => replica.model(model).route.sessions!.lookup(session, Date.now())?.worker.id;
          if (last !== null) await waitFor(() => bound() === last, `${replica.id} to hear that ${session} is bound to ${last}`);
          last = await send(replica, turnBody(model, c, turn), { 'x-session-id': session });
          workers.add(last);
        }
        expect([...workers], `${model} conversation ${c}`).toHaveLength(1);
      }
    }
    // Both replicas hold the same bindings.
    const bound = (r: Replica) => Object.fromEntries([...r.model(APPROX).route.sessions!.list(Date.now())].map(([s, binding]) => [s, binding.worker.id]));
    expect(bound(a)).toEqual(bound(b));
    expect(Object.keys(bound(a))).toHaveLength(3);
  });

  it("both replicas' ledgers agree on every worker's load after a burst", async () => {
    const running = await burst(12, 'first');
    await waitFor(() => loadOf(a) === loadOf(b) && booked(a) === 12, "b's share of the burst in a's ledger and a's in b's");
    expect(loadOf(a)).toEqual(loadOf(b));
    expect(booked(a)).toBe(12);
    await running.leave();
    await waitFor(() => booked(a) === 0 && booked(b) === 0, 'every booking freed on both replicas');
  });

  it('a replica started after the events were published routes the second turn to the caching worker', async () => {
    const first = turnBody(MODEL, 99, 0);
    const worker = await send(a, first);
    await waitFor(async () => (await overlapOn(b, turnBody(MODEL, 99, 1)))[worker]! > 0, "b's index learns turn 1 from the stream");
    const late = await stack.startReplica('late');
    await waitFor(async () => (await fetch(`${late.url}/ready`)).status === 200, 'the late replica caught up');
    const overlaps = await overlapOn(late, turnBody(MODEL, 99, 1));
    expect(overlaps[worker]).toBeGreaterThan(0);
    expect(await send(late, turnBody(MODEL, 99, 1))).toBe(worker);
    await late.router.close();
    stack.replicas.pop();
  });

  it('keeps serving when NATS dies and converges again when it returns', async () => {
    await stack.nats.kill();
    await waitFor(async () => (await metric(a.url, 'kvrouter_nats_connected')) === 0, 'a notices the outage');
    for (let i = 0; i < 4; i++) await send(i % 2 === 0 ? a : b, turnBody(MODEL, 200 + i, 0));
    expect(await metric(a.url, 'kvrouter_nats_disconnects_total')).toBeGreaterThanOrEqual(1);
    await stack.nats.start();
    await waitFor(async () => (await metric(a.url, 'kvrouter_nats_connected')) === 1 && (await metric(b.url, 'kvrouter_nats_connected')) === 1, 'both reconnect');
    // Events published during and after the outage reach both indexes.
    const worker = await send(a, turnBody(MODEL, 300, 0));
    await waitFor(async () => (await overlapOn(b, turnBody(MODEL, 300, 1)))[worker]! > 0, "b's index learns a's new turn after the outage");
    const running = await burst(8, 'after outage');
    await waitFor(() => loadOf(a) === loadOf(b) && booked(a) === 8, 'the ledgers to agree after the outage');
    expect(loadOf(a)).toEqual(loadOf(b));
    await running.leave();
    await waitFor(() => booked(a) === 0 && booked(b) === 0, 'every booking freed on both replicas');
  });
});
