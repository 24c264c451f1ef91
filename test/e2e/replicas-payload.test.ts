// Replica state under a NATS server's max_payload: a snapshot far larger than
// one message reaches a replica that missed every op, in parts; a message the
// server refuses is counted and logged once; a peer whose snapshots stop
// arriving loses its bookings, however many ops it still sends.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsLink } from '../../server/nats/link.js';
import { NatsNames } from '../../server/nats/subjects.js';
import { encodeSyncFrame, type SyncMessage } from '../../server/nats/sync-codec.js';
import { metric, post, waitFor } from './stack.js';
import { loadOf, MODEL, PREFIX, startReplicaStack, type Replica, type ReplicaStack } from './replicas-stack.js';

/** Small, so a few dozen bookings outgrow one message. */
const MAX_PAYLOAD = 8192;
/** Tokens of each held prompt (the byte tokenizer packs 4 bytes a token): 125 blocks of 16, 1,000 bytes of hashes. */
const PROMPT_TOKENS = 2000;
const HELD = 24;

let stack: ReplicaStack;
let a: Replica;
const log: string[] = [];
const aborts: AbortController[] = [];

beforeAll(async () => {
  stack = await startReplicaStack({ maxPayload: MAX_PAYLOAD, relays: false, replicas: [] });
  a = await stack.startReplica('a', pino({ level: 'warn' }, { write: (line: string) => void log.push(line) }));
});
afterAll(async () => {
  for (const abort of aborts) abort.abort();
  await stack?.close();
});

/** Starts `n` requests on `replica` that stay booked (the worker holds its answer back) until `release`. */
function hold(replica: Replica, n: number, tag: string): void {
  for (let i = 0; i < n; i++) {
    const abort = new AbortController();
    aborts.push(abort);
    const prompt = promptOf(`${tag} ${i}`, PROMPT_TOKENS);
    void post(`${replica.url}/v1/completions`, { model: MODEL, prompt, max_tokens: 1 }, { 'x-mock-header-delay-ms': '300000' }, abort.signal).catch(() => {});
  }
}

function release(): void {
  for (const abort of aborts.splice(0)) abort.abort();
}

/** A prompt of exactly `tokens` tokens under the byte tokenizer. */
function promptOf(tag: string, tokens: number): string {
  return `${tag} `.repeat(4 * tokens).slice(0, 4 * tokens);
}

const booked = (r: Replica) => r.model().route.fleet.bookedRequests;

describe('replica state under max_payload', () => {
  it('a snapshot several times max_payload reaches, in parts, a replica that missed every op; ops leave in frames that fit', async () => {
    hold(a, HELD, 'before b');
    await waitFor(() => booked(a) === HELD, 'a books every held request');
    // What a's snapshot carries in sequence hashes alone: about three times what the server takes in one message.
    expect(HELD * (PROMPT_TOKENS / 16) * 8).toBeGreaterThan(2.5 * MAX_PAYLOAD);
    const b = await stack.startReplica('b');
    await waitFor(() => booked(b) === HELD && loadOf(b) === loadOf(a), "b holds exactly a's bookings");
    expect(await metric(b.url, 'kvrouter_replica_peers', { model: MODEL, kind: 'bookings' })).toBe(HELD);
    // Now b listens: a's next bookings reach it as ops, about 24 KB of them within one frame delay.
    hold(a, HELD, 'with b');
    await waitFor(() => booked(a) === 2 * HELD && booked(b) === 2 * HELD && loadOf(b) === loadOf(a), "b follows a's new bookings");
    expect(await metric(a.url, 'kvrouter_replica_sync_messages_total', { direction: 'failed' })).toBe(0);
    expect(await metric(b.url, 'kvrouter_replica_sync_events_total', { event: 'expired_peer' })).toBe(0);
    release();
    await waitFor(() => booked(a) === 0 && booked(b) === 0, 'every booking freed on both replicas');
  });

  it('counts a message the server refuses and logs it once', async () => {
    const failed = () => metric(a.url, 'kvrouter_replica_sync_messages_total', { direction: 'failed' });
    expect(await failed()).toBe(0);
    // 20,000 tokens: 1,250 blocks, so the booking's add op alone is 10,000 bytes of hashes.
    for (let i = 0; i < 3; i++) {
      const res = await post(`${a.url}/v1/completions`, { model: MODEL, prompt: promptOf(`${i} long prompt`, 20_000), max_tokens: 1 });
      expect(res.status).toBe(200);
      await res.text();
    }
    await waitFor(async () => (await failed()) === 3, 'the three refused add ops to be counted');
    const lines = log.filter((line) => line.includes('replica sync could not publish'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/server max_payload 8192/);
  });

  it("drops a peer's bookings when no snapshot confirms them, though the peer keeps sending ops", async () => {
    const b = stack.replicas.find((r) => r.id === 'b')!;
    const ghost = new NatsLink({ url: stack.nats.url, name: 'ghost replica', warn: () => {} });
    ghost.start();
    await waitFor(() => ghost.up, 'the ghost to connect');
    const subject = new NatsNames(PREFIX).sync(MODEL);
    const send = (m: SyncMessage) => ghost.publish(subject, encodeSyncFrame([m]));
    const hashes = BigUint64Array.from([11n, 12n, 13n, 14n]);
    send({ kind: 'add', replica: 'ghost', id: 'phantom', worker: { id: 'mock-0', rank: 0 }, promptTokens: 64, cachedTokens: 0, seqHashes: hashes, localHashes: null, prefillDone: false });
    await waitFor(() => booked(b) === 1, 'b books the ghost booking');
    // The ghost keeps talking (an op every 100 ms), but never sends a snapshot.
    const chatter = setInterval(() => send({ kind: 'first', replica: 'ghost', id: 'chatter' }), 100);
    try {
      await waitFor(() => booked(b) === 0, 'the unconfirmed booking to expire');
    } finally {
      clearInterval(chatter);
      await ghost.close();
    }
    expect(await metric(b.url, 'kvrouter_replica_sync_events_total', { event: 'expired_peer' })).toBeGreaterThanOrEqual(1);
  });
});
