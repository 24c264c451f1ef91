// The engine's host-memory (CPU) tier, as vLLM's offloading connector runs
// it: every block the GPU computes is written through to the tier (so a
// block the GPU evicts later is still here), the tier evicts its least
// recently used blocks past its capacity, and a request whose prefix goes on
// past its GPU hits into the tier loads those blocks back instead of
// computing them. Blocks being loaded are pinned: the tier never evicts them
// mid-load. Stores and evictions are published with medium CPU; a load
// publishes nothing here (the blocks it brings back are stored on the GPU,
// which publishes them there).
import type { BlockStored, KvEvent } from '../../router/kv-events.js';

export class OffloadTier {
  /** The tier's blocks, least recently used first (a Set keeps insertion order; touching re-inserts). */
  private readonly lru = new Set<bigint>();
  /** Loads in progress per block. */
  private readonly pins = new Map<bigint, number>();

  constructor(
    /** Capacity in blocks; at least 1. */
    readonly capacity: number,
    readonly blockSize: number,
  ) {}

  get size(): number {
    return this.lru.size;
  }

  /** How many of `hashes[from..limit)` the tier holds in a row from `from`: the blocks a request can load. */
  lookup(hashes: BigUint64Array, from: number, limit: number): number {
    const end = Math.min(limit, hashes.length);
    let run = 0;
    while (from + run < end && this.lru.has(hashes[from + run]!)) run++;
    return run;
  }

  /**
   * Marks a request's blocks used, its first block last (the most recently
   * used), as vLLM touches an admitted request's prefix: a prefix in use is
   * kept, and its root outlives its tail.
   */
  touchAll(hashes: BigUint64Array): void {
    for (let i = hashes.length - 1; i >= 0; i--) this.touch(hashes[i]!);
  }

  pin(hashes: BigUint64Array, from: number, to: number): void {
    for (let i = from; i < to; i++) this.pins.set(hashes[i]!, (this.pins.get(hashes[i]!) ?? 0) + 1);
  }

  unpin(hashes: BigUint64Array, from: number, to: number): void {
    for (let i = from; i < to; i++) {
      const n = this.pins.get(hashes[i]!)!;
      if (n > 1) this.pins.set(hashes[i]!, n - 1);
      else this.pins.delete(hashes[i]!);
    }
  }

  clear(): void {
    this.lru.clear();
    // A reset is refused while requests hold blocks, so no load is in progress.
    this.pins.clear();
  }

  /**
   * Writes a GPU store through to the tier: its blocks not yet here become
   * runs of CPU stores chained to the block before each (blocks already here
   * are touched), then the least recently used unpinned blocks past the
   * capacity are evicted (one CPU removal).
   */
  writeThrough(event: BlockStored, tokenIds: Uint32Array, out: KvEvent[]): void {
    const { blockHashes, media } = event;
    const bs = this.blockSize;
    let run: BlockStored | null = null;
    let runStart = 0;
    for (let i = 0; i < blockHashes.length; i++) {
      const hash = blockHashes[i]!;
      if (this.lru.has(hash)) {
        this.touch(hash);
        run = null;
        continue;
      }
      this.lru.add(hash);
      if (!run) {
        run = { ...event, blockHashes: [], tokenIds: [], medium: 'CPU', parentBlockHash: i === 0 ? event.parentBlockHash : blockHashes[i - 1]! };
        if (media) run.media = [];
        else delete run.media;
        if (event.extraKeys) run.extraKeys = [];
        out.push(run);
        runStart = i;
      }
      run.blockHashes.push(hash);
      // A run is contiguous in its GPU event, so its tokens are a view of that event's.
      run.tokenIds = tokenIds.subarray(runStart * bs, (i + 1) * bs);
      run.media?.push(media![i] ?? null);
      if (run.extraKeys) (run.extraKeys as (readonly unknown[] | null)[]).push(event.extraKeys![i] ?? null);
    }
    this.evictPastCapacity(out);
  }

  private evictPastCapacity(out: KvEvent[]): void {
    const over = this.lru.size - this.capacity;
    if (over <= 0) return;
    const dropped: bigint[] = [];
    for (const hash of this.lru) {
      if (dropped.length === over) break;
      if (!this.pins.has(hash)) dropped.push(hash);
    }
    for (const hash of dropped) this.lru.delete(hash);
    if (dropped.length > 0) out.push({ type: 'removed', blockHashes: dropped, medium: 'CPU' });
  }

  private touch(hash: bigint): void {
    if (this.lru.delete(hash)) this.lru.add(hash);
  }
}
