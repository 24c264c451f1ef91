// The reuse the fleet's cache room allows: one LRU cache holding as many
// blocks as every worker's cache together, serving the whole workload in
// order. The ideal (metrics.ts idealPrefixHits) has no room limit; this one
// shows how much of the gap between a policy and the ideal is room, not
// placement: no placement reuses a block its worker has evicted, and workers
// that each keep a copy of one prefix hold fewer distinct blocks between
// them. It is a reference, not a bound: the engines evict per worker, and a
// placement that keeps each prefix's requests together can do slightly
// better than one LRU over everything.
import type { HashBlocks } from '../mocker/block-hash.js';
import { halvesView, U64Map } from '../mocker/u64-map.js';
import { PromptHashes } from './prompt-hashes.js';
import { traceBlockHashes } from './trace-prefixes.js';
import type { Workload } from './workload.js';

const NIL = -1;

/**
 * Blocks in recency order: a list threaded through typed arrays (slots
 * reused as blocks leave), and a map from a block's hash halves to the slot
 * it was last given. An evicted block keeps its map entry (deleting costs a
 * probe-run shift per eviction); a lookup trusts the entry only while the
 * slot is live and still names that block. A long trace touches millions of
 * blocks; a Map of BigInts would allocate one per block read.
 */
class LruBlocks {
  private readonly slots = new U64Map(1 << 16);
  private lo = new Uint32Array(1024);
  private hi = new Uint32Array(1024);
  private prev = new Int32Array(1024);
  private next = new Int32Array(1024);
  private live = new Uint8Array(1024);
  private free: number[] = [];
  private used = 0;
  private count = 0;
  private oldest = NIL;
  private newest = NIL;

  get size(): number {
    return this.count;
  }

  /** The block's slot, or NIL when the cache does not hold it. */
  slotOf(lo: number, hi: number): number {
    const slot = this.slots.get(lo, hi);
    return slot !== NIL && this.live[slot] === 1 && this.lo[slot] === lo && this.hi[slot] === hi ? slot : NIL;
  }

  /** Adds a block it does not hold, as the most recently used. */
  add(lo: number, hi: number): void {
    const slot = this.free.pop() ?? this.allocate();
    this.lo[slot] = lo;
    this.hi[slot] = hi;
    this.live[slot] = 1;
    this.count++;
    this.slots.set(lo, hi, slot);
    this.append(slot);
  }

  /** Makes a block it holds (at `slot`) the most recently used. */
  refresh(slot: number): void {
    if (slot === this.newest) return;
    this.unlink(slot);
    this.append(slot);
  }

  private append(slot: number): void {
    this.prev[slot] = this.newest;
    this.next[slot] = NIL;
    if (this.newest !== NIL) this.next[this.newest] = slot;
    else this.oldest = slot;
    this.newest = slot;
  }

  /** Drops the least recently used block. */
  evictOldest(): void {
    const slot = this.oldest;
    this.unlink(slot);
    this.live[slot] = 0;
    this.count--;
    this.free.push(slot);
  }

  private unlink(slot: number): void {
    const before = this.prev[slot]!;
    const after = this.next[slot]!;
    if (before !== NIL) this.next[before] = after;
    else this.oldest = after;
    if (after !== NIL) this.prev[after] = before;
    else this.newest = before;
  }

  private allocate(): number {
    if (this.used === this.lo.length) {
      const size = 2 * this.used;
      this.lo = copied(new Uint32Array(size), this.lo);
      this.hi = copied(new Uint32Array(size), this.hi);
      this.prev = copied(new Int32Array(size), this.prev);
      this.next = copied(new Int32Array(size), this.next);
      this.live = copied(new Uint8Array(size), this.live);
    }
    return this.used++;
  }
}

function copied<T extends Uint32Array | Int32Array | Uint8Array>(into: T, from: ArrayLike<number>): T {
  into.set(from);
  return into;
}

/**
 * Each request's reused tokens under one LRU cache of `capacityBlocks`
 * blocks of `blockSize`: the leading run of its full blocks the cache holds
 * (capped so one token is computed, as the engine caps it); then every full
 * block of the prompt is the most recently used, and the least recently used
 * blocks beyond the capacity are evicted.
 */
export function fleetLruHits(workload: Workload, blockSize: number, capacityBlocks: number, hashBlocks: HashBlocks): Float64Array {
  if (!Number.isInteger(capacityBlocks) || capacityBlocks < 1) throw new RangeError(`capacityBlocks must be an integer >= 1, got ${capacityBlocks}`);
  const cache = new LruBlocks();
  const prompts = new PromptHashes(blockSize, hashBlocks);
  const reused = new Float64Array(workload.requests.length);
  workload.requests.forEach((request, r) => {
    const length = request.inputLength;
    const hashes = request.trace ? traceBlockHashes(request.trace, length, blockSize) : prompts.of(request);
    const halves = halvesView(hashes);
    const limit = Math.min(Math.floor((length - 1) / blockSize), hashes.length);
    let hits = 0;
    let leading = true;
    for (let i = 0; i < hashes.length; i++) {
      const lo = halves[2 * i]!;
      const hi = halves[2 * i + 1]!;
      const slot = cache.slotOf(lo, hi);
      if (slot === NIL) {
        leading = false;
        cache.add(lo, hi);
      } else {
        if (leading && i < limit) hits++;
        cache.refresh(slot);
      }
    }
    while (cache.size > capacityBlocks) cache.evictOldest();
    reused[r] = hits * blockSize;
  });
  return reused;
}
