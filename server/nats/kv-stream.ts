// The JetStream stream that carries relayed KV events, and the router side of
// it: a KV source per worker that reads the worker's subjects from the start
// of the stream, so a replica that starts late (or was cut off) rebuilds the
// same index as the others instead of routing blind.
//
// Each worker gets an ordered consumer over <prefix>.kv.<worker>.*: the
// client checks the stream sequence of every delivery and recreates the
// consumer after a gap or a server restart, resuming after the last message
// it handed out. The engine's own sequence numbers (header Kvr-Seq) go
// through a WorkerSequencer per rank: batches the relay lost for good show as
// a gap, a restarted engine as numbers going back; either clears the rank's
// entries. A batch relayed in parts is joined first (kv-parts.ts) and offered
// once whole; an incomplete one is never offered, so it too shows as a gap.
// Readiness: the source counts as connected once it has read
// the stream up to where it stood when the consumer started, and stays so
// through NATS outages (the index is then stale, not empty).
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ModelRouter } from '../../router/model-router.js';
import { decodeKvBatch } from '../../router/kv-wire.js';
import type { WorkerConfig } from '../config/schema.js';
import type { WorkerSequencer } from '../kv-events/sequencer.js';
import { addSequencerCounters, rankSequencerCounters, rankSequencers, zeroCounters, type KvSource, type KvSourceCounters, type Logger } from '../workers/kv-sources.js';
import { PartAssembler, parsePartHeader } from './kv-parts.js';
import type { NatsLink } from './link.js';
import { KV_HEADERS, type NatsNames } from './subjects.js';

export interface KvStreamRetention {
  maxAgeMs: number;
  maxBytes: number;
}

/** Creates the KV-event stream unless it exists (an existing one is used as configured). */
export async function ensureKvStream(nc: NatsConnection, names: NatsNames, retention: KvStreamRetention): Promise<void> {
  const jsm = await jetstreamManager(nc);
  try {
    await jsm.streams.info(names.kvStream);
    return;
  } catch (error) {
    if (!/not found/i.test((error as Error).message)) throw error;
  }
  try {
    await jsm.streams.add({
      name: names.kvStream,
      subjects: [names.kvAll],
      max_age: retention.maxAgeMs * 1_000_000,
      max_bytes: retention.maxBytes,
    });
  } catch (error) {
    // Another relay or replica created it first.
    if (!/already in use|exists/i.test((error as Error).message)) throw error;
  }
}

export interface NatsKvSourceOptions {
  link: NatsLink;
  names: NatsNames;
  retention: KvStreamRetention;
}

export class NatsKvSource implements KvSource {
  readonly kind = 'nats';
  private readonly ranks: WorkerSequencer[];
  private readonly assemblers: PartAssembler[];
  private messages: ConsumerMessages | null = null;
  private caughtUp = false;
  private starting = false;
  private closed = false;
  private decodeErrors = 0;
  private skipped = 0;

  constructor(
    private readonly worker: WorkerConfig,
    route: ModelRouter,
    private readonly warn: Logger,
    private readonly options: NatsKvSourceOptions,
  ) {
    this.ranks = rankSequencers(worker, route, warn, 'relayed over NATS');
    this.assemblers = this.ranks.map(() => new PartAssembler());
    // The consumer is created on the first connection; the client keeps it going across reconnects.
    options.link.onUp((nc) => void this.start(nc));
  }

  connected(): boolean {
    return this.caughtUp && !this.closed;
  }

  counters(): KvSourceCounters {
    return addSequencerCounters({ ...zeroCounters(), decodeErrors: this.decodeErrors, skippedMessages: this.skipped }, this.ranks);
  }

  rankCounters(rank: number): KvSourceCounters | null {
    return rankSequencerCounters(this.ranks, rank);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.messages?.close().catch(() => {});
  }

  private async start(nc: NatsConnection): Promise<void> {
    if (this.messages || this.starting || this.closed) return;
    this.starting = true;
    try {
      await ensureKvStream(nc, this.options.names, this.options.retention);
      const consumer = await jetstream(nc).consumers.get(this.options.names.kvStream, {
        filter_subjects: this.options.names.kvWorker(this.worker.id),
        deliver_policy: DeliverPolicy.All,
      });
      if (this.closed) return;
      if ((await consumer.info(true)).num_pending === 0) this.caughtUp = true;
      this.messages = await consumer.consume({ callback: (m) => this.onMessage(m) });
      if (this.closed) await this.messages.close();
    } catch (error) {
      this.warn(`worker ${this.worker.id}: cannot read its relayed KV events yet (${(error as Error).message}); retrying when NATS reconnects`);
    } finally {
      this.starting = false;
    }
  }

  private onMessage(m: JsMsg): void {
    if (m.info.pending === 0) this.caughtUp = true;
    const rank = this.options.names.kvRank(m.subject);
    const seq = Number(m.headers?.get(KV_HEADERS.seq) ?? NaN);
    const sequencer = rank === null ? undefined : this.ranks[rank];
    if (!sequencer || !Number.isSafeInteger(seq) || seq < 0) {
      this.skipped++;
      return;
    }
    const partValue = m.headers?.get(KV_HEADERS.part) ?? '';
    const part = partValue === '' ? null : parsePartHeader(partValue);
    const assembler = this.assemblers[rank!]!;
    if (partValue !== '' && part === null) {
      this.skipped++;
      return;
    }
    try {
      const batch = decodeKvBatch(m.data);
      if (part === null) {
        this.skipped += assembler.reset();
        sequencer.offer(seq, batch);
        return;
      }
      const joined = assembler.offer(seq, part.index, part.count, batch);
      this.skipped += joined.discarded;
      if (joined.batch) sequencer.offer(seq, joined.batch);
    } catch (error) {
      this.decodeErrors++;
      this.warn(`worker ${this.worker.id}#${rank}: relayed KV batch ${seq} skipped: ${(error as Error).message}`);
    }
  }
}
