// Moves a request's KV blocks in and out of the block cache: prefix hits at
// admission, growth as tokens are computed (full prompt blocks become cached
// blocks, the rest stays private), release at completion or preemption.
import type { BlockCache, BlockId } from './block-cache.js';
import type { Sequence } from './sequence.js';

export class SequenceKv {
  constructor(private readonly cache: BlockCache) {}

  get blockSize(): number {
    return this.cache.blockSize;
  }

  /**
   * Cached blocks a (re)admitted request can reuse. At least one token is
   * always left to compute, because the step that computes it is the one that
   * samples the next token (vLLM caps cache hits the same way).
   */
  prefixHits(seq: Sequence): BlockId[] {
    return this.cache.matchPrefix(seq.hashHalves, Math.floor((seq.knownTokens - 1) / this.blockSize));
  }

  /**
   * Blocks the request can load from the offload tier right after its GPU
   * hits, within the same cap as the hits (0 without a tier).
   */
  offloadHits(seq: Sequence, gpuHits: number): number {
    const tier = this.cache.tier;
    if (!tier) return 0;
    return tier.lookup(seq.hashes, gpuHits, Math.floor((seq.knownTokens - 1) / this.blockSize));
  }

  /** Whether `loads` blocks can be given to a load after taking `hits`. */
  canLoad(loads: number, hits: readonly BlockId[]): boolean {
    return this.cache.canAllocate(loads, hits);
  }

  /**
   * Admits a request that loads `loads` blocks from the offload tier after
   * its GPU hits: it takes the hits and GPU room for the loaded blocks (held
   * as private blocks until the load is in), and pins them in the tier.
   */
  beginLoad(seq: Sequence, hits: readonly BlockId[], loads: number): void {
    this.admit(seq, hits);
    if (!this.cache.makeRoom(loads)) throw new Error(`request ${seq.id}: no room to load ${loads} blocks`);
    this.cache.allocatePrivate(loads);
    seq.privateBlocks = loads;
    seq.loadingBlocks = loads;
    this.cache.tier!.pin(seq.hashes, hits.length, hits.length + loads);
  }

  /**
   * The load is in: the loaded blocks become cached GPU blocks (published as
   * GPU stores, as the engine caches loaded blocks) and count as computed.
   */
  finishLoad(seq: Sequence): void {
    const from = seq.held.length;
    const to = from + seq.loadingBlocks;
    this.unpin(seq);
    this.cache.freePrivate(seq.privateBlocks);
    seq.privateBlocks = 0;
    const halves = seq.hashHalves;
    for (let i = from; i < to; i++) {
      const existing = this.cache.get(halves[2 * i]!, halves[2 * i + 1]!);
      if (existing >= 0) {
        // Another request computed or loaded it meanwhile.
        this.cache.acquire(existing);
        seq.held.push(existing);
      } else {
        seq.held.push(this.cache.store(seq.hashes[i]!, seq.held[i - 1] ?? null, seq.request.tokens, i * this.blockSize, seq.request, seq.media?.[i] ?? null));
      }
    }
    seq.computed = to * this.blockSize;
  }

  /** Whether the request (holding `hits` after admission, or its current blocks) can compute `n` more tokens. */
  canGrow(seq: Sequence, n: number, hits?: readonly BlockId[]): boolean {
    const computed = hits ? hits.length * this.blockSize : seq.computed;
    const held = hits ? hits.length : seq.heldBlocks;
    return this.cache.canAllocate(this.blocksFor(computed + n) - held, hits);
  }

  /** Takes the prefix hits of a request being admitted; returns the reused token count. */
  admit(seq: Sequence, hits: readonly BlockId[]): number {
    this.cache.tier?.touchAll(seq.hashes);
    for (const block of hits) {
      this.cache.acquire(block);
      seq.held.push(block);
    }
    seq.computed = hits.length * this.blockSize;
    return seq.computed;
  }

  /**
   * Records `n` more computed tokens (the caller checked canGrow). Returns how
   * many of them are recomputations of KV a preemption discarded.
   */
  grow(seq: Sequence, n: number): number {
    const target = seq.computed + n;
    const bs = this.blockSize;
    if (!this.cache.makeRoom(this.blocksFor(target) - seq.heldBlocks)) {
      throw new Error(`request ${seq.id}: no room to grow to ${target} tokens`);
    }
    // Private blocks are re-counted from scratch: a partially computed prompt
    // block that is now complete turns from private into cached.
    this.cache.freePrivate(seq.privateBlocks);
    seq.privateBlocks = 0;
    const fullBlocks = Math.min(Math.floor(target / bs), seq.hashes.length);
    const tokens = seq.request.tokens;
    const halves = seq.hashHalves;
    for (let i = seq.held.length; i < fullBlocks; i++) {
      const existing = this.cache.get(halves[2 * i]!, halves[2 * i + 1]!);
      if (existing >= 0) {
        // Another request (or this one's capped prefix hit) cached it meanwhile.
        this.cache.acquire(existing);
        seq.held.push(existing);
      } else {
        seq.held.push(this.cache.store(seq.hashes[i]!, seq.held[i - 1] ?? null, tokens, i * bs, seq.request, seq.media?.[i] ?? null));
      }
    }
    seq.privateBlocks = this.blocksFor(target) - seq.held.length;
    this.cache.allocatePrivate(seq.privateBlocks);
    const recomputed = Math.max(0, Math.min(target, seq.recomputeUntil) - seq.computed);
    seq.recomputedTokens += recomputed;
    seq.computed = target;
    return recomputed;
  }

  /** Returns every block the request holds; cached ones stay cached (inactive) until evicted. */
  release(seq: Sequence): void {
    this.unpin(seq);
    // Tail first, the order vLLM frees in.
    for (let i = seq.held.length - 1; i >= 0; i--) this.cache.release(seq.held[i]!);
    seq.held.length = 0;
    this.cache.freePrivate(seq.privateBlocks);
    seq.privateBlocks = 0;
  }

  private unpin(seq: Sequence): void {
    if (seq.loadingBlocks === 0) return;
    this.cache.tier!.unpin(seq.hashes, seq.held.length, seq.held.length + seq.loadingBlocks);
    seq.loadingBlocks = 0;
  }

  private blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }
}
