// The prefix-cache index as the model fleet keeps it: engines' KV events
// applied (their tokens re-hashed at the router's block size and seed, media
// keys folded in), each storage tier in an index of its own, only a hybrid
// model's full-attention group indexed, stale workers forgotten,
// approximate-mode routing recorded, routed blocks expired, and a version
// bumped on every change, so decisions made on older matches know they are
// stale.
import { IndexFailure, type PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import type { WireOutcome } from '../../bindings/prefix-index.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { BlockStored, KvEventBatch } from '../kv-events.js';
import { WireKvBatch } from '../kv-wire-batch.js';
import { foldMedia } from '../media-keys.js';
import { storedLocalHashes, storedSalt } from './block-keys.js';
import type { EventHasher } from './kernels.js';
import { KvGroups } from './kv-groups.js';
import { TierMatcher, tierOf, type Tier, type TierDepths, type TierWeights } from './tiers.js';
import type { EventCounts } from './types.js';
import type { WorkerSet } from './worker-set.js';

/** An index that applies batches the core parsed from their wire bytes (the wasm one; see PrefixIndex.applyWire). */
export interface WireIndex {
  applyWire(worker: WorkerKey, parsed: Uint8Array, blockSize: number, seed: bigint): WireOutcome | null;
}

export interface CacheIndexParts {
  /** The device tier's index. */
  index: PrefixIndexApi;
  hasher: EventHasher;
  workers: WorkerSet;
  blockSize: number;
  seedOf: (lora: string | null, salt: string | null) => bigint;
  /** A new, empty index for an offloaded tier (made when an event first names it). */
  tierIndex: () => PrefixIndexApi;
  weights: TierWeights;
  /** Called once the model fleet has more than the device tier: decisions match through this from then on. */
  onTiers: (matcher: TierMatcher) => void;
  /** The device tier's index, when it can apply wire batches (null: every batch is applied from its events). */
  wire: WireIndex | null;
}

export class CacheIndex {
  readonly index: PrefixIndexApi;
  private changes = 0;
  private readonly tiers = new Map<Tier, PrefixIndexApi>();
  private readonly groups = new KvGroups();
  private matcher: TierMatcher | null = null;

  constructor(private readonly parts: CacheIndexParts) {
    this.index = parts.index;
    this.tiers.set('gpu', parts.index);
    // Device blocks credited below a whole block need the credited matches from the start.
    if (parts.weights.gpu !== 1) this.useTiers();
  }

  get weights(): TierWeights {
    return this.parts.weights;
  }

  /** Bumped by every change to the index. */
  get version(): number {
    return this.changes;
  }

  /** Per worker slot, the prompt's cached prefix in each tier; null while only the device tier exists. */
  tierDepths(local: ArrayLike<bigint>): Map<number, TierDepths> | null {
    return this.matcher ? this.matcher.depths(local) : null;
  }

  /**
   * Applies one batch of a worker's KV events to the prefix index. Returns the
   * IndexFailure when the index could not (the worker is gone, or its entries
   * were cleared): the worker's stream is stale from there.
   */
  applyEvents(worker: WorkerKey, batch: KvEventBatch): IndexFailure | null {
    const meta = this.parts.workers.get(worker.id);
    if (!meta) return new IndexFailure('unknown-worker', [worker], `worker ${workerLabel(worker)} is not registered for model ${this.parts.workers.model}`);
    this.changes++;
    const applied = this.applyWire(worker, batch, meta.events);
    if (applied !== undefined) return applied;
    try {
      this.apply(worker, batch, meta.events);
    } catch (error) {
      if (error instanceof IndexFailure) return error;
      throw error;
    }
    return null;
  }

  /**
   * A batch read from bytes of the core's layout (router/kv-wire-batch.ts),
   * applied by the index from the core's parse of them: its events are all of the device
   * tier, with no adapter, extra keys or cache group, so of the rules below
   * only the block size and the parent apply, and the core follows them.
   * Undefined when it cannot (other tiers exist, a core had no room, or the
   * batch was hashed under another seed than this model's):
   * the batch is then applied from its events.
   */
  private applyWire(worker: WorkerKey, batch: KvEventBatch, counts: EventCounts): IndexFailure | null | undefined {
    const { wire } = this.parts;
    if (wire === null || this.tiers.size > 1 || !(batch instanceof WireKvBatch)) return undefined;
    const parsed = batch.parsed();
    if (parsed === null) return undefined;
    const outcome = wire.applyWire(worker, parsed, this.parts.blockSize, this.parts.seedOf(null, null));
    if (!outcome) return undefined;
    const { tally } = outcome;
    counts.stored += tally.stored;
    counts.skippedStores += tally.skippedStores;
    counts.blockSizeMismatches += tally.blockSizeMismatches;
    counts.removed += tally.removed;
    counts.cleared += tally.cleared;
    return outcome.failure;
  }

  private apply(worker: WorkerKey, batch: KvEventBatch, counts: EventCounts): void {
    for (const event of batch.events) {
      if (event.type === 'cleared') {
        for (const index of this.tiers.values()) index.applyCleared(worker);
        counts.cleared++;
        continue;
      }
      const tier = tierOf(event.medium);
      if (tier === null) {
        counts.otherMedium++;
        continue;
      }
      if (event.type === 'removed') {
        if (!this.groups.removeIndexed(worker.id, event)) {
          counts.otherGroups++;
          continue;
        }
        // A tier no store named holds nothing to remove.
        this.tiers.get(tier)?.applyRemoved(worker, event.blockHashes);
        counts.removed++;
        continue;
      }
      if (!this.groups.storeIndexed(worker.id, event)) {
        counts.otherGroups++;
        continue;
      }
      if (event.tokenIds.length === 0) {
        // Named by hash alone: nothing to hash the router's way.
        counts.placeholderStores++;
        continue;
      }
      if (event.blockSize !== this.parts.blockSize) {
        // Hashes over other block boundaries would never match: the engine and the router must agree.
        counts.blockSizeMismatches++;
        continue;
      }
      const local = this.localHashes(event);
      if (local.length !== event.blockHashes.length || !this.tierIndex(tier).applyStored(worker, event.parentBlockHash, event.blockHashes, local)) {
        counts.skippedStores++;
        continue;
      }
      counts.stored++;
    }
  }

  private localHashes(event: BlockStored): BigUint64Array {
    const { hasher, blockSize, seedOf } = this.parts;
    const local = storedLocalHashes(hasher, event, blockSize, seedOf);
    if (!event.media) return local;
    const salt = storedSalt(event);
    return foldMedia(hasher, event.tokenIds, local, event.media, blockSize, seedOf(event.loraName, null), seedOf(event.loraName, salt));
  }

  private tierIndex(tier: Tier): PrefixIndexApi {
    let index = this.tiers.get(tier);
    if (!index) {
      index = this.parts.tierIndex();
      this.tiers.set(tier, index);
      this.useTiers();
    }
    return index;
  }

  private useTiers(): void {
    if (this.matcher) return;
    this.matcher = new TierMatcher(this.tiers, this.parts.weights, () => this.changes);
    this.parts.onTiers(this.matcher);
  }

  /** The worker's event stream lost messages that cannot be replayed: forget what it holds (nothing, once it is removed). */
  markStale(worker: WorkerKey): void {
    const meta = this.parts.workers.get(worker.id);
    if (!meta) return;
    for (const index of this.tiers.values()) index.applyCleared(worker);
    this.changes++;
    meta.events.stale++;
  }

  removeWorker(id: string): void {
    for (const index of this.tiers.values()) index.removeWorker(id);
    this.groups.forget(id);
    this.changes++;
  }

  /** Approximate mode: the prompt was routed to the worker at `now`. */
  insertRouted(worker: WorkerKey, local: BigUint64Array, now: number): void {
    this.changes++;
    try {
      this.index.insertRouted(worker, local, now);
    } catch (error) {
      // The index had no memory for them: it cleared the worker and counted it; the request goes on.
      if (!(error instanceof IndexFailure)) throw error;
    }
  }

  /** A fused decision recorded routed blocks itself. */
  routedByDecision(): void {
    this.changes++;
  }

  /** Drops routed blocks past their expiry. */
  expire(now: number): void {
    if (this.index.expire(now) > 0) this.changes++;
  }
}
