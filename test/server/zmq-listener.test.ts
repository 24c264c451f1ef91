// The listener and the simulated engine's publisher over real ZeroMQ sockets on loopback.

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { Dealer, Publisher, Router } from 'zeromq';
import { decodeKvBatch, encodeKvBatch, encodeSeq } from '../../router/kv-wire.js';
import { type ZmqKvListenerOptions, ZmqKvListener } from '../../server/kv-events/zmq-listener.js';
import { type ZmqKvPublisherOptions, ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { ANY_PORT, Recorder, batchOf, sleep, stored, syncProbes, waitFor } from './zmq-helpers.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function publisher(options: Partial<ZmqKvPublisherOptions> = {}): Promise<ZmqKvPublisher> {
  const pub = new ZmqKvPublisher({ endpoint: ANY_PORT, ...options });
  cleanups.push(() => pub.close());
  await pub.start();
  return pub;
}

/**
 * A listener for the test. A replay that is answered must never time out on a
 * loaded machine, so replays wait a minute unless a test asks for a timeout.
 */
function listener(rec: Recorder, options: Partial<ZmqKvListenerOptions> & { endpoint: string }): ZmqKvListener {
  const l = new ZmqKvListener({ worker: { id: 'w1' }, onBatch: rec.onBatch, onStale: rec.onStale, onError: rec.onError, replayTimeoutMs: 60_000, ...options });
  cleanups.push(() => l.close());
  l.start();
  return l;
}

function workerStats(l: ZmqKvListener) {
  const [stats] = l.stats().workers;
  if (!stats) throw new Error('no worker seen');
  return stats;
}

describe('ZmqKvListener with ZmqKvPublisher', () => {
  it.each(['array', 'map'] as const)('delivers decoded batches in order and counts events by type (%s form)', async (form) => {
    const pub = await publisher({ form, topic: 'kv-events' });
    const rec = new Recorder();
    const l = listener(rec, { endpoint: pub.endpoint, topic: 'kv-events' });
    await syncProbes(() => pub.publish(batchOf()), rec);
    const sent = [
      batchOf([stored([1n << 63n, 5n], 4n)], 10.5, 0),
      batchOf([{ type: 'removed', blockHashes: [5n], medium: 'GPU' }], 11, 0),
      batchOf([{ type: 'cleared' }], 12, 0),
    ];
    const first = pub.nextSeq;
    for (const b of sent) await pub.publish(b);
    await waitFor(() => rec.lastSeq() === first + 2, 'three batches');
    expect(rec.batches.slice(-3)).toEqual(sent.map((batch, i) => ({ seq: first + i, batch, worker: { id: 'w1', rank: 0 } })));
    expect(workerStats(l)).toMatchObject({ stored: 1, removed: 1, cleared: 1, lastSeq: first + 2, gaps: 0, staleReports: 0 });
    expect(rec.stale).toEqual([]);
  });

  it('a gap with a replay socket recovers the missing batches in order', async () => {
    const pub = await publisher({ replayEndpoint: ANY_PORT });
    const rec = new Recorder();
    const l = listener(rec, { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint! });
    await syncProbes(() => pub.publish(batchOf()), rec);
    // Joining may already have replayed some probes.
    const replayedBefore = workerStats(l).replayedBatches;
    const next = pub.nextSeq;
    const missed = [batchOf([stored([21n])], 21), batchOf([stored([22n], 21n)], 22)];
    for (const b of missed) await pub.publish(b, { live: false });
    const after = batchOf([{ type: 'removed', blockHashes: [21n], medium: 'GPU' }], 23);
    await pub.publish(after);
    await waitFor(() => rec.lastSeq() === next + 2, 'the batch after the gap');
    expect(rec.batches.slice(-3).map((b) => [b.seq, b.batch])).toEqual([
      [next, missed[0]],
      [next + 1, missed[1]],
      [next + 2, after],
    ]);
    expect(rec.stale).toEqual([]);
    expect(workerStats(l)).toMatchObject({ replayedBatches: replayedBefore + 2, staleReports: 0 });
    expect(workerStats(l).gaps).toBeGreaterThanOrEqual(1);
    expect(l.stats().replay.completed).toBeGreaterThanOrEqual(1);
  });

  it('joining past seq 0 replays the batches published before the listener connected', async () => {
    const pub = await publisher({ replayEndpoint: ANY_PORT });
    const early = [batchOf([stored([1n])], 1), batchOf([stored([2n], 1n)], 2), batchOf([{ type: 'cleared' }], 3)];
    for (const b of early) await pub.publish(b);
    const rec = new Recorder();
    listener(rec, { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint! });
    await syncProbes(() => pub.publish(batchOf()), rec);
    expect(rec.batches.slice(0, 3).map((b) => b.batch)).toEqual(early);
    expect(rec.seqs()).toEqual(rec.seqs().map((_, i) => i));
    expect(rec.stale).toEqual([]);
  });

  it('a gap without a replay socket is reported stale before the batch after it', async () => {
    const pub = await publisher();
    const rec = new Recorder();
    const l = listener(rec, { endpoint: pub.endpoint });
    await syncProbes(() => pub.publish(batchOf()), rec);
    const lost = await pub.publish(batchOf([stored([9n])]), { live: false });
    const after = await pub.publish(batchOf([stored([10n])]));
    await waitFor(() => rec.lastSeq() === after, 'the batch after the gap');
    expect(rec.stale).toEqual([{ worker: { id: 'w1', rank: 0 }, kind: 'gap', expectedSeq: lost, receivedSeq: after, replay: 'not-configured' }]);
    expect(rec.log.slice(-2)).toEqual([`stale gap ${lost}->${after}`, `batch ${after}`]);
    expect(workerStats(l)).toMatchObject({ gaps: 1, staleReports: 1 });
  });

  it('a gap older than the engine\'s replay buffer is reported stale as incomplete', async () => {
    const pub = await publisher({ replayEndpoint: ANY_PORT, bufferBatches: 2 });
    const rec = new Recorder();
    listener(rec, { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint!, replayOnJoin: false });
    await syncProbes(() => pub.publish(batchOf()), rec);
    const first = pub.nextSeq;
    for (let i = 0; i < 3; i++) await pub.publish(batchOf([stored([BigInt(100 + i)])]), { live: false });
    await pub.publish(batchOf());
    await waitFor(() => rec.lastSeq() === first + 3, 'the batch after the gap');
    expect(rec.stale).toMatchObject([{ kind: 'gap', expectedSeq: first, receivedSeq: first + 2, replay: 'incomplete' }]);
    expect(rec.log.slice(-3)).toEqual([`stale gap ${first}->${first + 2}`, `batch ${first + 2}`, `batch ${first + 3}`]);
  });

  it('a replay socket that never answers is reported stale as failed after the timeout', async () => {
    const silent = new Router({ linger: 0 });
    cleanups.push(() => silent.close());
    await silent.bind(ANY_PORT);
    const pub = await publisher();
    const rec = new Recorder();
    const l = listener(rec, { endpoint: pub.endpoint, replayEndpoint: silent.lastEndpoint!, replayTimeoutMs: 200, replayOnJoin: false });
    await syncProbes(() => pub.publish(batchOf()), rec);
    const lost = await pub.publish(batchOf(), { live: false });
    const after = await pub.publish(batchOf());
    await waitFor(() => rec.stale.length === 1, 'the stale report');
    expect(rec.stale[0]).toMatchObject({ kind: 'gap', expectedSeq: lost, receivedSeq: after, replay: 'failed' });
    await waitFor(() => rec.lastSeq() === after, 'the batch after the gap');
    expect(l.stats().replay.failed).toBe(1);
    expect(rec.errors.some((e) => /replay/.test(e.message))).toBe(true);
  });

  it('a publisher restarted on the same address is reported as a restart, not replayed', async () => {
    const first = await publisher({ replayEndpoint: ANY_PORT });
    const rec = new Recorder();
    const l = listener(rec, { endpoint: first.endpoint, replayEndpoint: first.replayEndpoint! });
    await syncProbes(() => first.publish(batchOf()), rec);
    for (let i = 0; i < 40; i++) await first.publish(batchOf());
    await waitFor(() => rec.lastSeq() === first.nextSeq - 1, 'the first publisher\'s batches');
    const lastOld = rec.lastSeq();
    const replaysBefore = workerStats(l).replayRequests;
    await first.close();
    const second = new ZmqKvPublisher({ endpoint: first.endpoint });
    cleanups.push(() => second.close());
    await bindWithRetry(second);
    await syncProbes(() => second.publish(batchOf()), rec);
    const [report] = rec.stale;
    expect(rec.stale).toHaveLength(1);
    expect(report).toMatchObject({ kind: 'restart', expectedSeq: lastOld + 1, replay: null });
    expect(report!.receivedSeq).toBeLessThan(lastOld);
    expect(rec.lastSeq()).toBe(report!.receivedSeq);
    expect(workerStats(l)).toMatchObject({ restarts: 1, replayRequests: replaysBefore });
  });

  it('a worker without a fixed rank takes the batch\'s dp_rank; a resolver names the worker', async () => {
    const pub = await publisher();
    const byRank = new Recorder();
    const resolved = new Recorder();
    listener(byRank, { endpoint: pub.endpoint, worker: { id: 'w7' } });
    const l = listener(resolved, { endpoint: pub.endpoint, worker: (rank) => ({ id: `engine-${rank}`, rank: 0 }) });
    const probe = () => pub.publish(batchOf([], 1, 3));
    await syncProbes(probe, byRank);
    await syncProbes(probe, resolved);
    expect(byRank.batches.at(-1)!.worker).toEqual({ id: 'w7', rank: 3 });
    expect(resolved.batches.at(-1)!.worker).toEqual({ id: 'engine-3', rank: 0 });
    expect(l.stats().workers.map((w) => w.worker)).toEqual([{ id: 'engine-3', rank: 0 }]);
  });

  it('a throwing callback is counted and reported; later batches still arrive', async () => {
    const pub = await publisher();
    const rec = new Recorder();
    let throwNext = false;
    const l = listener(rec, {
      endpoint: pub.endpoint,
      onBatch: (batch, seq, worker) => {
        if (throwNext) {
          throwNext = false;
          throw new Error('router refused');
        }
        rec.onBatch(batch, seq, worker);
      },
    });
    await syncProbes(() => pub.publish(batchOf()), rec);
    throwNext = true;
    await pub.publish(batchOf());
    const after = await pub.publish(batchOf());
    await waitFor(() => rec.lastSeq() === after, 'the batch after the failing one');
    expect(l.stats().callbackErrors).toBe(1);
    expect(rec.errors.map((e) => e.message)).toContain('router refused');
  });
});

describe('ZmqKvListener against a raw publisher', () => {
  it('malformed messages are counted and skipped while later good messages still arrive', async () => {
    const raw = new Publisher({ linger: 0 });
    cleanups.push(() => raw.close());
    await raw.bind(ANY_PORT);
    const topic = 'kv-events';
    let seq = 0;
    const good = async (n = seq++) => {
      await raw.send([topic, encodeSeq(n), encodeKvBatch(batchOf([], n), 'array')]);
      return n;
    };
    const rec = new Recorder();
    const l = listener(rec, { endpoint: raw.lastEndpoint!, topic });
    await syncProbes(() => good(), rec);
    const before = l.stats();
    await raw.send([topic, encodeSeq(seq)]); // two frames
    await raw.send([topic, encodeSeq(seq).subarray(1), encodeKvBatch(batchOf(), 'array')]); // 7-byte seq
    await raw.send([topic, new Uint8Array(8).fill(0xff), encodeKvBatch(batchOf(), 'array')]); // seq -1
    await raw.send([`${topic}-other`, encodeSeq(seq), encodeKvBatch(batchOf(), 'array')]); // another topic, same prefix
    await raw.send([topic, encodeSeq(seq), Uint8Array.of(0xc1, 0x00, 0x93)]); // garbage msgpack
    const garbageSeq = seq++;
    await good();
    await waitFor(() => rec.lastSeq() === garbageSeq + 1, 'the good message after the bad ones');
    const stats = l.stats();
    expect(stats.messages - before.messages).toBe(6);
    expect(stats.skipped).toEqual({ frameCount: 1, seqFrame: 2, topic: 1 });
    expect(stats.decodeErrors).toBe(1);
    expect(rec.errors.some((e) => e.message.includes(`batch ${garbageSeq}`))).toBe(true);
    // The undecodable batch used up its number: the router must hear of the hole.
    expect(rec.stale).toMatchObject([{ kind: 'gap', expectedSeq: garbageSeq, receivedSeq: garbageSeq + 1 }]);
  });

  it('unknown event tags are counted per worker and the rest of the batch applies', async () => {
    const raw = new Publisher({ linger: 0 });
    cleanups.push(() => raw.close());
    await raw.bind(ANY_PORT);
    let seq = 0;
    const rec = new Recorder();
    const l = listener(rec, { endpoint: raw.lastEndpoint! });
    await syncProbes(async () => {
      await raw.send(['', encodeSeq(seq), encodeKvBatch(batchOf(), 'array')]);
      return seq++;
    }, rec);
    const { Packr } = await import('msgpackr');
    const payload = new Packr({ useRecords: false }).pack([5, [['BlockMoved', [1]], ['AllBlocksCleared']]]);
    await raw.send(['', encodeSeq(seq), payload]);
    await waitFor(() => rec.lastSeq() === seq, 'the batch with an unknown event');
    expect(rec.batches.at(-1)!.batch.events).toEqual([{ type: 'cleared' }]);
    expect(workerStats(l)).toMatchObject({ unknownEvents: 1, cleared: 1 });
  });
});

describe('ZmqKvPublisher replay server', () => {
  it('answers ["", start] with ["", seq, payload] per buffered batch from start, then ["", -1, ""]', async () => {
    const pub = await publisher({ replayEndpoint: ANY_PORT, form: 'map' });
    const batches = [batchOf([stored([1n])], 1), batchOf([stored([2n], 1n)], 2), batchOf([{ type: 'cleared' }], 3)];
    for (const b of batches) await pub.publish(b);
    const dealer = new Dealer({ linger: 0, receiveTimeout: 2000 });
    cleanups.push(() => dealer.close());
    dealer.connect(pub.replayEndpoint!);
    await dealer.send(['bad request']);
    await dealer.send(['', encodeSeq(1)]);
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await dealer.receive());
    expect(replies.map((r) => r.length)).toEqual([3, 3, 3]);
    expect(replies.map((r) => [...r[0]!])).toEqual([[], [], []]);
    expect(replies.map((r) => [...r[1]!])).toEqual([[...encodeSeq(1)], [...encodeSeq(2)], new Array(8).fill(0xff)]);
    expect(replies.slice(0, 2).map((r) => decodeKvBatch(r[2]!))).toEqual(batches.slice(1));
    expect(replies[2]![2]!.length).toBe(0);
    expect(pub.ignoredReplayRequests).toBe(1);
  });

  it('publish with an explicit seq lower than the next acts as a restart and empties the ring', async () => {
    const pub = await publisher({ replayEndpoint: ANY_PORT });
    await pub.publish(batchOf());
    await pub.publish(batchOf());
    expect(await pub.publish(batchOf([], 7), { seq: 0 })).toBe(0);
    expect(pub.nextSeq).toBe(1);
    const dealer = new Dealer({ linger: 0, receiveTimeout: 2000 });
    cleanups.push(() => dealer.close());
    dealer.connect(pub.replayEndpoint!);
    await dealer.send(['', encodeSeq(0)]);
    const [, seq0, payload] = await dealer.receive();
    expect([...seq0!]).toEqual([...encodeSeq(0)]);
    expect(decodeKvBatch(payload!).ts).toBe(7);
    const [, end] = await dealer.receive();
    expect([...end!]).toEqual(new Array(8).fill(0xff));
  });
});

describe('closing', () => {
  it('listener and publisher close without open handles: the process exits', async () => {
    const fixture = fileURLToPath(new URL('./zmq-listener-exit.fixture.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', fixture], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (out += chunk));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(null);
      }, 90_000);
      child.on('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(out).toContain('closed cleanly');
    expect(code).toBe(0);
  });
});

/** Rebinding a port just released can briefly fail while libzmq finishes closing the old socket. */
async function bindWithRetry(pub: ZmqKvPublisher): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await pub.start();
      return;
    } catch (error) {
      if (attempt >= 20) throw error;
      await sleep(50);
    }
  }
}
