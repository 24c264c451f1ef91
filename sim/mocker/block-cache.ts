// The engine's KV block pool. A block is either private to one request (the
// partial tail of a prompt and every generated token: never shared, freed at
// completion) or a cached full prompt block named by its chained hash. Cached
// blocks are refcounted by the requests using them; at refcount 0 they stay
// cached ("inactive") for prefix reuse until space is needed, and then the
// least recently used leaf goes first (see leaf-heap.ts). Every change to the
// set of cached hashes is recorded as a KV event, so a router applying the
// events sees exactly this cache. A cached block is a slot of typed arrays
// (a replay stores and evicts millions), named by its BlockId while cached.
// With an offload tier (offload-tier.ts), every newly cached block is also
// written through to host memory and published there (medium CPU): a block
// evicted from the GPU stays offloaded, as vLLM's offloading connector has it.
import type { BlockStored, KvEvent, MediaKey } from '../../router/kv-events.js';
import type { EngineRequest } from './sequence.js';
import { LeafHeap } from './leaf-heap.js';
import { OffloadTier } from './offload-tier.js';
import { halvesOf, U64Map } from './u64-map.js';

/** A cached block: its slot in the cache, valid until it is evicted. */
export type BlockId = number;

/**
 * A stored event still open to more blocks of its chain, with where each
 * block's token ids are; they are copied out once, when the event is taken.
 */
interface StoredDraft {
  event: BlockStored;
  sources: Uint32Array[];
  starts: number[];
  /** Per block, its media keys (null: none). */
  media: (readonly MediaKey[] | null)[];
}

/** The keys a request's blocks were hashed with, as its stored events name them. */
export type StoreKeys = Pick<EngineRequest, 'lora' | 'cacheSalt'>;

const NO_KEYS: StoreKeys = {};

/**
 * A block's extra keys as vLLM lists them: the adapter name on every block of
 * an adapter's request, the salt on a request's first block; null for none.
 */
function extraKeysOf(keys: StoreKeys, first: boolean): string[] | null {
  const out: string[] = [];
  if (keys.lora) out.push(keys.lora);
  if (first && keys.cacheSalt) out.push(keys.cacheSalt);
  return out.length > 0 ? out : null;
}

const NOTHING: readonly BlockId[] = [];
const NO_PARENT = -1;

export class BlockCache {
  /** The slot of each cached block, by its hash halves. */
  private readonly byHash: U64Map;
  // Per slot, for the block cached there:
  private readonly hash: bigint[];
  private readonly lo: Uint32Array;
  private readonly hi: Uint32Array;
  private readonly parent: Int32Array;
  /** Requests currently holding the block. */
  private readonly refs: Int32Array;
  /** Cached blocks whose parent is this one. */
  private readonly children: Int32Array;
  /** When the last holder let go (a tick: smaller = longer ago), for eviction order. */
  private readonly releasedAt: Float64Array;
  /** Slots holding no block, as a stack. */
  private readonly free: Int32Array;
  private freeCount: number;
  private readonly leaves: LeafHeap;
  private cached = 0;
  private inactive = 0;
  private privateBlocks = 0;
  private tick = 0;
  private pending: KvEvent[] = [];
  /** The stored events of `pending` whose token ids are still to be copied out. */
  private drafts: StoredDraft[] = [];
  /** The host-memory tier; null: none. */
  readonly tier: OffloadTier | null;

  /**
   * @param numBlocks capacity in blocks
   * @param blockSize tokens per block
   * @param recordEvents whether to build KV events (skipped when nobody listens: it copies token ids)
   */
  constructor(
    readonly numBlocks: number,
    readonly blockSize: number,
    private readonly recordEvents: boolean,
    /** Capacity of the offload tier in blocks; 0: none (with one, events must be recorded: the tier is filled from them). */
    offloadBlocks = 0,
  ) {
    if (offloadBlocks > 0 && !recordEvents) throw new Error('an offload tier is written through from the stored events: record them');
    this.tier = offloadBlocks > 0 ? new OffloadTier(offloadBlocks, blockSize) : null;
    // The cache never holds more cached blocks than it has blocks: nothing here ever grows.
    this.byHash = new U64Map(numBlocks);
    this.hash = new Array<bigint>(numBlocks).fill(0n);
    this.lo = new Uint32Array(numBlocks);
    this.hi = new Uint32Array(numBlocks);
    this.parent = new Int32Array(numBlocks);
    this.refs = new Int32Array(numBlocks);
    this.children = new Int32Array(numBlocks);
    this.releasedAt = new Float64Array(numBlocks);
    // Slot 0 on top, so blocks fill the slots in order.
    this.free = Int32Array.from({ length: numBlocks }, (_, i) => numBlocks - 1 - i);
    this.freeCount = numBlocks;
    this.leaves = new LeafHeap(numBlocks);
  }

  /** Blocks in use: cached (active or inactive) plus private. */
  get usedBlocks(): number {
    return this.cached + this.privateBlocks;
  }

  get freeBlocks(): number {
    return this.numBlocks - this.usedBlocks;
  }

  /** Blocks some request holds: what the decode-time model calls KV utilisation. */
  get activeBlocks(): number {
    return this.usedBlocks - this.inactive;
  }

  get cachedBlocks(): number {
    return this.cached;
  }

  get inactiveBlocks(): number {
    return this.inactive;
  }

  /** The cached block whose hash has these halves; -1 when none is. */
  get(lo: number, hi: number): BlockId {
    return this.byHash.get(lo, hi);
  }

  /** The cached blocks matching the leading hashes (as (lo, hi) halves), at most `limit` of them. */
  matchPrefix(halves: Uint32Array, limit: number): BlockId[] {
    const hits: BlockId[] = [];
    const end = Math.min(limit, halves.length >> 1);
    for (let i = 0; i < end; i++) {
      const block = this.byHash.get(halves[2 * i]!, halves[2 * i + 1]!);
      if (block < 0) break;
      hits.push(block);
    }
    return hits;
  }

  /**
   * Whether `need` new blocks fit after evicting every evictable block,
   * counting `reactivating` (inactive blocks about to be held) as not evictable.
   */
  canAllocate(need: number, reactivating: readonly BlockId[] = NOTHING): boolean {
    let reserved = 0;
    for (const block of reactivating) if (this.refs[block] === 0) reserved++;
    return this.freeBlocks + this.inactive - reserved >= need;
  }

  /** Evicts leaves until `need` blocks are free; false if that is impossible. */
  makeRoom(need: number): boolean {
    while (this.freeBlocks < need) {
      const victim = this.leaves.pop();
      if (victim < 0) return false;
      this.evict(victim);
    }
    return true;
  }

  /** Takes a reference on a cached block, reviving it if it was inactive. */
  acquire(block: BlockId): void {
    if (this.refs[block]!++ === 0) {
      this.inactive--;
      this.leaves.remove(block);
    }
  }

  /** Drops a reference; an unreferenced leaf becomes an eviction candidate. */
  release(block: BlockId): void {
    const refs = this.refs[block]!;
    if (refs <= 0) throw new Error(`block ${this.hash[block]} released more often than acquired`);
    this.refs[block] = refs - 1;
    if (refs > 1) return;
    this.inactive++;
    const tick = ++this.tick;
    this.releasedAt[block] = tick;
    if (this.children[block] === 0) this.leaves.push(block, tick);
  }

  /**
   * Caches a newly computed full block, held once by its computing request.
   * `tokens[start..start+blockSize)` are its token ids.
   */
  store(hash: bigint, parent: BlockId | null, tokens: Uint32Array, start: number, keys: StoreKeys = NO_KEYS, media: readonly MediaKey[] | null = null): BlockId {
    const [lo, hi] = halvesOf(hash);
    if (this.byHash.has(lo, hi)) throw new Error(`block ${hash} is already cached`);
    if (this.freeBlocks <= 0) throw new Error('no free block to store into');
    const block = this.free[--this.freeCount]!;
    this.hash[block] = hash;
    this.lo[block] = lo;
    this.hi[block] = hi;
    this.parent[block] = parent ?? NO_PARENT;
    this.refs[block] = 1;
    this.children[block] = 0;
    this.byHash.set(lo, hi, block);
    this.cached++;
    // A parent gaining a child is no longer a leaf.
    if (parent !== null && this.children[parent]!++ === 0) this.leaves.remove(parent);
    if (this.recordEvents) this.recordStored(block, parent, tokens, start, keys, media);
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
    for (let block = this.leaves.pop(); block >= 0; block = this.leaves.pop());
    this.free.forEach((_, i, free) => (free[i] = this.numBlocks - 1 - i));
    this.freeCount = this.numBlocks;
    this.cached = 0;
    this.inactive = 0;
    // A reset drops every tier's blocks, as one cleared event says.
    this.tier?.clear();
    if (this.recordEvents) this.pending.push({ type: 'cleared' });
    return true;
  }

  /** Hashes of every cached block (active or inactive). */
  *hashes(): IterableIterator<bigint> {
    for (const block of this.byHash.valuesInSlots()) yield this.hash[block]!;
  }

  /** Whether any event was recorded since the last takeEvents. */
  get hasEvents(): boolean {
    return this.pending.length > 0;
  }

  /** The events recorded since the last call, in order. */
  takeEvents(): KvEvent[] {
    const offloads: KvEvent[] = [];
    for (const draft of this.drafts) {
      const tokens = copyTokens(draft, this.blockSize);
      draft.event.tokenIds = tokens;
      if (draft.media.some((keys) => keys !== null)) withMedia(draft.event, draft.media);
      this.tier?.writeThrough(draft.event, tokens, offloads);
    }
    this.drafts.length = 0;
    const events = this.pending;
    this.pending = [];
    return offloads.length > 0 ? events.concat(offloads) : events;
  }

  private evict(block: BlockId): void {
    this.byHash.delete(this.lo[block]!, this.hi[block]!);
    this.free[this.freeCount++] = block;
    this.cached--;
    this.inactive--;
    const parent = this.parent[block]!;
    if (parent !== NO_PARENT && --this.children[parent]! === 0 && this.refs[parent] === 0) this.leaves.push(parent, this.releasedAt[parent]!);
    if (this.recordEvents) {
      const hash = this.hash[block]!;
      const last = this.pending[this.pending.length - 1];
      if (last?.type === 'removed') last.blockHashes.push(hash);
      else this.pending.push({ type: 'removed', blockHashes: [hash], medium: 'GPU' });
    }
  }

  // Consecutive blocks of one chain stored in a row share one event, as vLLM batches them.
  private recordStored(block: BlockId, parent: BlockId | null, tokens: Uint32Array, start: number, keys: StoreKeys, media: readonly MediaKey[] | null): void {
    const last = this.pending[this.pending.length - 1];
    const parentHash = parent === null ? null : this.hash[parent]!;
    const extra = extraKeysOf(keys, start === 0);
    if (last?.type === 'stored' && parentHash !== null && last.blockHashes[last.blockHashes.length - 1] === parentHash) {
      // Every stored event not yet taken has its draft, the last one last.
      const draft = this.drafts[this.drafts.length - 1]!;
      last.blockHashes.push(this.hash[block]!);
      // A chain's blocks share its adapter (it is in their hashes), so the event's lora_name holds for all.
      if (last.extraKeys) (last.extraKeys as (string[] | null)[]).push(extra);
      draft.sources.push(tokens);
      draft.starts.push(start);
      draft.media.push(media);
      return;
    }
    const event: BlockStored = {
      type: 'stored',
      blockHashes: [this.hash[block]!],
      parentBlockHash: parentHash,
      tokenIds: [],
      blockSize: this.blockSize,
      loraName: keys.lora || null,
      medium: 'GPU',
    };
    if (extra) event.extraKeys = [extra];
    this.pending.push(event);
    this.drafts.push({ event, sources: [tokens], starts: [start], media: [media] });
  }
}

/** Sets a stored event's media keys, and lists them among its extra keys (after the adapter and salt) as vLLM publishes them. */
function withMedia(event: BlockStored, media: (readonly MediaKey[] | null)[]): void {
  event.media = media;
  event.extraKeys = media.map((keys, b) => {
    const all: unknown[] = [...(event.extraKeys?.[b] ?? []), ...(keys ?? []).map((k) => [k.id, k.offset])];
    return all.length > 0 ? all : null;
  });
}

/**
 * The token ids of a draft's blocks, concatenated. Blocks one request stored
 * back to back (the usual case) are already contiguous in its prompt, so
 * they are a view of it; prompts are never written after admission.
 */
function copyTokens(draft: StoredDraft, blockSize: number): Uint32Array {
  const { sources, starts } = draft;
  const first = sources[0]!;
  let contiguous = true;
  for (let b = 1; b < sources.length && contiguous; b++) contiguous = sources[b] === first && starts[b] === starts[0]! + b * blockSize;
  if (contiguous) return first.subarray(starts[0]!, starts[0]! + sources.length * blockSize);
  const ids = new Uint32Array(sources.length * blockSize);
  for (let b = 0; b < sources.length; b++) ids.set(sources[b]!.subarray(starts[b]!, starts[b]! + blockSize), b * blockSize);
  return ids;
}
