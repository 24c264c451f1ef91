// The prefix-cache index as the partition keeps it: engines' KV events
// applied (their tokens re-hashed at the router's block size and seed), stale
// workers forgotten, approximate-mode routing recorded, routed blocks expired,
// and a version bumped on every change, so decisions made on older matches
// know they are stale.
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import type { WorkerKey } from '../../bindings/workers.js';
import type { KvEventBatch } from '../kv-events.js';
import type { EventHasher } from './kernels.js';
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

  /** Applies one batch of a worker's KV events to the prefix index. */
  applyEvents(worker: WorkerKey, batch: KvEventBatch): void {
    const counts = this.workers.require(worker.id).events;
    this.changes++;
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
      const local = this.hasher.localHashes(event.tokenIds, this.blockSize, this.seedOf(event.loraName, null));
      if (local.length !== event.blockHashes.length || !this.index.applyStored(worker, event.parentBlockHash, event.blockHashes, local)) {
        counts.skippedStores++;
        continue;
      }
      counts.stored++;
    }
  }

  /** The worker's event stream lost messages that cannot be replayed: forget what it holds. */
  markStale(worker: WorkerKey): void {
    this.index.applyCleared(worker);
    this.changes++;
    this.workers.require(worker.id).events.stale++;
  }

  removeWorker(id: string): void {
    this.index.removeWorker(id);
    this.changes++;
  }

  /** Approximate mode: the prompt was routed to the worker at `now`. */
  insertRouted(worker: WorkerKey, local: BigUint64Array, now: number): void {
    this.index.insertRouted(worker, local, now);
    this.changes++;
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
