// The prefix-cache index as the partition keeps it: engines' KV events
// applied (their tokens re-hashed at the router's block size and seed), stale
// workers forgotten, approximate-mode routing recorded, routed blocks expired,
// and a version bumped on every change, so decisions made on older matches
// know they are stale.
import { IndexFailure, type PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { KvEventBatch } from '../kv-events.js';
import { storedLocalHashes } from './block-keys.js';
import type { EventHasher } from './kernels.js';
import type { EventCounts } from './types.js';
import type { WorkerSet } from './worker-set.js';

export class CacheIndex {
  private changes = 0;

  constructor(
    readonly index: PrefixIndexApi,
    private readonly hasher: EventHasher,
    private readonly workers: WorkerSet,
    private readonly blockSize: number,
    private readonly seedOf: (lora: string | null, salt: string | null) => bigint,
  ) {}

  /** Bumped by every change to the index. */
  get version(): number {
    return this.changes;
  }

  /**
   * Applies one batch of a worker's KV events to the prefix index. Returns the
   * IndexFailure when the index could not (the worker is gone, or its entries
   * were cleared): the worker's stream is stale from there.
   */
  applyEvents(worker: WorkerKey, batch: KvEventBatch): IndexFailure | null {
    const meta = this.workers.get(worker.id);
    if (!meta) return new IndexFailure('unknown-worker', [worker], `worker ${workerLabel(worker)} is not registered for model ${this.workers.model}`);
    this.changes++;
    try {
      this.apply(worker, batch, meta.events);
    } catch (error) {
      if (error instanceof IndexFailure) return error;
      throw error;
    }
    return null;
  }

  private apply(worker: WorkerKey, batch: KvEventBatch, counts: EventCounts): void {
    for (const event of batch.events) {
      if (event.type === 'cleared') {
        this.index.applyCleared(worker);
        counts.cleared++;
        continue;
      }
      // The index models the device cache; offloaded tiers are other caches.
      if (event.medium !== null && event.medium.toUpperCase() !== 'GPU') {
        counts.otherMedium++;
        continue;
      }
      if (event.type === 'removed') {
        this.index.applyRemoved(worker, event.blockHashes);
        counts.removed++;
        continue;
      }
      if (event.blockSize !== this.blockSize) {
        // Hashes over other block boundaries would never match: the engine and the router must agree.
        counts.blockSizeMismatches++;
        continue;
      }
      const local = storedLocalHashes(this.hasher, event, this.blockSize, this.seedOf);
      if (local.length !== event.blockHashes.length || !this.index.applyStored(worker, event.parentBlockHash, event.blockHashes, local)) {
        counts.skippedStores++;
        continue;
      }
      counts.stored++;
    }
  }

  /** The worker's event stream lost messages that cannot be replayed: forget what it holds (nothing, once it is removed). */
  markStale(worker: WorkerKey): void {
    const meta = this.workers.get(worker.id);
    if (!meta) return;
    this.index.applyCleared(worker);
    this.changes++;
    meta.events.stale++;
  }

  removeWorker(id: string): void {
    this.index.removeWorker(id);
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
