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
// A batch larger than the server's max_payload goes in parts (kv-parts.ts);
// one holding an event too large for any message is dropped whole and
// counted, and routers see its sequence number missing as a gap (they clear
// the rank's entries and go on from the next batch).
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import type { KvEventBatch } from '../../router/kv-events.js';
import { offsetEndpoint } from '../kv-events/rank-endpoints.js';
import { ZmqKvListener } from '../kv-events/zmq-listener.js';
import type { Logger } from '../workers/kv-sources.js';
import { parsePartHeader, partHeader, splitKvBatch } from './kv-parts.js';
import { ensureKvStream, type KvStreamRetention } from './kv-stream.js';
import { DEFAULT_MAX_PAYLOAD, frameBudget, type NatsLink } from './link.js';
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
  /** Batches dropped because one of their events alone is larger than the server's max_payload. */
  oversized: number;
  /** Batches sent in more than one message. */
  split: number;
  queued: number;
  /** Per rank: the ZeroMQ subscription is connected. */
  connected: boolean[];
  /** Per rank: the last sequence number published, or null. */
  lastSeq: (number | null)[];
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
  private counts = { relayed: 0, skipped: 0, dropped: 0, oversized: 0, split: 0 };
  private pumping = false;
  private started: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly options: KvRelayOptions) {
    this.ranks = options.dataParallelSize ?? 1;
    this.maxQueued = options.maxQueued ?? 100_000;
    this.lastSeq = new Array<number | null>(this.ranks).fill(null);
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
          void this.pump();
        }
      });
    });
    return this.started;
  }

  stats(): KvRelayStats {
    return { ...this.counts, queued: this.queue.length, connected: this.listeners.map((l) => l.connected), lastSeq: [...this.lastSeq] };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.listeners.map((l) => l.close()));
  }

  private async prepare(nc: NatsConnection): Promise<void> {
    const { names, worker } = this.options;
    await ensureKvStream(nc, names, this.options.retention);
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

  /** Sends the batch (in parts when it must); false when it was dropped as oversized. */
  private async publish(nc: NatsConnection, item: Pending): Promise<boolean> {
    const maxPayload = this.options.link.maxPayload ?? DEFAULT_MAX_PAYLOAD;
    const split = splitKvBatch(item.batch, frameBudget(maxPayload));
    const where = `${this.options.worker}#${item.rank}`;
    if (split.kind === 'oversized') {
      this.counts.oversized++;
      this.options.warn(
        `KV batch ${item.seq} of ${where} dropped: its event ${split.eventIndex} alone encodes to ${split.eventBytes} bytes, over the NATS server's max_payload of ${maxPayload}; routers will see a gap and clear the rank's entries`,
      );
      return false;
    }
    const { parts } = split;
    for (let index = 0; index < parts.length; index++) {
      const h = headers();
      h.set(KV_HEADERS.seq, String(item.seq));
      h.set(KV_HEADERS.ts, String(item.batch.ts));
      if (parts.length > 1) h.set(KV_HEADERS.part, partHeader(index, parts.length));
      await jetstream(nc).publish(this.options.names.kvSubject(this.options.worker, item.rank), parts[index]!, {
        headers: h,
        timeout: 2000,
        // The stream drops a second copy when a retry follows a publish whose ack was lost.
        msgID: `${where}@${item.seq}/${item.batch.ts}${parts.length > 1 ? `#${index}/${parts.length}` : ''}`,
      });
    }
    if (parts.length > 1) this.counts.split++;
    return true;
  }
}
