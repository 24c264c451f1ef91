// The engine's KV block pool. A block is either private to one request (the
// partial tail of a prompt and every generated token: never shared, freed at
// completion) or a cached full prompt block named by its chained hash. Cached
// blocks are refcounted by the requests using them; at refcount 0 they stay
// cached ("inactive") for prefix reuse until space is needed, and then the
// least recently used leaf goes first (see leaf-heap.ts). Every change to the
// set of cached hashes is recorded as a KV event, so a router applying the
// events sees exactly this cache.
import type { BlockStored, KvEvent } from '../../router/kv-events.js';
import { LeafHeap, type HeapBlock } from './leaf-heap.js';
import { halvesOf, U64Map } from './u64-map.js';

export interface CachedBlock extends HeapBlock {
  readonly hash: bigint;
  /** The hash's little-endian u32 halves: the block table's key. */
  readonly lo: number;
  readonly hi: number;
  readonly parent: CachedBlock | null;
  /** Requests currently holding the block. */
  refs: number;
  /** Cached blocks whose parent is this one. */
  children: number;
}

/**
 * A stored event still open to more blocks of its chain, with where each
 * block's token ids are; they are copied out once, when the event is taken.
 */
interface StoredDraft {
  event: BlockStored;
  sources: Uint32Array[];
  starts: number[];
}

const NOTHING: readonly CachedBlock[] = [];

export class BlockCache {
  private readonly byHash: U64Map<CachedBlock>;
  private readonly leaves = new LeafHeap<CachedBlock>();
  private inactive = 0;
  private privateBlocks = 0;
  private tick = 0;
  private pending: KvEvent[] = [];
  /** The stored events of `pending` whose token ids are still to be copied out. */
  private drafts: StoredDraft[] = [];

  /**
   * @param numBlocks capacity in blocks
   * @param blockSize tokens per block
   * @param recordEvents whether to build KV events (skipped when nobody listens: it copies token ids)
   */
  constructor(
    readonly numBlocks: number,
    readonly blockSize: number,
    private readonly recordEvents: boolean,
  ) {
    // The cache never holds more cached blocks than it has blocks, so the table never grows.
    this.byHash = new U64Map<CachedBlock>(numBlocks);
  }

  /** Blocks in use: cached (active or inactive) plus private. */
  get usedBlocks(): number {
    return this.byHash.size + this.privateBlocks;
  }

  get freeBlocks(): number {
    return this.numBlocks - this.usedBlocks;
  }

  /** Blocks some request holds: what the decode-time model calls KV utilisation. */
  get activeBlocks(): number {
    return this.usedBlocks - this.inactive;
  }

  get cachedBlocks(): number {
    return this.byHash.size;
  }

  get inactiveBlocks(): number {
    return this.inactive;
  }

  /** The cached block whose hash has these halves. */
  get(lo: number, hi: number): CachedBlock | undefined {
    return this.byHash.get(lo, hi);
  }

  /** The cached blocks matching the leading hashes (as (lo, hi) halves), at most `limit` of them. */
  matchPrefix(halves: Uint32Array, limit: number): CachedBlock[] {
    const hits: CachedBlock[] = [];
    const end = Math.min(limit, halves.length >> 1);
    for (let i = 0; i < end; i++) {
      const block = this.byHash.get(halves[2 * i]!, halves[2 * i + 1]!);
      if (!block) break;
      hits.push(block);
    }
    return hits;
  }

  /**
   * Whether `need` new blocks fit after evicting every evictable block,
   * counting `reactivating` (inactive blocks about to be held) as not evictable.
   */
  canAllocate(need: number, reactivating: readonly CachedBlock[] = NOTHING): boolean {
    let reserved = 0;
    for (const block of reactivating) if (block.refs === 0) reserved++;
    return this.freeBlocks + this.inactive - reserved >= need;
  }

  /** Evicts leaves until `need` blocks are free; false if that is impossible. */
  makeRoom(need: number): boolean {
    while (this.freeBlocks < need) {
      const victim = this.leaves.pop();
      if (!victim) return false;
      this.evict(victim);
    }
    return true;
  }

  /** Takes a reference on a cached block, reviving it if it was inactive. */
  acquire(block: CachedBlock): void {
    if (block.refs++ === 0) {
      this.inactive--;
      this.leaves.remove(block);
    }
  }

  /** Drops a reference; an unreferenced leaf becomes an eviction candidate. */
  release(block: CachedBlock): void {
    if (block.refs <= 0) throw new Error(`block ${block.hash} released more often than acquired`);
    if (--block.refs > 0) return;
    this.inactive++;
    block.lastUsed = ++this.tick;
    if (block.children === 0) this.leaves.push(block);
  }

  /**
   * Caches a newly computed full block, held once by its computing request.
   * `tokens[start..start+blockSize)` are its token ids.
   */
  store(hash: bigint, parent: CachedBlock | null, tokens: Uint32Array, start: number): CachedBlock {
    const [lo, hi] = halvesOf(hash);
    if (this.byHash.has(lo, hi)) throw new Error(`block ${hash} is already cached`);
    if (this.freeBlocks <= 0) throw new Error('no free block to store into');
    const block: CachedBlock = { hash, lo, hi, parent, refs: 1, children: 0, lastUsed: 0, heapIndex: -1 };
    this.byHash.set(lo, hi, block);
    if (parent) {
      // A parent gaining a child is no longer a leaf.
      if (parent.children++ === 0) this.leaves.remove(parent);
    }
    if (this.recordEvents) this.recordStored(block, tokens, start);
    return block;
  }

  allocatePrivate(n: number): void {
    if (n > this.freeBlocks) throw new Error(`cannot allocate ${n} private blocks, ${this.freeBlocks} free`);
    this.privateBlocks += n;
  }

  freePrivate(n: number): void {
    if (n > this.privateBlocks) throw new Error(`freeing ${n} private blocks, only ${this.privateBlocks} held`);
    this.privateBlocks -= n;
  }

  /** Drops every cached block, as vLLM's prefix-cache reset does; refused while any block is held. */
  clear(): boolean {
    if (this.activeBlocks > 0) return false;
    this.byHash.clear();
    while (this.leaves.pop());
    this.inactive = 0;
    if (this.recordEvents) this.pending.push({ type: 'cleared' });
    return true;
  }

  /** Hashes of every cached block (active or inactive). */
  *hashes(): IterableIterator<bigint> {
    for (const block of this.byHash.valuesInSlots()) yield block.hash;
  }

  /** Whether any event was recorded since the last takeEvents. */
  get hasEvents(): boolean {
    return this.pending.length > 0;
  }

  /** The events recorded since the last call, in order. */
  takeEvents(): KvEvent[] {
    for (const draft of this.drafts) draft.event.tokenIds = copyTokens(draft, this.blockSize);
    this.drafts.length = 0;
    const events = this.pending;
    this.pending = [];
    return events;
  }

  private evict(block: CachedBlock): void {
    this.byHash.delete(block.lo, block.hi);
    this.inactive--;
    const parent = block.parent;
    if (parent && --parent.children === 0 && parent.refs === 0) this.leaves.push(parent);
    if (this.recordEvents) {
      const last = this.pending[this.pending.length - 1];
      if (last?.type === 'removed') last.blockHashes.push(block.hash);
      else this.pending.push({ type: 'removed', blockHashes: [block.hash], medium: 'GPU' });
    }
  }

  // Consecutive blocks of one chain stored in a row share one event, as vLLM batches them.
  private recordStored(block: CachedBlock, tokens: Uint32Array, start: number): void {
    const last = this.pending[this.pending.length - 1];
    const parentHash = block.parent ? block.parent.hash : null;
    if (last?.type === 'stored' && parentHash !== null && last.blockHashes[last.blockHashes.length - 1] === parentHash) {
      // Every stored event not yet taken has its draft, the last one last.
      const draft = this.drafts[this.drafts.length - 1]!;
      last.blockHashes.push(block.hash);
      draft.sources.push(tokens);
      draft.starts.push(start);
      return;
    }
    const event: BlockStored = {
      type: 'stored',
      blockHashes: [block.hash],
      parentBlockHash: parentHash,
      tokenIds: [],
      blockSize: this.blockSize,
      loraName: null,
      medium: 'GPU',
    };
    this.pending.push(event);
    this.drafts.push({ event, sources: [tokens], starts: [start] });
  }
}

/** The token ids of a draft's blocks, concatenated, into an array of the final length (growing one costs more than the copy). */
function copyTokens(draft: StoredDraft, blockSize: number): number[] {
  const ids = new Array<number>(draft.sources.length * blockSize);
  for (let b = 0, k = 0; b < draft.sources.length; b++) {
    const tokens = draft.sources[b]!;
    for (let p = draft.starts[b]!, end = p + blockSize; p < end; p++, k++) ids[k] = tokens[p]!;
  }
  return ids;
}
