// What the router has seen of one worker rank's KV events and traffic, and
// the causes that follow from it (causes.ts). Fed by the event tap and the
// dispatch tap; time is passed in (ms), so the rules are tested without
// waiting.
import { heldAfter, type WireSummary } from '../../bindings/kv-wire-reader.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { WireKvBatch } from '../../router/kv-wire-batch.js';
import { CachedAgreement } from './cached-agreement.js';
import { CAUSES, VERDICT_ORDER, type Cause, type Verdict } from './causes.js';
import { RoutedDigest } from './routed-digest.js';

export interface WatchSettings {
  /** The model's configured block size. */
  blockSize: number;
  /** No events this long after a request was sent: silent; a lost stream counts as stale this long. */
  silentAfterMs: number;
  /** Fraction of the prompt by which reported and predicted cached tokens may differ (besides one block). */
  cachedTokensTolerance: number;
}

export interface CauseFinding {
  cause: Cause;
  /** What was observed, with the numbers. */
  detail: string;
}

/** Which tier a stored or removed event is about: the prefix index models the device cache only. */
const onDevice = (medium: string | null) => medium === null || medium.toUpperCase() === 'GPU';

export class RankWatch {
  readonly events = { stored: 0, removed: 0, cleared: 0 };
  batches = 0;
  lastEventAt: number | null = null;
  requestsSent = 0;
  /** Device blocks the engine holds, as its stored, removed and cleared events tell. */
  blocksHeld = 0;
  staleReports = 0;
  readonly digest = new RoutedDigest();
  readonly cached: CachedAgreement;
  private lastStaleAt: number | null = null;
  /** When the first request was sent since the last event (null: none, or an event came after). */
  private waitingSince: number | null = null;
  /** The block size of the last stored event and how many stored events had another size than the config's. */
  private lastStoredBlockSize: number | null = null;
  blockSizeMismatches = 0;
  /** The dp_rank the last foreign batch was stamped with, when, and how many were; whether the last batch was one. */
  private foreignRank: number | null = null;
  private lastForeignAt = 0;
  private lastWasForeign = false;
  foreignBatches = 0;

  constructor(
    readonly id: string,
    readonly rank: number,
    /** The worker's data-parallel size in the config. */
    private readonly ranks: number,
    /** Whether the config gives the worker a KV event source (else it is routed in approximate mode). */
    readonly kvEvents: boolean,
    private readonly settings: WatchSettings,
  ) {
    this.cached = new CachedAgreement(settings.blockSize, settings.cachedTokensTolerance);
  }

  /** A batch arrived for this rank; `local(event)` hashes a stored event's tokens as the router hashes prompts. */
  batch(batch: KvEventBatch, now: number, local: (tokens: ArrayLike<number>, lora: string | null) => BigUint64Array): void {
    this.batches++;
    this.lastEventAt = now;
    this.waitingSince = null;
    this.lastWasForeign = batch.dpRank !== null && batch.dpRank !== this.rank;
    if (this.lastWasForeign) this.foreign(batch.dpRank!, now);
    if (batch instanceof WireKvBatch && !this.needsEvents(batch.summary)) return this.summarized(batch.summary);
    for (const event of batch.events) {
      if (event.type === 'cleared') {
        this.events.cleared++;
        this.blocksHeld = 0;
        continue;
      }
      if (event.type === 'removed') {
        this.events.removed++;
        if (onDevice(event.medium)) this.blocksHeld = Math.max(0, this.blocksHeld - event.blockHashes.length);
        continue;
      }
      this.events.stored++;
      if (!onDevice(event.medium)) continue;
      this.blocksHeld += event.blockHashes.length;
      this.lastStoredBlockSize = event.blockSize;
      if (event.blockSize !== this.settings.blockSize) {
        this.blockSizeMismatches++;
        continue;
      }
      if (this.digest.wantsStores) this.digest.stored(local(event.tokenIds, event.loraName));
    }
  }

  /**
   * Whether a batch the core scanned must be decoded: its stores are of
   * several block sizes (each counts on its own), or the digest still checks
   * stores of the model's block size. Otherwise its summary says it all.
   */
  private needsEvents(s: WireSummary): boolean {
    return s.mixedBlockSizes > 0 || (s.stored > 0 && s.lastBlockSize === this.settings.blockSize && this.digest.wantsStores);
  }

  /** A scanned batch, every event of the device tier and its stores of one block size, from its summary. */
  private summarized(s: WireSummary): void {
    this.events.stored += s.stored;
    this.events.removed += s.removed;
    this.events.cleared += s.cleared;
    this.blocksHeld = heldAfter(s, this.blocksHeld);
    if (s.stored === 0) return;
    this.lastStoredBlockSize = s.lastBlockSize;
    if (s.lastBlockSize !== this.settings.blockSize) this.blockSizeMismatches += s.stored;
  }

  /**
   * A batch stamped with another dp_rank arrived on this rank's stream, or
   * (HTTP) was refused for a rank the worker does not have.
   */
  foreign(dpRank: number, now: number): void {
    this.foreignRank = dpRank;
    this.lastForeignAt = now;
    this.foreignBatches++;
  }

  /** The stream lost batches it could not replay: the router cleared this rank. */
  stale(now: number): void {
    this.staleReports++;
    this.lastStaleAt = now;
    this.blocksHeld = 0;
  }

  /** A request was sent to this rank. */
  sent(now: number): void {
    this.requestsSent++;
    if (this.waitingSince === null) this.waitingSince = now;
  }

  /** The causes that hold now, each with what was seen. */
  findings(now: number): CauseFinding[] {
    const out: CauseFinding[] = [];
    const s = this.settings;
    // Holds while the stream's last batch was foreign, and for a while after any was (a refused one leaves no last batch).
    if (this.foreignRank !== null && (this.lastWasForeign || now - this.lastForeignAt < s.silentAfterMs)) {
      const where = this.foreignRank < this.ranks ? `the endpoint of rank ${this.rank}` : `a worker with ranks 0..${this.ranks - 1}`;
      out.push({ cause: 'unknown_rank', detail: `${this.foreignBatches} batch(es) stamped dp_rank ${this.foreignRank} arrived on ${where}` });
    }
    if (this.lastStoredBlockSize !== null && this.lastStoredBlockSize !== s.blockSize) {
      out.push({ cause: 'block_size', detail: `the engine stores blocks of ${this.lastStoredBlockSize} tokens; the model's block_size is ${s.blockSize} (${this.blockSizeMismatches} stored event(s) ignored)` });
    }
    if (this.digest.differs) {
      const e = this.digest.evidence;
      out.push({ cause: 'tokenizer', detail: `${e.unmatchedStores} stored event(s) after ${e.routed} routed request(s), none holding a block of a routed prompt` });
    }
    if (this.cached.differs) {
      out.push({ cause: 'cached_tokens', detail: `${this.cached.disagreements} of ${this.cached.samples} response(s) reported cached tokens off the predicted overlap by more than one block + ${Math.round(s.cachedTokensTolerance * 100)}% of the prompt` });
    }
    if (this.kvEvents && this.waitingSince !== null && now - this.waitingSince >= s.silentAfterMs) {
      const last = this.lastEventAt === null ? 'no KV event ever arrived' : `the last KV event arrived ${seconds(now - this.lastEventAt)} ago`;
      out.push({ cause: 'no_events', detail: `requests were sent since ${seconds(now - this.waitingSince)} ago and ${last}` });
    }
    if (this.lastStaleAt !== null && now - this.lastStaleAt < s.silentAfterMs) {
      out.push({ cause: 'stream_lost', detail: `the stream was reported stale ${seconds(now - this.lastStaleAt)} ago (${this.staleReports} time(s) since start)` });
    }
    return out;
  }
}

/** The worst verdict of the causes found (ok for none). */
export function verdictOf(findings: readonly CauseFinding[]): Verdict {
  let worst: Verdict = 'ok';
  for (const f of findings) {
    const v = CAUSES[f.cause].verdict;
    if (VERDICT_ORDER.indexOf(v) < VERDICT_ORDER.indexOf(worst)) worst = v;
  }
  return worst;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
