// Where a worker's KV events come from. A ZeroMQ source subscribes to the
// engine's publisher (one per data-parallel rank, on port + rank as vLLM
// offsets them) and can replay missed batches; an HTTP source takes batches
// POSTed to /router/kv-events. Both keep each rank's stream gap-free through
// WorkerSequencer and clear the worker's index entries when a gap cannot be
// closed. Workers without a source run in approximate mode.
import type { WorkerKey } from '../../bindings/workers.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import type { ModelRouter } from '../../router/model-router.js';
import { offsetEndpoint } from '../kv-events/rank-endpoints.js';
import { SEQUENCER_COUNTERS, WorkerSequencer, describeStale, zeroSequencerCounters, type SequencerCounters } from '../kv-events/sequencer.js';
import { ZmqKvListener } from '../kv-events/zmq-listener.js';
import type { WorkerConfig } from '../config/schema.js';

/** Stream counters of one source, summed over its ranks. */
export interface KvSourceCounters extends SequencerCounters {
  /** Payloads that were not a valid batch. */
  decodeErrors: number;
  /** Messages skipped for framing or topic. */
  skippedMessages: number;
  replayFailures: number;
}

export interface KvSource {
  readonly kind: 'zmq' | 'http' | 'nats';
  /** For readiness: the engine's publisher is reachable (HTTP sources are always ready). */
  connected(): boolean;
  counters(): KvSourceCounters;
  /** The stream counters of one data-parallel rank. */
  rankCounters(rank: number): KvSourceCounters | null;
  close(): Promise<void>;
}

export type Logger = (message: string) => void;

export function zeroCounters(): KvSourceCounters {
  return { ...zeroSequencerCounters(), decodeErrors: 0, skippedMessages: 0, replayFailures: 0 };
}

export class ZmqKvSource implements KvSource {
  readonly kind = 'zmq';
  private readonly listeners: ZmqKvListener[] = [];

  constructor(worker: WorkerConfig, route: ModelRouter, warn: Logger) {
    const kv = worker.kvEvents;
    if (kv.source !== 'zmq') throw new Error(`worker ${worker.id} has no ZeroMQ event source`);
    for (let rank = 0; rank < worker.dataParallelSize; rank++) {
      const listener = new ZmqKvListener({
        endpoint: offsetEndpoint(kv.endpoint, rank),
        replayEndpoint: kv.replayEndpoint === null ? undefined : offsetEndpoint(kv.replayEndpoint, rank),
        topic: kv.topic,
        worker: { id: worker.id, rank },
        onBatch: (batch, _seq, key) => route.applyEvents(key, batch),
        onStale: (reason) => {
          warn(`worker ${worker.id}#${reason.worker.rank}: ${describeStale(reason)}`);
          route.markStale(reason.worker);
        },
        onError: (error) => warn(`worker ${worker.id}: ${error.message}`),
      });
      listener.start();
      this.listeners.push(listener);
    }
  }

  connected(): boolean {
    return this.listeners.every((l) => l.connected);
  }

  counters(): KvSourceCounters {
    const out = zeroCounters();
    for (const l of this.listeners) addListenerCounters(out, l);
    return out;
  }

  rankCounters(rank: number): KvSourceCounters | null {
    const listener = this.listeners[rank];
    return listener ? addListenerCounters(zeroCounters(), listener) : null;
  }

  async close(): Promise<void> {
    await Promise.all(this.listeners.map((l) => l.close()));
  }
}

/** Adds one listener's counters (one rank's endpoint) into `out`. */
function addListenerCounters(out: KvSourceCounters, l: ZmqKvListener): KvSourceCounters {
  const s = l.stats();
  out.decodeErrors += s.decodeErrors;
  out.skippedMessages += s.skipped.frameCount + s.skipped.seqFrame + s.skipped.topic;
  out.replayFailures += s.replay.failed;
  for (const w of s.workers) for (const key of SEQUENCER_COUNTERS) out[key] += w[key];
  return out;
}

/** Batches POSTed by the engine; numbered batches are sequenced per rank (no replay over HTTP). */
export class HttpKvSource implements KvSource {
  readonly kind = 'http';
  private readonly ranks: WorkerSequencer[];
  private decodeErrors = 0;

  constructor(
    private readonly worker: WorkerConfig,
    private readonly route: ModelRouter,
    warn: Logger,
  ) {
    this.ranks = rankSequencers(worker, route, warn, 'over HTTP');
  }

  /** Applies one POSTed batch; throws a RangeError for a rank the worker does not have. */
  offer(rank: number, seq: number | null, batch: KvEventBatch): void {
    const sequencer = this.ranks[rank];
    if (!sequencer) throw new RangeError(`worker ${this.worker.id} has data-parallel ranks 0..${this.ranks.length - 1}, not ${rank}`);
    if (seq === null) this.route.applyEvents({ id: this.worker.id, rank }, batch);
    else sequencer.offer(seq, batch);
  }

  countDecodeError(): void {
    this.decodeErrors++;
  }

  connected(): boolean {
    return true;
  }

  counters(): KvSourceCounters {
    return addSequencerCounters({ ...zeroCounters(), decodeErrors: this.decodeErrors }, this.ranks);
  }

  rankCounters(rank: number): KvSourceCounters | null {
    return rankSequencerCounters(this.ranks, rank);
  }

  async close(): Promise<void> {}
}

/**
 * One WorkerSequencer per rank, for a stream without replay (`via` says
 * which, for the log): a gap or a restarted engine clears the rank's entries.
 */
export function rankSequencers(worker: WorkerConfig, route: ModelRouter, warn: Logger, via: string): WorkerSequencer[] {
  return Array.from({ length: worker.dataParallelSize }, (_, rank) => {
    const key: WorkerKey = { id: worker.id, rank };
    return new WorkerSequencer(
      {
        apply: (batch) => route.applyEvents(key, batch),
        stale: (report) => {
          warn(`worker ${worker.id}#${rank}: ${describeStale(report)} (${via})`);
          route.markStale(key);
        },
        requestReplay: () => {
          throw new Error(`KV events ${via} have no replay`);
        },
      },
      { replay: false },
    );
  });
}

/** Adds the sequencers' stream counters into `out`. */
export function addSequencerCounters(out: KvSourceCounters, sequencers: readonly WorkerSequencer[]): KvSourceCounters {
  for (const s of sequencers) {
    for (const key of SEQUENCER_COUNTERS) out[key] += s.counters[key];
  }
  return out;
}

/**
 * One rank's counters of a source sequenced per rank. A body that does not
 * decode names no rank, so decode errors stay in the worker's counters.
 */
export function rankSequencerCounters(sequencers: readonly WorkerSequencer[], rank: number): KvSourceCounters | null {
  const sequencer = sequencers[rank];
  return sequencer ? addSequencerCounters(zeroCounters(), [sequencer]) : null;
}

/** Builds the KV source of a worker whose events come over NATS (the replica layer has the connection). */
export type NatsKvSourceFactory = (worker: WorkerConfig, route: ModelRouter, warn: Logger) => KvSource;

export function startKvSource(worker: WorkerConfig, route: ModelRouter, warn: Logger, nats: NatsKvSourceFactory | null = null): KvSource | null {
  if (worker.kvEvents.source === 'zmq') return new ZmqKvSource(worker, route, warn);
  if (worker.kvEvents.source === 'http') return new HttpKvSource(worker, route, warn);
  if (worker.kvEvents.source === 'nats') {
    if (!nats) throw new RangeError(`worker ${worker.id}: kv_events.source is nats, but the router has no nats.url configured`);
    return nats(worker, route, warn);
  }
  return null;
}
