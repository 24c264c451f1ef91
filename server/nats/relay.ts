// `kvrouter relay` as a library: subscribes to one engine's ZeroMQ KV-event
// publisher (every data-parallel rank), keeps each rank's stream gap-free
// with the engine's replay socket (ZmqKvListener), and republishes each batch
// to JetStream on <prefix>.kv.<worker>.<rank> with the engine's sequence
// number and timestamp in headers. Routers read the stream (kv-stream.ts).
//
// Batches are published one at a time, in order, each acknowledged by the
// stream before the next; while NATS is away they wait in a bounded queue
// (the oldest are dropped past maxQueued, which routers then see as a gap).
// A relay that restarts finds the last batch it published per rank in the
// stream and skips the engine's replayed history up to it: a batch is taken
// as already relayed when neither its sequence number nor its timestamp is
// past the last one's (a restarted engine numbers from 0 again, but later).
// A batch larger than one message may be (the smaller of the server's
// max_payload and the stream's max_msg_size, headers included:
// kv-message-limit.ts) goes in parts (kv-parts.ts); one holding an event too
// large for any message is dropped whole and counted, and so is one the
// stream still refuses as too large after the relay has read its limit
// again. Routers see a dropped batch's sequence number missing as a gap (they
// clear the rank's entries and go on from the next batch). Nothing is
// retried that the stream will always refuse.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { MsgHdrsImpl, type NatsConnection } from '@nats-io/transport-node';
import type { KvEventBatch } from '../../router/kv-events.js';
import { offsetEndpoint } from '../kv-events/rank-endpoints.js';
import { ZmqKvListener } from '../kv-events/zmq-listener.js';
import type { Logger } from '../workers/kv-sources.js';
import { isTooLarge, KvMessageLimit } from './kv-message-limit.js';
import { parsePartHeader, partHeader, splitKvBatch } from './kv-parts.js';
import { ensureKvStream, type KvStreamRetention } from './kv-stream.js';
import type { NatsLink } from './link.js';
import { KV_HEADERS, type NatsNames } from './subjects.js';

export interface KvRelayOptions {
  link: NatsLink;
  names: NatsNames;
  retention: KvStreamRetention;
  /** The worker id routers know the engine by. */
  worker: string;
  /** The engine's PUB endpoint; rank r publishes on port + r. */
  endpoint: string;
  replayEndpoint?: string;
  topic?: string;
  dataParallelSize?: number;
  /** Batches kept while NATS is away; default 100,000. */
  maxQueued?: number;
  warn: Logger;
}

export interface KvRelayStats {
  relayed: number;
  /** Batches already in the stream when the relay (re)started. */
  skipped: number;
  /** Batches dropped from a full queue. */
  dropped: number;
  /** Batches dropped because they cannot fit: one of their events alone is larger than a message may be, or the stream refused them as too large. */
  oversized: number;
  /** Batches sent in more than one message. */
  split: number;
  queued: number;
  /** Per rank: the ZeroMQ subscription is connected. */
  connected: boolean[];
  /** Per rank: the last sequence number published, or null. */
  lastSeq: (number | null)[];
  /** The most bytes one message may take now (headers included): the smaller of max_payload and the stream's max_msg_size. */
  messageLimit: number;
}

interface Pending {
  rank: number;
  seq: number;
  batch: KvEventBatch;
}

export class KvRelay {
  private readonly listeners: ZmqKvListener[] = [];
  private readonly queue: Pending[] = [];
  private readonly resume = new Map<number, { seq: number; ts: number }>();
  private readonly lastSeq: (number | null)[];
  private readonly ranks: number;
  private readonly maxQueued: number;
  private readonly limit: KvMessageLimit;
  private counts = { relayed: 0, skipped: 0, dropped: 0, oversized: 0, split: 0 };
  private pumping = false;
  private started: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly options: KvRelayOptions) {
    this.ranks = options.dataParallelSize ?? 1;
    this.maxQueued = options.maxQueued ?? 100_000;
    this.lastSeq = new Array<number | null>(this.ranks).fill(null);
    this.limit = new KvMessageLimit(options.link, options.names.kvStream, options.warn);
  }

  /** Resolves once the stream is ready and the engine's publisher is subscribed (waits for NATS). */
  start(): Promise<void> {
    this.started ??= new Promise<void>((resolve, reject) => {
      let first = true;
      this.options.link.onUp((nc) => {
        if (first) {
          first = false;
          this.prepare(nc).then(resolve, reject);
        } else {
          // The server may be another one, or the stream changed while the relay was away.
          void this.limit.read(nc).then(() => this.pump());
        }
      });
    });
    return this.started;
  }

  stats(): KvRelayStats {
    return {
      ...this.counts,
      queued: this.queue.length,
      connected: this.listeners.map((l) => l.connected),
      lastSeq: [...this.lastSeq],
      messageLimit: this.limit.current().bytes,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.listeners.map((l) => l.close()));
  }

  private async prepare(nc: NatsConnection): Promise<void> {
    const { names, worker } = this.options;
    await ensureKvStream(nc, names, this.options.retention);
    await this.limit.read(nc);
    const jsm = await jetstreamManager(nc);
    for (let rank = 0; rank < this.ranks; rank++) {
      const last = await jsm.streams.getMessage(names.kvStream, { last_by_subj: names.kvSubject(worker, rank) }).catch(() => null);
      const seq = Number(last?.header.get(KV_HEADERS.seq));
      const ts = Number(last?.header.get(KV_HEADERS.ts));
      // Stopped between the parts of a batch: that batch is sent again, whole.
      const part = last?.header.has(KV_HEADERS.part) ? parsePartHeader(last.header.get(KV_HEADERS.part)) : null;
      const complete = part === null || part.index === part.count - 1;
      if (last && Number.isSafeInteger(seq) && Number.isFinite(ts)) this.resume.set(rank, { seq: complete ? seq : seq - 1, ts });
    }
    if (this.closed) return;
    for (let rank = 0; rank < this.ranks; rank++) {
      const listener = new ZmqKvListener({
        endpoint: offsetEndpoint(this.options.endpoint, rank),
        replayEndpoint: this.options.replayEndpoint === undefined ? undefined : offsetEndpoint(this.options.replayEndpoint, rank),
        topic: this.options.topic,
        worker: { id: worker, rank },
        onBatch: (batch, seq) => this.offer({ rank, seq, batch }),
        onStale: (reason) =>
          this.options.warn(`worker ${worker}#${rank}: KV event ${reason.kind} (expected seq ${reason.expectedSeq}, got ${reason.receivedSeq}) the engine could not replay; routers will clear its entries`),
        onError: (error) => this.options.warn(`worker ${worker}#${rank}: ${error.message}`),
      });
      listener.start();
      this.listeners.push(listener);
    }
  }

  private offer(item: Pending): void {
    const resume = this.resume.get(item.rank);
    if (resume) {
      if (item.seq <= resume.seq && item.batch.ts <= resume.ts) {
        this.counts.skipped++;
        return;
      }
      this.resume.delete(item.rank);
    }
    if (this.queue.length >= this.maxQueued) {
      this.queue.shift();
      this.counts.dropped++;
    }
    this.queue.push(item);
    void this.pump();
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        const nc = this.options.link.connection;
        // Down: the next reconnect calls pump again.
        if (!nc) return;
        const item = this.queue[0]!;
        let published: boolean;
        try {
          published = await this.publish(nc, item);
        } catch (error) {
          if (this.options.link.up) {
            this.options.warn(`relaying batch ${item.seq} of ${this.options.worker}#${item.rank} failed (${(error as Error).message}); retrying`);
            await new Promise((resolve) => setTimeout(resolve, 200));
          }
          continue;
        }
        if (this.queue[0] === item) this.queue.shift();
        if (!published) continue;
        this.lastSeq[item.rank] = item.seq;
        this.counts.relayed++;
      }
    } finally {
      this.pumping = false;
    }
  }

  /**
   * Sends the batch (in parts when it must); false when it was dropped as too
   * large. A refusal as too large is retried only under a smaller limit than
   * the refused one (the stream's, read again), so it ends.
   */
  private async publish(nc: NatsConnection, item: Pending): Promise<boolean> {
    const where = `${this.options.worker}#${item.rank}`;
    const drop = (why: string) => {
      this.counts.oversized++;
      this.options.warn(`KV batch ${item.seq} of ${where} dropped: ${why}; routers will see a gap and clear the rank's entries`);
      return false;
    };
    let refusedAt = Infinity;
    for (;;) {
      const limit = this.limit.current();
      if (limit.bytes >= refusedAt) return drop(`the stream refused a part as too large though none was over ${refusedAt} bytes, and ${limit.bound}, read again, is ${limit.bytes}`);
      // Every part carries headers; the largest a part of this batch can have is taken off the budget.
      const parts = Math.max(1, item.batch.events.length);
      const split = splitKvBatch(item.batch, limit.bytes - this.headers(item, parts - 1, parts).encode().length);
      if (split.kind === 'oversized') return drop(`its event ${split.eventIndex} alone encodes to ${split.eventBytes} bytes, over ${limit.bound} of ${limit.bytes}`);
      try {
        await this.send(nc, item, split.parts);
      } catch (error) {
        if (!isTooLarge(error)) throw error;
        refusedAt = limit.bytes;
        await this.limit.read(nc);
        continue;
      }
      if (split.parts.length > 1) this.counts.split++;
      return true;
    }
  }

  private async send(nc: NatsConnection, item: Pending, parts: readonly Uint8Array[]): Promise<void> {
    for (let index = 0; index < parts.length; index++) {
      await jetstream(nc).publish(this.options.names.kvSubject(this.options.worker, item.rank), parts[index]!, { headers: this.headers(item, index, parts.length), timeout: 2000 });
    }
  }

  /** The headers of part `index` of `count` (of the whole batch when count is 1). */
  private headers(item: Pending, index: number, count: number): MsgHdrsImpl {
    const h = new MsgHdrsImpl();
    h.set(KV_HEADERS.seq, String(item.seq));
    h.set(KV_HEADERS.ts, String(item.batch.ts));
    if (count > 1) h.set(KV_HEADERS.part, partHeader(index, count));
    // The stream drops a second copy when a retry follows a publish whose ack was lost.
    h.set('Nats-Msg-Id', `${this.options.worker}#${item.rank}@${item.seq}/${item.batch.ts}${count > 1 ? `#${index}/${count}` : ''}`);
    return h;
  }
}
