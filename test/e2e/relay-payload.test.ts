// `kvrouter relay` against a NATS server with a small max_payload, and into a
// stream whose max_msg_size is smaller still: a batch larger than one message
// reaches the router whole (sent in parts under the smaller limit, headers
// included), and a batch holding an event no message can carry is dropped
// and counted, the router seeing its sequence number missing as a gap; the
// relay goes on relaying either way instead of retrying one batch forever. A
// stream whose limit changes while the relay runs is followed both ways.
import { jetstream, jetstreamManager, type StreamConfig } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlockStored, KvEventBatch } from '../../router/kv-events.js';
import { encodeKvBatch } from '../../router/kv-wire.js';
import { configFromDocument } from '../../server/config/load.js';
import { isTooLarge } from '../../server/nats/kv-message-limit.js';
import { NatsLink } from '../../server/nats/link.js';
import { createLocalNatsServer, type LocalNatsServer } from '../../server/nats/local-server.js';
import { KvRelay } from '../../server/nats/relay.js';
import { NatsNames } from '../../server/nats/subjects.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { storedEvent as stored } from '../helpers/stored-event.js';
import { metric, post, waitFor } from './stack.js';

const MAX_PAYLOAD = 16 * 1024;

const ids = (n: number, start: number) => Array.from({ length: n }, (_, i) => start + i);

/**
 * A NATS server, a router reading worker gpu-0's events from it, and a relay
 * from a ZeroMQ publisher; `stream` creates the KV stream first, with
 * settings of its own, as an operator would.
 */
class RelayRig {
  nats!: LocalNatsServer;
  publisher!: ZmqKvPublisher;
  router!: RunningRouter;
  link!: NatsLink;
  relay!: KvRelay;
  readonly warnings: string[] = [];
  readonly names: NatsNames;
  private ts = 1;

  constructor(prefix: string) {
    this.names = new NatsNames(prefix);
  }

  batch = (events: BlockStored[]): KvEventBatch => ({ ts: this.ts++, events, dpRank: 0 });

  overlap = async (prompt: number[]) => {
    const x = (await (await post(`${this.router.url}/router/explain`, { model: 'm', prompt })).json()) as { workers: { overlap_blocks: number }[] };
    return x.workers[0]!.overlap_blocks;
  };

  gaps = () => metric(this.router.url, 'kvrouter_kv_events_total', { worker: 'gpu-0', type: 'gap' });

  /** Changes the stream's config over a connection of the test's own, as an operator would. */
  async editStream(change: Partial<StreamConfig>): Promise<void> {
    const nc = await connect({ servers: this.nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.update(this.names.kvStream, { ...(await jsm.streams.info(this.names.kvStream)).config, ...change });
    } finally {
      await nc.close();
    }
  }
}

function relayRig(prefix: string, server: { maxPayload?: number }, stream?: Partial<StreamConfig>): RelayRig {
  const rig = new RelayRig(prefix);
  beforeAll(async () => {
    rig.nats = await createLocalNatsServer(server);
    await rig.nats.start();
    if (stream) {
      const nc = await connect({ servers: rig.nats.url });
      await (await jetstreamManager(nc)).streams.add({ name: rig.names.kvStream, subjects: [rig.names.kvAll], ...stream });
      await nc.close();
    }
    rig.publisher = new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: 'kv' });
    await rig.publisher.start();
    rig.router = await startRouter(
      configFromDocument({
        host: '127.0.0.1',
        port: 0,
        log_level: 'silent',
        nats: { url: rig.nats.url, subject_prefix: prefix },
        models: [{ name: 'm', tokenizer: 'bytes', block_size: 16 }],
        workers: [{ id: 'gpu-0', url: 'http://127.0.0.1:9', model: 'm', kv_events: { source: 'nats' } }],
      }),
    );
    rig.link = new NatsLink({ url: rig.nats.url, name: 'test relay', warn: () => {} });
    rig.link.start();
    rig.relay = new KvRelay({
      link: rig.link,
      names: rig.names,
      retention: { maxAgeMs: 600_000, maxBytes: 1 << 26 },
      worker: 'gpu-0',
      endpoint: rig.publisher.endpoint,
      replayEndpoint: rig.publisher.replayEndpoint!,
      topic: 'kv',
      warn: (line) => rig.warnings.push(line),
    });
    await rig.relay.start();
    // The ZeroMQ subscription connects in the background: publish until a batch gets through.
    const first = ids(64, 100);
    await waitFor(async () => {
      await rig.publisher.publish(rig.batch([stored(first)]));
      await new Promise((resolve) => setTimeout(resolve, 100));
      return (await rig.overlap(first)) === 4;
    }, 'the first batch reaches the router', 30_000);
  });
  afterAll(async () => {
    await rig.relay?.close();
    await rig.link?.close();
    await rig.router?.close();
    await rig.publisher?.close();
    await rig.nats?.close();
  });
  return rig;
}

describe('kvrouter relay under a small max_payload', () => {
  const rig = relayRig('payloadrelay', { maxPayload: MAX_PAYLOAD });
  const { overlap, gaps, batch } = rig;

  it('sends a batch larger than max_payload in parts that the router applies as one batch', { timeout: 120_000 }, async () => {
    const prompts = Array.from({ length: 150 }, (_, i) => ids(64, 10_000 + i * 64));
    const big = batch(prompts.map(stored));
    expect(encodeKvBatch(big, 'array').length).toBeGreaterThan(2 * MAX_PAYLOAD);
    const gapsBefore = await gaps();
    await rig.publisher.publish(big);
    await waitFor(async () => (await overlap(prompts[prompts.length - 1]!)) === 4, 'the last event of the big batch reaches the router', 60_000);
    for (const prompt of [prompts[0]!, prompts[74]!]) expect(await overlap(prompt)).toBe(4);
    // One batch, in order: no gap, no restart, and what came before is kept.
    expect(await gaps()).toBe(gapsBefore);
    expect(await metric(rig.router.url, 'kvrouter_kv_events_total', { worker: 'gpu-0', type: 'restart' })).toBe(0);
    expect(await overlap(ids(64, 100))).toBe(4);
    expect(rig.relay.stats().split).toBe(1);
    expect(rig.relay.stats().oversized).toBe(0);
  });

  it('drops a batch with an event too large for any message, counts it, and the router resyncs at the gap', { timeout: 120_000 }, async () => {
    const kept = ids(64, 100);
    expect(await overlap(kept)).toBe(4);
    const huge = ids(16 * 1024, 50_000);
    expect(encodeKvBatch(batch([stored(huge)]), 'array').length).toBeGreaterThan(MAX_PAYLOAD);
    const gapsBefore = await gaps();
    await rig.publisher.publish(batch([stored(huge)]));
    await waitFor(() => rig.relay.stats().oversized === 1, 'the relay to drop the oversized batch', 60_000);
    expect(rig.warnings.filter((w) => /dropped: its event 0 alone encodes to \d+ bytes, over the NATS server's max_payload of 16384/.test(w))).toHaveLength(1);
    const next = ids(48, 5000);
    await rig.publisher.publish(batch([stored(next)]));
    await waitFor(async () => (await overlap(next)) === 3, 'the batch after the dropped one reaches the router', 60_000);
    // The missing sequence number cleared what the router held of the worker.
    expect(await gaps()).toBe(gapsBefore + 1);
    expect(await overlap(kept)).toBe(0);
    expect(await overlap(huge)).toBe(0);
  });
});

describe('kvrouter relay into a stream whose max_msg_size is below max_payload', () => {
  const MAX_MSG = 8 * 1024;
  const rig = relayRig('msgsizerelay', {}, { max_msg_size: MAX_MSG });
  const { overlap, gaps, batch } = rig;
  const prompts = (n: number, start: number) => Array.from({ length: n }, (_, i) => ids(64, start + i * 64));
  /** Publishes retried because of their size (a retry after a timeout on a busy machine is not one). */
  const retried = () => rig.warnings.filter((w) => /retrying/.test(w) && /exceeds maximum allowed|max_payload size exceeded/.test(w));

  it('sends a batch larger than max_msg_size in parts under it, which the router applies as one batch', { timeout: 120_000 }, async () => {
    expect(rig.relay.stats().messageLimit).toBe(MAX_MSG);
    const many = prompts(100, 20_000);
    const big = batch(many.map(stored));
    expect(encodeKvBatch(big, 'array').length).toBeGreaterThan(2 * MAX_MSG);
    const gapsBefore = await gaps();
    await rig.publisher.publish(big);
    await waitFor(async () => (await overlap(many[99]!)) === 4, 'the last event of the big batch reaches the router', 60_000);
    expect(await overlap(many[0]!)).toBe(4);
    expect(await gaps()).toBe(gapsBefore);
    expect(rig.relay.stats()).toMatchObject({ split: 1, oversized: 0 });
    expect(retried()).toEqual([]);
  });

  it('follows the limit down when the stream is changed while it runs, and still delivers the next batch whole', { timeout: 120_000 }, async () => {
    await rig.editStream({ max_msg_size: MAX_MSG / 2 });
    // Published at once: the relay learns the new limit from the server's advisory or from the refusal, whichever comes first.
    const many = prompts(40, 40_000);
    const big = batch(many.map(stored));
    expect(encodeKvBatch(big, 'array').length).toBeGreaterThan(MAX_MSG);
    const gapsBefore = await gaps();
    await rig.publisher.publish(big);
    await waitFor(async () => (await overlap(many[39]!)) === 4, 'the batch sent after the change reaches the router', 60_000);
    expect(await overlap(many[0]!)).toBe(4);
    expect(await gaps()).toBe(gapsBefore);
    expect(rig.relay.stats()).toMatchObject({ split: 2, oversized: 0, messageLimit: MAX_MSG / 2 });
    expect(retried()).toEqual([]);
  });

  it('drops a batch with an event over max_msg_size (though within max_payload) once, logs it once, and goes on', { timeout: 120_000 }, async () => {
    const huge = ids(4096, 200_000);
    const oversized = encodeKvBatch(batch([stored(huge)]), 'array').length;
    expect(oversized).toBeGreaterThan(MAX_MSG / 2);
    expect(oversized).toBeLessThan(rig.link.maxPayload!);
    const gapsBefore = await gaps();
    await rig.publisher.publish(batch([stored(huge)]));
    const next = ids(48, 6000);
    await rig.publisher.publish(batch([stored(next)]));
    await waitFor(async () => (await overlap(next)) === 3, 'the batch after the dropped one reaches the router', 60_000);
    expect(rig.relay.stats().oversized).toBe(1);
    expect(rig.warnings.filter((w) => /KV batch \d+ of gpu-0#0 dropped: its event 0 alone encodes to \d+ bytes, over the stream's max_msg_size of 4096/.test(w))).toHaveLength(1);
    expect(await gaps()).toBe(gapsBefore + 1);
    expect(await overlap(huge)).toBe(0);
    expect(retried()).toEqual([]);
  });

  it("tells a refusal for size, the stream's or the client's, from other publish failures", async () => {
    const nc = await connect({ servers: rig.nats.url });
    const refusal = (publish: () => Promise<unknown>) => publish().then(() => null, (error: unknown) => error);
    try {
      const js = jetstream(nc);
      const subject = rig.names.kvSubject('refusal-probe', 0);
      const overStream = await refusal(() => js.publish(subject, new Uint8Array(MAX_MSG)));
      const overServer = await refusal(() => js.publish(subject, new Uint8Array(nc.info!.max_payload + 1)));
      const noStream = await refusal(() => js.publish('nostream.kv.x', new Uint8Array(8), { timeout: 500 }));
      expect(isTooLarge(overStream)).toBe(true);
      expect(isTooLarge(overServer)).toBe(true);
      expect(noStream).not.toBeNull();
      expect(isTooLarge(noStream)).toBe(false);
    } finally {
      await nc.close();
    }
  });

  it('follows the limit back up to max_payload when the stream allows any size again: a large batch goes whole', { timeout: 120_000 }, async () => {
    await rig.editStream({ max_msg_size: -1 });
    await waitFor(() => rig.relay.stats().messageLimit === rig.link.maxPayload, "the relay to read the stream's new limit", 30_000);
    const many = prompts(60, 60_000);
    await rig.publisher.publish(batch(many.map(stored)));
    await waitFor(async () => (await overlap(many[59]!)) === 4, 'the large batch reaches the router', 60_000);
    expect(rig.relay.stats()).toMatchObject({ split: 2, oversized: 1 });
  });
});
