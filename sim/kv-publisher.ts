// Publishes KV-event batches the way vLLM does, so the router's listener is
// exercised by the simulated engine exactly as by a real one: a PUB socket
// sending [topic, seq as 8-byte big-endian, msgpack batch] with seq counting
// batches from 0, a ring of the last `bufferBatches` payloads, and a ROUTER
// socket that replays them: a request [identity, "", start seq] is answered
// with [identity, "", seq, payload] for every buffered seq >= start, then
// [identity, "", -1 as signed 8 bytes, ""].

import { Publisher, Router } from 'zeromq';
import type { KvEventBatch } from '../router/kv-events.js';
import { type BatchForm, REPLAY_END_SEQ, decodeSeq, encodeKvBatch, encodeSeq } from '../router/kv-wire.js';

export interface ZmqKvPublisherOptions {
  /** Address to bind the PUB socket to, e.g. tcp://127.0.0.1:5557 (port * picks a free one). */
  endpoint: string;
  /** Address to bind the replay ROUTER socket to; no replay when absent. */
  replayEndpoint?: string;
  /** Topic frame; default "" as vLLM. */
  topic?: string;
  /** Batches kept for replay; default 10000 as vLLM. */
  bufferBatches?: number;
  /** Payload encoding; default 'array' (msgspec array_like, as SGLang and older vLLM). */
  form?: BatchForm;
}

export interface PublishOptions {
  /**
   * Number this batch explicitly; later batches continue from it. Lower than
   * the next number acts as a publisher restart (the replay ring is emptied);
   * higher leaves the numbers in between unused, a gap no replay can close.
   */
  seq?: number;
  /** False keeps the batch in the replay ring without sending it, as if the subscriber missed it. */
  live?: boolean;
}

interface Buffered {
  seq: number;
  payload: Uint8Array;
}

const EMPTY = new Uint8Array(0);

export class ZmqKvPublisher {
  private readonly pub = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
  // mandatory: a reply to a slow client waits for room instead of being dropped,
  // bounded by sendTimeout so a vanished client cannot stall replay for others.
  private readonly replaySocket: Router | null;
  private readonly topic: Uint8Array;
  private readonly capacity: number;
  private readonly form: BatchForm;
  private readonly ring: Buffered[] = [];
  private ringStart = 0;
  private next = 0;
  private sending: Promise<void> = Promise.resolve();
  private serving: Promise<void> | null = null;
  private state: 'new' | 'open' | 'closed' = 'new';
  private boundEndpoint: string | null = null;
  private boundReplayEndpoint: string | null = null;
  private badReplayRequests = 0;
  private failedSends = 0;

  constructor(private readonly options: ZmqKvPublisherOptions) {
    this.capacity = options.bufferBatches ?? 10_000;
    if (!Number.isInteger(this.capacity) || this.capacity < 0) {
      throw new RangeError(`bufferBatches must be a non-negative integer, got ${options.bufferBatches}`);
    }
    this.topic = new TextEncoder().encode(options.topic ?? '');
    this.form = options.form ?? 'array';
    this.replaySocket = options.replayEndpoint ? new Router({ linger: 0, mandatory: true, sendTimeout: 5000 }) : null;
  }

  /** Binds the sockets and starts serving replays. A failed bind may be retried. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error('publisher already started or closed');
    if (this.boundEndpoint === null) {
      await this.pub.bind(this.options.endpoint);
      this.boundEndpoint = this.pub.lastEndpoint;
    }
    if (this.replaySocket) {
      await this.replaySocket.bind(this.options.replayEndpoint!);
      this.boundReplayEndpoint = this.replaySocket.lastEndpoint;
      this.serving = this.serveReplays(this.replaySocket);
    }
    this.state = 'open';
  }

  /** The bound PUB address, with a wildcard port resolved (for subscribers to connect to). */
  get endpoint(): string {
    if (this.boundEndpoint === null) throw new Error('publisher not started');
    return this.boundEndpoint;
  }

  get replayEndpoint(): string | null {
    return this.boundReplayEndpoint;
  }

  /** The sequence number the next batch will get. */
  get nextSeq(): number {
    return this.next;
  }

  /** Replay requests that were not [identity, "", 8-byte seq] and were ignored. */
  get ignoredReplayRequests(): number {
    return this.badReplayRequests;
  }

  /**
   * Numbers, buffers and sends a batch; the promise resolves with its sequence
   * number once ZeroMQ has queued it. Batches go out in call order even when
   * not awaited, and the promise never rejects (a failed send is counted in
   * sendErrors), so a caller may fire and forget. Throws at once when the
   * publisher is not open or `seq` is not a non-negative integer.
   */
  publish(batch: KvEventBatch, options: PublishOptions = {}): Promise<number> {
    if (this.state !== 'open') throw new Error(`KV publisher is ${this.state === 'new' ? 'not started' : 'closed'}`);
    const seq = options.seq ?? this.next;
    if (!Number.isSafeInteger(seq) || seq < 0) throw new RangeError(`seq must be a non-negative integer, got ${seq}`);
    const payload = encodeKvBatch(batch, this.form);
    if (seq < this.next) this.clearRing();
    this.next = seq + 1;
    this.remember({ seq, payload });
    if (options.live === false) return Promise.resolve(seq);
    const frames = [this.topic, encodeSeq(seq), payload];
    this.sending = this.sending.then(() => this.pub.send(frames)).catch(() => void this.failedSends++);
    return this.sending.then(() => seq);
  }

  /** Sends ZeroMQ refused (PUB drops at its high-water mark without an error, so these are rare). */
  get sendErrors(): number {
    return this.failedSends;
  }

  /** Closes both sockets; batches not yet handed to ZeroMQ are dropped. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    const wasOpen = this.state === 'open';
    this.state = 'closed';
    if (wasOpen) await this.sending;
    this.pub.close();
    this.replaySocket?.close();
    await this.serving;
  }

  private remember(item: Buffered): void {
    if (this.capacity === 0) return;
    if (this.ring.length < this.capacity) {
      this.ring.push(item);
    } else {
      this.ring[this.ringStart] = item;
      this.ringStart = (this.ringStart + 1) % this.capacity;
    }
  }

  private clearRing(): void {
    this.ring.length = 0;
    this.ringStart = 0;
  }

  private *buffered(): Generator<Buffered> {
    for (let i = 0; i < this.ring.length; i++) yield this.ring[(this.ringStart + i) % this.ring.length]!;
  }

  private async serveReplays(socket: Router): Promise<void> {
    for await (const request of socket) {
      const [identity, delimiter, startFrame] = request;
      if (request.length !== 3 || delimiter!.length !== 0 || startFrame!.length !== 8) {
        this.badReplayRequests++;
        continue;
      }
      // The start is unsigned on the wire; one past 2^53 (or all ones) asks for nothing.
      const start = decodeSeq(startFrame!);
      const from = start === null || start === REPLAY_END_SEQ ? Number.POSITIVE_INFINITY : start;
      try {
        // Snapshot first: publish() may overwrite ring slots while replies wait for room.
        const batches = [...this.buffered()].filter((item) => item.seq >= from);
        for (const item of batches) await socket.send([identity!, EMPTY, encodeSeq(item.seq), item.payload]);
        await socket.send([identity!, EMPTY, encodeSeq(REPLAY_END_SEQ), EMPTY]);
      } catch {
        // The client went away or stopped reading; it will time out and report the gap.
      }
    }
  }
}
