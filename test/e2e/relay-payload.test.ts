// `kvrouter relay` against a NATS server with a small max_payload: a batch
// larger than one message reaches the router whole (sent in parts), and a
// batch holding an event no message can carry is dropped and counted, the
// router seeing its sequence number missing as a gap; the relay goes on
// relaying either way instead of retrying one batch forever.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlockStored, KvEventBatch } from '../../router/kv-events.js';
import { encodeKvBatch } from '../../router/kv-wire.js';
import { configFromDocument } from '../../server/config/load.js';
import { NatsLink } from '../../server/nats/link.js';
import { createLocalNatsServer, type LocalNatsServer } from '../../server/nats/local-server.js';
import { KvRelay } from '../../server/nats/relay.js';
import { NatsNames } from '../../server/nats/subjects.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import { ZmqKvPublisher } from '../../sim/kv-publisher.js';
import { storedEvent as stored } from '../helpers/stored-event.js';
import { metric, post, waitFor } from './stack.js';

const MAX_PAYLOAD = 16 * 1024;
const PREFIX = 'payloadrelay';

const ids = (n: number, start: number) => Array.from({ length: n }, (_, i) => start + i);

describe('kvrouter relay under a small max_payload', () => {
  let nats: LocalNatsServer;
  let publisher: ZmqKvPublisher;
  let router: RunningRouter;
  let link: NatsLink;
  let relay: KvRelay;
  const warnings: string[] = [];
  let ts = 1;
  const batch = (events: BlockStored[]): KvEventBatch => ({ ts: ts++, events, dpRank: 0 });
  const overlap = async (prompt: number[]) => {
    const x = (await (await post(`${router.url}/router/explain`, { model: 'm', prompt })).json()) as { workers: { overlap_blocks: number }[] };
    return x.workers[0]!.overlap_blocks;
  };
  const gaps = () => metric(router.url, 'kvrouter_kv_events_total', { worker: 'gpu-0', type: 'gap' });

  beforeAll(async () => {
    nats = await createLocalNatsServer({ maxPayload: MAX_PAYLOAD });
    await nats.start();
    publisher = new ZmqKvPublisher({ endpoint: 'tcp://127.0.0.1:*', replayEndpoint: 'tcp://127.0.0.1:*', topic: 'kv' });
    await publisher.start();
    router = await startRouter(
      configFromDocument({
        host: '127.0.0.1',
        port: 0,
        log_level: 'silent',
        nats: { url: nats.url, subject_prefix: PREFIX },
        models: [{ name: 'm', tokenizer: 'bytes', block_size: 16 }],
        workers: [{ id: 'gpu-0', url: 'http://127.0.0.1:9', model: 'm', kv_events: { source: 'nats' } }],
      }),
    );
    link = new NatsLink({ url: nats.url, name: 'test relay', warn: () => {} });
    link.start();
    relay = new KvRelay({
      link,
      names: new NatsNames(PREFIX),
      retention: { maxAgeMs: 600_000, maxBytes: 1 << 26 },
      worker: 'gpu-0',
      endpoint: publisher.endpoint,
      replayEndpoint: publisher.replayEndpoint!,
      topic: 'kv',
      warn: (line) => warnings.push(line),
    });
    await relay.start();
    // The ZeroMQ subscription connects in the background: publish until a batch gets through.
    const first = ids(64, 100);
    await waitFor(async () => {
      await publisher.publish(batch([stored(first)]));
      await new Promise((resolve) => setTimeout(resolve, 100));
      return (await overlap(first)) === 4;
    }, 'the first batch reaches the router', 30_000);
  });
  afterAll(async () => {
    await relay?.close();
    await link?.close();
    await router?.close();
    await publisher?.close();
    await nats?.close();
  });

  it('sends a batch larger than max_payload in parts that the router applies as one batch', { timeout: 120_000 }, async () => {
    const prompts = Array.from({ length: 150 }, (_, i) => ids(64, 10_000 + i * 64));
    const big = batch(prompts.map(stored));
    expect(encodeKvBatch(big, 'array').length).toBeGreaterThan(2 * MAX_PAYLOAD);
    const gapsBefore = await gaps();
    await publisher.publish(big);
    await waitFor(async () => (await overlap(prompts[prompts.length - 1]!)) === 4, 'the last event of the big batch reaches the router', 60_000);
    for (const prompt of [prompts[0]!, prompts[74]!]) expect(await overlap(prompt)).toBe(4);
    // One batch, in order: no gap, no restart, and what came before is kept.
    expect(await gaps()).toBe(gapsBefore);
    expect(await metric(router.url, 'kvrouter_kv_events_total', { worker: 'gpu-0', type: 'restart' })).toBe(0);
    expect(await overlap(ids(64, 100))).toBe(4);
    expect(relay.stats().split).toBe(1);
    expect(relay.stats().oversized).toBe(0);
  });

  it('drops a batch with an event too large for any message, counts it, and the router resyncs at the gap', { timeout: 120_000 }, async () => {
    const kept = ids(64, 100);
    expect(await overlap(kept)).toBe(4);
    const huge = ids(16 * 1024, 50_000);
    expect(encodeKvBatch(batch([stored(huge)]), 'array').length).toBeGreaterThan(MAX_PAYLOAD);
    const gapsBefore = await gaps();
    await publisher.publish(batch([stored(huge)]));
    await waitFor(() => relay.stats().oversized === 1, 'the relay to drop the oversized batch', 60_000);
    expect(warnings.filter((w) => /dropped: its event 0 alone encodes to \d+ bytes, over the NATS server's max_payload of 16384/.test(w))).toHaveLength(1);
    const next = ids(48, 5000);
    await publisher.publish(batch([stored(next)]));
    await waitFor(async () => (await overlap(next)) === 3, 'the batch after the dropped one reaches the router', 60_000);
    // The missing sequence number cleared what the router held of the worker.
    expect(await gaps()).toBe(gapsBefore + 1);
    expect(await overlap(kept)).toBe(0);
    expect(await overlap(huge)).toBe(0);
  });
});
