// Subscribes to one engine's KV-event publisher (vLLM or SGLang over ZeroMQ)
// and hands decoded batches to the router, in sequence order, one worker
// (id, data-parallel rank) at a time.
//
// Each message must be exactly [topic, 8-byte big-endian seq, msgpack batch];
// anything else is counted and skipped, as are payloads that do not decode
// (a skipped batch leaves its sequence number unused, so the next one shows a
// gap and goes through replay or a stale report). Sequencing, replay and stale
// reports follow WorkerSequencer; replays run one at a time over the engine's
// replay socket. Nothing a peer sends can throw out of the listener, and a
// throwing callback is counted and reported to onError, not propagated.
// onBatch may answer with an IndexFailure (the router could not apply the
// batch); the sequencer then reports the stream stale and resynchronises it.
// Once closed, the listener applies nothing more, even a message already
// received: its worker may be gone, and its slot another worker's.

import { Subscriber } from 'zeromq';
import { IndexFailure } from '../../bindings/prefix-index-api.js';
import type { WorkerKey } from '../../bindings/workers.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { decodeSeq } from '../../router/kv-wire.js';
import { countEventTypes, readKvBatch } from '../../router/kv-wire-batch.js';
import { ReceiveLoop } from './receive-loop.js';
import { fetchReplay } from './replay-client.js';
import { type SequencedBatch, type SequencerCounters, type StaleReport, WorkerSequencer } from './sequencer.js';

/**
 * Which worker a batch belongs to: a fixed id whose rank is the batch's
 * dp_rank (0 when absent) unless given, or a function of the dp_rank.
 */
export type WorkerSpec = { id: string; rank?: number } | ((dpRank: number | null) => WorkerKey);

export interface KvStaleReason extends StaleReport {
  worker: WorkerKey;
}

export interface ZmqKvListenerOptions {
  /** The engine's PUB endpoint to connect to, e.g. tcp://10.0.0.5:5557. */
  endpoint: string;
  /** Topic the engine publishes on; default "" (vLLM's default). Matched exactly. */
  topic?: string;
  /** The engine's replay ROUTER endpoint; without it a gap is reported stale at once. */
  replayEndpoint?: string;
  worker: WorkerSpec;
  /** Applies a batch; an IndexFailure back means the router could not (see the header). */
  onBatch: (batch: KvEventBatch, seq: number, worker: WorkerKey) => unknown;
  /** The worker's index may be wrong from here on: the router should clear its entries. */
  onStale: (reason: KvStaleReason) => void;
  /** Decode, receive, replay and callback errors, for logging. */
  onError?: (error: Error) => void;
  /** Time allowed for one replay answer; default 3000 ms. */
  replayTimeoutMs?: number;
  /** Fetch the engine's buffered history when joining a stream past seq 0; default true. */
  replayOnJoin?: boolean;
  /** Live batches held per worker while its replay is in flight; default 10000. */
  maxHeldBatches?: number;
}

export interface KvWorkerStats extends SequencerCounters {
  worker: WorkerKey;
  lastSeq: number | null;
  batches: number;
  stored: number;
  removed: number;
  cleared: number;
  unknownEvents: number;
}

export interface KvListenerStats {
  /** Multipart messages received on the subscription. */
  messages: number;
  /** Messages skipped for their framing: not 3 frames, a bad sequence frame, another topic. */
  skipped: { frameCount: number; seqFrame: number; topic: number };
  /** Payloads (live or replayed) that were not a valid batch. */
  decodeErrors: number;
  /** Batches whose worker the resolver could not name. */
  unresolved: number;
  receiveErrors: number;
  /** Exceptions from onBatch/onStale (or the message handler), caught and reported to onError. */
  callbackErrors: number;
  replay: { completed: number; failed: number; malformedFrames: number; foreignBatches: number };
  workers: KvWorkerStats[];
}

interface WorkerState {
  key: WorkerKey;
  sequencer: WorkerSequencer;
  counts: { batches: number; stored: number; removed: number; cleared: number; unknownEvents: number };
}

interface ReplayJob {
  state: WorkerState;
  fromSeq: number;
  ticket: number;
}

export class ZmqKvListener {
  // A deep receive queue (vLLM's send-side default) so a busy event loop loses
  // nothing to the high-water mark; a loss would still surface as a gap.
  private readonly sub = new Subscriber({ linger: 0, receiveHighWaterMark: 100_000 });
  private readonly topic: Uint8Array;
  private readonly workers = new Map<string, WorkerState>();
  private readonly replayJobs: ReplayJob[] = [];
  private readonly abort = new AbortController();
  private readonly loop: ReceiveLoop<Buffer[]>;
  private readonly counters = {
    messages: 0,
    skipped: { frameCount: 0, seqFrame: 0, topic: 0 },
    decodeErrors: 0,
    unresolved: 0,
    receiveErrors: 0,
    callbackErrors: 0,
    replay: { completed: 0, failed: 0, malformedFrames: 0, foreignBatches: 0 },
  };
  private peerConnected = false;
  private running: Promise<void> | null = null;
  private replaying: Promise<void> | null = null;
  private replayBusy = false;
  private closed = false;

  constructor(private readonly options: ZmqKvListenerOptions) {
    this.topic = new TextEncoder().encode(options.topic ?? '');
    this.loop = new ReceiveLoop(
      () => this.sub.receive(),
      (parts) => this.guard(() => this.onMessage(parts)),
      (error, delayMs) => {
        this.counters.receiveErrors++;
        this.report(new Error(`KV event receive failed on ${options.endpoint}, retrying in ${delayMs} ms: ${message(error)}`));
      },
    );
  }

  /** Connects and starts receiving. ZeroMQ connects in the background; an absent engine is not an error. */
  start(): void {
    if (this.running || this.closed) throw new Error('listener already started or closed');
    // Readiness: the engine's publisher is reachable once the ZMTP handshake is done.
    this.sub.events.on('handshake', () => void (this.peerConnected = true));
    this.sub.events.on('disconnect', () => void (this.peerConnected = false));
    this.sub.connect(this.options.endpoint);
    this.sub.subscribe(this.options.topic ?? '');
    this.running = this.loop.run();
  }

  /** Stops receiving, abandons a replay in flight, and closes every socket. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.loop.stop();
    this.abort.abort();
    this.sub.close();
    await this.running;
    await this.replaying;
  }

  /** Whether the subscription is connected to the engine's publisher. */
  get connected(): boolean {
    return this.peerConnected && !this.closed;
  }

  stats(): KvListenerStats {
    const c = this.counters;
    return {
      ...c,
      skipped: { ...c.skipped },
      replay: { ...c.replay },
      workers: [...this.workers.values()].map((w) => ({
        worker: w.key,
        lastSeq: w.sequencer.lastSeq,
        ...w.counts,
        ...w.sequencer.counters,
      })),
    };
  }

  private onMessage(parts: Buffer[]): void {
    if (this.closed) return;
    this.counters.messages++;
    if (parts.length !== 3) {
      this.counters.skipped.frameCount++;
      return;
    }
    const [topic, seqFrame, payload] = parts as [Buffer, Buffer, Buffer];
    if (!topic.equals(this.topic)) {
      this.counters.skipped.topic++;
      return;
    }
    const seq = decodeSeq(seqFrame);
    if (seq === null || seq < 0) {
      this.counters.skipped.seqFrame++;
      return;
    }
    const item = this.decode(payload, seq);
    if (item) item.state.sequencer.offer(seq, item.batch);
  }

  /** Decodes a payload and finds its worker; null (counted) when either fails. */
  private decode(payload: Uint8Array, seq: number): { state: WorkerState; batch: KvEventBatch } | null {
    let unknown = 0;
    let batch: KvEventBatch;
    try {
      batch = readKvBatch(payload, { onUnknownEvent: () => unknown++ });
    } catch (error) {
      this.counters.decodeErrors++;
      this.report(new Error(`KV event batch ${seq} from ${this.options.endpoint} skipped: ${message(error)}`));
      return null;
    }
    const state = this.workerFor(batch.dpRank);
    if (!state) return null;
    state.counts.unknownEvents += unknown;
    return { state, batch };
  }

  private workerFor(dpRank: number | null): WorkerState | null {
    const spec = this.options.worker;
    let key: WorkerKey;
    try {
      key = typeof spec === 'function' ? spec(dpRank) : { id: spec.id, rank: spec.rank ?? dpRank ?? 0 };
      if (typeof key?.id !== 'string' || !Number.isInteger(key.rank)) throw new TypeError(`resolver returned ${JSON.stringify(key)}`);
    } catch (error) {
      this.counters.unresolved++;
      this.report(new Error(`no worker for dp_rank ${dpRank} on ${this.options.endpoint}: ${message(error)}`));
      return null;
    }
    const label = `${key.id}\u0000${key.rank}`;
    const existing = this.workers.get(label);
    if (existing) return existing;
    const state: WorkerState = {
      key: { id: key.id, rank: key.rank },
      counts: { batches: 0, stored: 0, removed: 0, cleared: 0, unknownEvents: 0 },
      sequencer: new WorkerSequencer(
        {
          apply: (batch, seq) => this.apply(state, batch, seq),
          stale: (report) => this.guard(() => this.options.onStale({ ...report, worker: state.key })),
          requestReplay: (fromSeq, ticket) => this.queueReplay({ state, fromSeq, ticket }),
        },
        {
          replay: this.options.replayEndpoint !== undefined,
          replayOnJoin: this.options.replayOnJoin,
          maxHeld: this.options.maxHeldBatches,
        },
      ),
    };
    this.workers.set(label, state);
    return state;
  }

  private apply(state: WorkerState, batch: KvEventBatch, seq: number): IndexFailure | null {
    if (this.closed) return null;
    const counts = state.counts;
    counts.batches++;
    countEventTypes(batch, counts);
    let outcome: unknown = null;
    this.guard(() => {
      outcome = this.options.onBatch(batch, seq, state.key);
    });
    return outcome instanceof IndexFailure ? outcome : null;
  }

  private queueReplay(job: ReplayJob): void {
    this.replayJobs.push(job);
    if (!this.replayBusy) this.replaying = this.runReplays();
  }

  // replayBusy is cleared in the same synchronous step that finds the queue
  // empty, so a job queued while the loop is finishing is never stranded.
  private async runReplays(): Promise<void> {
    this.replayBusy = true;
    for (;;) {
      const job = this.replayJobs.shift();
      if (!job || this.closed) {
        this.replayBusy = false;
        return;
      }
      try {
        await this.replay(job);
      } catch (error) {
        // Not expected (fetchReplay and the callbacks are guarded), but a lost
        // answer would hold the worker's batches forever: fail the replay instead.
        this.report(new Error(`KV event replay for ${job.state.key.id} failed: ${message(error)}`));
        job.state.sequencer.replayed(job.ticket, [], 'failed');
      }
    }
  }

  private async replay(job: ReplayJob): Promise<void> {
    const answer = await fetchReplay(this.options.replayEndpoint!, job.fromSeq, {
      timeoutMs: this.options.replayTimeoutMs ?? 3000,
      signal: this.abort.signal,
    });
    if (this.closed) return;
    const c = this.counters.replay;
    c.malformedFrames += answer.malformed;
    if (answer.complete) c.completed++;
    else {
      c.failed++;
      this.report(new Error(`KV event replay from ${job.fromSeq} on ${this.options.replayEndpoint} failed: ${answer.error}`));
    }
    const batches: SequencedBatch[] = [];
    for (const frame of answer.frames) {
      const item = this.decode(frame.payload, frame.seq);
      if (!item) continue;
      // One replay socket serves one publisher; a batch naming another worker is not this stream's.
      if (item.state !== job.state) c.foreignBatches++;
      else batches.push({ seq: frame.seq, batch: item.batch });
    }
    job.state.sequencer.replayed(job.ticket, batches, answer.complete ? 'complete' : 'failed');
  }

  private guard(callback: () => void): void {
    try {
      callback();
    } catch (error) {
      this.counters.callbackErrors++;
      this.report(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private report(error: Error): void {
    try {
      this.options.onError?.(error);
    } catch {
      // A failing logger must not take the listener down with it.
    }
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
