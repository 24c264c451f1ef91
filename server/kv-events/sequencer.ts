// Keeps one worker's KV-event stream gap-free. Engines number their batches
// from 0 (one counter per publisher, i.e. per data-parallel rank); the router's
// index for that worker is only right if every batch is applied once, in order.
// No I/O here: the listener feeds batches in and carries out replay requests,
// and an HTTP ingest path can use the same class without replay.
//
// Rules:
// - The first batch seen is the baseline. When replay is on and it is not
//   seq 0, the history before it is fetched first (replay on join); whatever
//   the engine still buffers is applied, and a hole before the first applied
//   batch is not reported, because the index has nothing for the worker yet.
// - seq == last + 1 is applied.
// - seq > last + 1 is a gap. With replay, the live batches from then on are
//   held (up to maxHeld; past that they are dropped and counted) while the
//   missing range is fetched; when the replay ends, replayed and held batches
//   are applied in sequence order, each number once. A hole that remains is
//   reported stale and the stream continues from the next batch it has. A hole
//   the replay could not have known about (it opened after the replay was
//   served, e.g. a live batch dropped meanwhile) asks for another replay, as
//   long as the last one made progress. Without replay the gap is reported at
//   once.
// - seq <= last (or <= the newest held batch) means the publisher restarted
//   and numbers from scratch: reported stale as a restart, never replayed (a
//   new publisher's buffer does not hold the old stream), and the batch is the
//   new baseline. A replay in flight is abandoned.
// - A batch the router's index could not apply (an IndexFailure: no memory,
//   a trap) leaves the worker cleared: reported stale as an index failure,
//   and, with replay, the stream is resynchronised: the engine's buffered
//   batches are fetched from 0 and applied on the cleared worker as on join
//   (at most once per RESYNC_SPACING applied batches, so a router short of
//   memory does not replay in a loop).
// - A batch for a worker the router no longer has (removed while its events
//   were still arriving) is reported once, as removed; the stream is retired
//   and later batches are dropped and counted.
// A stale report is always made before the batch after the hole is applied, so
// the router clears the worker first and keeps what follows.

import { IndexFailure } from '../../bindings/prefix-index-api.js';
import type { KvEventBatch } from '../../router/kv-events.js';

export interface StaleReport {
  kind: 'gap' | 'restart' | 'index' | 'removed';
  /** The sequence number that should have come next. */
  expectedSeq: number;
  /** The sequence number that came instead (for index and removed: the batch that could not be applied). */
  receivedSeq: number;
  /** For a gap, why it was not closed: no replay socket, the engine no longer held the batches, or the replay failed. */
  replay: 'not-configured' | 'incomplete' | 'failed' | null;
  /** For index and removed: what the router said. */
  detail?: string;
}

/** One log line for a stale report (the caller prefixes the worker). */
export function describeStale(report: StaleReport): string {
  if (report.kind === 'index') return `KV batch ${report.receivedSeq} could not be applied: ${report.detail}; the stream is stale from there`;
  if (report.kind === 'removed') return `KV batch ${report.receivedSeq} arrived after the worker was removed (${report.detail}); its stream is retired`;
  return `KV event ${report.kind} (expected seq ${report.expectedSeq}, got ${report.receivedSeq}); its cache entries were cleared`;
}

/** Applied batches between two resynchronisations after index failures. */
export const RESYNC_SPACING = 1000;

export interface SequencerSink {
  /** Applies a batch; an IndexFailure back means the router could not (see the header). */
  apply(batch: KvEventBatch, seq: number, replayed: boolean): unknown;
  stale(report: StaleReport): void;
  /** Asks for the engine's buffered batches from `fromSeq`; answer with `replayed(ticket, ...)`. */
  requestReplay(fromSeq: number, ticket: number): void;
}

export interface SequencerOptions {
  /** Whether the engine has a replay socket. */
  replay: boolean;
  /** Fetch the history before the first batch seen (replay only); default true. */
  replayOnJoin?: boolean;
  /** Live batches held while a replay is in flight; default 10000 (vLLM's replay buffer). */
  maxHeld?: number;
}

export interface SequencerCounters {
  gaps: number;
  restarts: number;
  staleReports: number;
  replayRequests: number;
  replayedBatches: number;
  heldDropped: number;
  /** Batches the router's index could not apply (the worker was cleared). */
  indexFailures: number;
  /** Replays from 0 after an index failure. */
  resyncs: number;
  /** Batches dropped because the worker was no longer registered. */
  retiredDropped: number;
}

/** The names of the counters, for summing them over sequencers. */
export const SEQUENCER_COUNTERS: readonly (keyof SequencerCounters)[] = [
  'gaps',
  'restarts',
  'staleReports',
  'replayRequests',
  'replayedBatches',
  'heldDropped',
  'indexFailures',
  'resyncs',
  'retiredDropped',
];

export interface SequencedBatch {
  seq: number;
  batch: KvEventBatch;
}

export type ReplayOutcome = 'complete' | 'failed';

export function zeroSequencerCounters(): SequencerCounters {
  return Object.fromEntries(SEQUENCER_COUNTERS.map((key) => [key, 0])) as unknown as SequencerCounters;
}

export class WorkerSequencer {
  readonly counters: SequencerCounters = zeroSequencerCounters();
  private last: number | null = null;
  private retired = false;
  /** Set while a replay's answer is applied (no resync starts in the middle of it). */
  private draining = false;
  /** Batches applied since the last resync (RESYNC_SPACING at the start, so the first may happen at once). */
  private sinceResync = RESYNC_SPACING;
  private held: SequencedBatch[] = [];
  private ticket: number | null = null;
  private tickets = 0;
  private readonly replay: boolean;
  private readonly replayOnJoin: boolean;
  private readonly maxHeld: number;

  constructor(
    private readonly sink: SequencerSink,
    options: SequencerOptions,
  ) {
    this.replay = options.replay;
    this.replayOnJoin = options.replayOnJoin ?? true;
    this.maxHeld = options.maxHeld ?? 10_000;
    if (!Number.isInteger(this.maxHeld) || this.maxHeld < 1) throw new RangeError(`maxHeld must be a positive integer, got ${this.maxHeld}`);
  }

  /** The last applied sequence number, or null before the first. */
  get lastSeq(): number | null {
    return this.last;
  }

  get replaying(): boolean {
    return this.ticket !== null;
  }

  /** A live batch arrived. */
  offer(seq: number, batch: KvEventBatch): void {
    if (this.retired) {
      this.counters.retiredDropped++;
      return;
    }
    if (this.ticket !== null) {
      const newest = this.held.length > 0 ? this.held[this.held.length - 1]!.seq : this.last;
      if (newest !== null && seq <= newest) {
        this.ticket = null;
        this.held = [];
        this.restart(seq, batch, newest);
      } else if (this.held.length >= this.maxHeld) {
        this.counters.heldDropped++;
      } else {
        this.held.push({ seq, batch });
      }
      return;
    }
    const last = this.last;
    if (last === null) {
      if (seq !== 0 && this.replay && this.replayOnJoin) this.startReplay(0, [{ seq, batch }]);
      else this.applyOne(seq, batch, false);
    } else if (seq === last + 1) {
      this.applyOne(seq, batch, false);
    } else if (seq <= last) {
      this.restart(seq, batch, last);
    } else {
      this.counters.gaps++;
      if (this.replay) {
        this.startReplay(last + 1, [{ seq, batch }]);
      } else {
        this.reportStale({ kind: 'gap', expectedSeq: last + 1, receivedSeq: seq, replay: 'not-configured' });
        this.applyOne(seq, batch, false);
      }
    }
  }

  /**
   * The answer to requestReplay: the batches the engine sent back (for this
   * worker, decodable ones only) and whether the stream reached its end marker.
   * An answer to an abandoned request is ignored.
   */
  replayed(ticket: number, batches: readonly SequencedBatch[], outcome: ReplayOutcome): void {
    if (ticket !== this.ticket) return;
    this.ticket = null;
    let newestReplayed = -1;
    const merged = new Map<number, { item: SequencedBatch; replayed: boolean }>();
    for (const item of this.held) merged.set(item.seq, { item, replayed: false });
    for (const item of batches) {
      newestReplayed = Math.max(newestReplayed, item.seq);
      // A batch both held and replayed is the same batch; keep the live copy so
      // replayedBatches counts only what replay recovered.
      if (!merged.has(item.seq)) merged.set(item.seq, { item, replayed: true });
    }
    this.held = [];
    const ordered = [...merged.values()].sort((a, b) => a.item.seq - b.item.seq);
    this.draining = true;
    try {
      this.applyReplayed(ordered, newestReplayed, outcome);
    } finally {
      this.draining = false;
    }
  }

  private applyReplayed(ordered: { item: SequencedBatch; replayed: boolean }[], newestReplayed: number, outcome: ReplayOutcome): void {
    let progressed = false;
    for (let i = 0; i < ordered.length; i++) {
      const { item, replayed } = ordered[i]!;
      const last = this.last;
      if (last !== null && item.seq <= last) continue;
      if (last !== null && item.seq !== last + 1) {
        // Before any progress this is the gap the replay was asked to close;
        // after some, it is a new one.
        if (progressed) this.counters.gaps++;
        if (outcome === 'complete' && progressed && last + 1 > newestReplayed) {
          // Everything from here on was held live, so all of it is still pending.
          this.startReplay(last + 1, ordered.slice(i).map((rest) => rest.item));
          return;
        }
        this.reportStale({
          kind: 'gap',
          expectedSeq: last + 1,
          receivedSeq: item.seq,
          replay: outcome === 'complete' ? 'incomplete' : 'failed',
        });
      }
      this.applyOne(item.seq, item.batch, replayed);
      progressed = true;
    }
  }

  private startReplay(fromSeq: number, held: SequencedBatch[]): void {
    this.held = held;
    this.ticket = ++this.tickets;
    this.counters.replayRequests++;
    this.sink.requestReplay(fromSeq, this.ticket);
  }

  private restart(seq: number, batch: KvEventBatch, previous: number): void {
    this.counters.restarts++;
    // Before anything was applied the index holds nothing of this worker to clear.
    if (this.last !== null) this.reportStale({ kind: 'restart', expectedSeq: previous + 1, receivedSeq: seq, replay: null });
    this.applyOne(seq, batch, false);
  }

  private reportStale(report: StaleReport): void {
    this.counters.staleReports++;
    this.sink.stale(report);
  }

  private applyOne(seq: number, batch: KvEventBatch, replayed: boolean): void {
    if (this.retired) {
      this.counters.retiredDropped++;
      return;
    }
    this.last = seq;
    if (replayed) this.counters.replayedBatches++;
    this.sinceResync++;
    const failure = this.sink.apply(batch, seq, replayed);
    if (failure instanceof IndexFailure) this.failed(seq, failure, replayed);
  }

  private failed(seq: number, failure: IndexFailure, replayed: boolean): void {
    if (failure.kind === 'unknown-worker') {
      this.retired = true;
      this.ticket = null;
      this.held = [];
      this.reportStale({ kind: 'removed', expectedSeq: seq, receivedSeq: seq, replay: null, detail: failure.message });
      return;
    }
    this.counters.indexFailures++;
    const resync = this.replay && !replayed && !this.draining && this.ticket === null && this.sinceResync >= RESYNC_SPACING;
    this.reportStale({ kind: 'index', expectedSeq: seq, receivedSeq: seq, replay: resync ? null : this.replay ? 'failed' : 'not-configured', detail: failure.message });
    if (!resync) return;
    // The worker holds nothing now: rebuild it from what the engine still buffers, as on join.
    this.counters.resyncs++;
    this.sinceResync = 0;
    this.last = null;
    this.startReplay(0, []);
  }
}
