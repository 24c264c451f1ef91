// One model's prefix index over several wasm cores, split by worker: the
// model's worker slot s lives in shard s mod count (bindings/prefix-index.ts,
// one core each), so every KV event touches one shard, and a lookup asks
// every shard and concatenates their answers (a worker is in one shard, so
// nothing needs merging). Each core is a wasm32 memory of at most 4 GiB;
// shards lift that limit and keep a failure (no memory, a trap) to the
// workers of one core.
//
// Decisions are the same as with one shard: every rule of the index is per
// worker, except two that are model-wide and are applied here:
// - earlyExit: the first depth with a single survivor over all workers. The
//   shards report exact depths and the merge cuts the deepest worker's depth
//   to one past the second deepest when it is alone there.
// - approximate mode's prune: past maxRoutedBlocks, the earliest-expiring
//   routed blocks model-wide go. Shards do not prune; this index pops the
//   least of the shards' heap tops (same order: expiry, depth descending,
//   slot, id) until the target is reached.
// Node counts (stats().nodes) add up per shard: a block several shards' workers
// hold is a node in each.
import { Core } from './core.js';
import type { AnswerStage } from './decision-contract.js';
import { WorkerSlots, type WorkerKey } from './workers.js';
import {
  checkArrayLike,
  checkHashes,
  checkSameLength,
  checkTime,
  checkWorker,
  resolveIndexOptions,
  type IndexEvent,
  type MatchResult,
  type PrefixIndexApi,
  type PrefixIndexOptions,
  type PrefixIndexStats,
} from './prefix-index-api.js';
import { CompactAnswer, PrefixIndex, RUN_WORDS, staleAnswer, type AnswerSize, type Eviction, type MatchPairs, type RoutedTop, type WireOutcome } from './prefix-index.js';

/** Most index bytes a shard is given: a wasm32 memory holds 4 GiB, and the heap needs room to move tables. */
export const SHARD_BOUND_BYTES = 3 * 2 ** 30;

export interface ShardedIndexOptions extends PrefixIndexOptions {
  /** Shards; default: enough for memoryBoundBytes at SHARD_BOUND_BYTES each (1 without a bound). */
  shards?: number;
  /** The core shard 0 lives in (e.g. the model fleet's, beside its ledger); the others get their own. */
  core?: Core;
  workers?: WorkerSlots;
  /** Per shard, for takeEvictions() (see PrefixIndex). */
  evictionLog?: number;
}

/** Shards for a memory bound: enough that none is given more than SHARD_BOUND_BYTES. */
export function shardsFor(memoryBoundBytes: number): number {
  return Math.max(1, Math.ceil(memoryBoundBytes / SHARD_BOUND_BYTES));
}

export class ShardedPrefixIndex implements PrefixIndexApi {
  readonly workers: WorkerSlots;
  readonly shards: readonly PrefixIndex[];
  private readonly ownsSlots: boolean;
  private readonly maxRouted: number;
  private readonly pruneTarget: number;
  private mergedSlots = new Uint32Array(64);
  private mergedDepths = new Uint32Array(64);
  // The workers each shard's last answer names.
  private readonly found: Uint32Array;
  // stageAnswer's counts: the answers' size, and the positions copied to so far.
  private readonly staged: { size: AnswerSize; at: AnswerSize } = { size: { pairs: 0, runs: 0, words: 0 }, at: { pairs: 0, runs: 0, words: 0 } };

  constructor(opts: ShardedIndexOptions = {}) {
    const options = resolveIndexOptions(opts);
    const count = opts.shards ?? shardsFor(options.memoryBoundBytes);
    if (!Number.isInteger(count) || count < 1 || count > 256) throw new RangeError(`shards must be an integer in [1, 256], got ${String(count)}`);
    this.ownsSlots = !opts.workers;
    this.workers = opts.workers ?? new WorkerSlots();
    this.maxRouted = options.maxRoutedBlocks;
    this.pruneTarget = options.pruneTarget;
    const perShard = Math.floor(options.memoryBoundBytes / count);
    this.found = new Uint32Array(count);
    this.shards = Array.from(
      { length: count },
      (_, index) =>
        new PrefixIndex({
          ttlMs: options.ttlMs,
          // Several shards: the prune is model-wide, here.
          maxRoutedBlocks: count === 1 ? options.maxRoutedBlocks : 2 ** 31,
          pruneTargetRatio: count === 1 ? opts.pruneTargetRatio : 1,
          memoryBoundBytes: perShard,
          core: index === 0 ? opts.core : undefined,
          workers: this.workers,
          shard: { count, index },
          evictionLog: opts.evictionLog,
        }),
    );
  }

  /** Changes whenever the matches of any shard may have (every shard's core counts its match writes). */
  matchesEpoch(): number {
    let epoch = 0;
    for (const shard of this.shards) epoch += shard.core.epoch('matches');
    return epoch;
  }

  applyStored(worker: WorkerKey, parent: bigint | null, external: ArrayLike<bigint>, local: ArrayLike<bigint>): boolean {
    if (this.workers.slotOf(worker?.id, worker?.rank) === undefined) {
      // A new worker gets its slot (and so its shard) only for a valid event.
      checkChain(worker, external, local);
      if (parent !== null) checkHashes([parent], 'parent');
    }
    return this.shardOf(this.workers.ensure(worker.id, worker.rank)).applyStored(worker, parent, external, local);
  }

  /** PrefixIndex.applyWire on the worker's shard; null (nothing applied) for a worker without a slot. */
  applyWire(worker: WorkerKey, parsed: Uint8Array, blockSize: number, seed: bigint): WireOutcome | null {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    return slot === undefined ? null : this.shardOf(slot).applyWire(slot, parsed, blockSize, seed);
  }

  applyRemoved(worker: WorkerKey, external: ArrayLike<bigint>): void {
    checkWorker(worker);
    const slot = this.workers.slotOf(worker.id, worker.rank);
    // A worker the index never saw holds nothing: any shard counts the removals as unknown.
    (slot === undefined ? this.shards[0]! : this.shardOf(slot)).applyRemoved(worker, external);
  }

  applyCleared(worker: WorkerKey): void {
    checkWorker(worker);
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot !== undefined) this.shardOf(slot).clearSlot(slot);
  }

  removeWorker(id: string): void {
    if (typeof id !== 'string' || id.length === 0) throw new TypeError('worker id must be a non-empty string');
    for (const slot of this.workers.slotsOf(id)) {
      const { rank } = this.workers.keyOf(slot);
      this.shardOf(slot).clearSlot(slot);
      if (this.ownsSlots) this.workers.release(id, rank);
    }
  }

  findMatches(local: ArrayLike<bigint>, earlyExit = false): MatchResult {
    if (this.shards.length === 1) return this.shards[0]!.findMatches(local, earlyExit);
    checkHashes(local, 'local');
    // Checked once: the shards take the hashes as a typed array, copied without checks.
    const hashes = local instanceof BigUint64Array ? local : BigUint64Array.from(local as ArrayLike<bigint>);
    const found = this.found;
    let count = 0;
    for (const [i, shard] of this.shards.entries()) {
      found[i] = shard.findChecked(hashes);
      count += found[i]!;
    }
    const answer = new CompactAnswer(count, this, this.matchesEpoch());
    if (earlyExit) cutSingleSurvivor(answer.depths);
    return answer;
  }

  /**
   * findMatches, its answer staged in another core as it is (AnswerStage,
   * bindings/decision-contract.ts): every shard's pairs, run records and the
   * member blocks they name, so the decision there reads runs, not a pair
   * per worker. Returns how many pairs and runs it staged.
   */
  stageAnswer(local: BigUint64Array, into: AnswerStage): { pairs: number; runs: number } {
    this.findMatches(local);
    const size = this.staged.size;
    size.pairs = size.runs = size.words = 0;
    for (let i = 0; i < this.shards.length; i++) if (this.found[i] !== 0) this.shards[i]!.answerSize(size);
    const stage = into.reserve(size.pairs, size.runs, size.words);
    const at = this.staged.at;
    at.pairs = at.runs = 0;
    at.words = RUN_WORDS * size.runs;
    for (let i = 0; i < this.shards.length; i++) if (this.found[i] !== 0) this.shards[i]!.copyAnswer(stage, at, size.pairs);
    return { pairs: size.pairs, runs: size.runs };
  }

  /** The last findMatches' pairs over every shard, merged (each shard's answer written as pairs first). */
  answerPairs(epoch: number, count: number): MatchPairs {
    if (this.matchesEpoch() !== epoch) throw staleAnswer();
    this.reserveMerged(count);
    let at = 0;
    for (const [i, shard] of this.shards.entries()) {
      const n = this.found[i]!;
      if (n === 0) continue;
      shard.copyMatches(this.mergedSlots, this.mergedDepths, at, n);
      at += n;
    }
    return { slots: this.mergedSlots.subarray(0, count), depths: this.mergedDepths.subarray(0, count) };
  }

  insertRouted(worker: WorkerKey, local: ArrayLike<bigint>, nowMs: number): void {
    if (this.workers.slotOf(worker?.id, worker?.rank) === undefined) {
      checkHashes(local, 'local');
      checkTime(nowMs);
      checkWorker(worker);
      if (local.length === 0) return;
    }
    this.shardOf(this.workers.ensure(worker.id, worker.rank)).insertRouted(worker, local, nowMs);
    if (this.shards.length > 1) this.prune();
  }

  expire(nowMs: number): number {
    checkTime(nowMs);
    let removed = 0;
    for (const shard of this.shards) removed += shard.expire(nowMs);
    return removed;
  }

  dump(): IndexEvent[] {
    return this.shards.flatMap((s) => s.dump());
  }

  stats(): PrefixIndexStats {
    const total: PrefixIndexStats = { nodes: 0, blocks: 0, routedBlocks: 0, unknownParents: 0, unknownRemovals: 0, liveBytes: 0, indexBytes: 0, evictedBlocks: 0, allocationFailures: 0 };
    for (const shard of this.shards) {
      const s = shard.stats();
      for (const key of Object.keys(total) as (keyof PrefixIndexStats)[]) total[key] += s[key];
    }
    return total;
  }

  evictedBlocks(worker: WorkerKey): number {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    return slot === undefined ? 0 : this.shardOf(slot).evictedBlocks(worker);
  }

  /** Every shard's logged evictions since the last call. */
  takeEvictions(): Eviction[] {
    return this.shards.flatMap((s) => s.takeEvictions());
  }

  private shardOf(slot: number): PrefixIndex {
    return this.shards[slot % this.shards.length]!;
  }

  // The model-wide prune of approximate mode (see the header).
  private prune(): void {
    let routed = 0;
    for (const shard of this.shards) routed += shard.stats().routedBlocks;
    if (routed <= this.maxRouted) return;
    const tops = this.shards.map((s) => s.routedTop());
    for (; routed > this.pruneTarget; routed--) {
      let first = -1;
      for (let i = 0; i < tops.length; i++) if (tops[i] && (first < 0 || prunesBefore(tops[i]!, tops[first]!))) first = i;
      if (first < 0) return;
      this.shards[first]!.popRouted();
      tops[first] = this.shards[first]!.routedTop();
    }
  }

  private reserveMerged(count: number): void {
    if (count <= this.mergedSlots.length) return;
    let capacity = this.mergedSlots.length;
    while (capacity < count) capacity *= 2;
    const slots = new Uint32Array(capacity);
    const depths = new Uint32Array(capacity);
    slots.set(this.mergedSlots);
    depths.set(this.mergedDepths);
    this.mergedSlots = slots;
    this.mergedDepths = depths;
  }
}

function checkChain(worker: WorkerKey, external: ArrayLike<bigint>, local: ArrayLike<bigint>): void {
  checkArrayLike(external, 'external');
  checkArrayLike(local, 'local');
  checkSameLength(external, local);
  checkHashes(external, 'external');
  checkHashes(local, 'local');
  checkWorker(worker);
}

/** The prune order of approximate mode: expiry, then depth descending, slot, id. */
function prunesBefore(a: RoutedTop, b: RoutedTop): boolean {
  if (a.expiry !== b.expiry) return a.expiry < b.expiry;
  if (a.depth !== b.depth) return a.depth > b.depth;
  if (a.slot !== b.slot) return a.slot < b.slot;
  return a.external < b.external;
}

/**
 * earlyExit over exact depths: the walk would stop at the first depth where
 * one worker alone still matches, one past the second deepest, and report
 * that depth for it.
 */
function cutSingleSurvivor(depths: Uint32Array): void {
  let deepest = -1;
  let second = 0;
  for (let i = 0; i < depths.length; i++) {
    const d = depths[i]!;
    if (deepest < 0 || d > depths[deepest]!) {
      if (deepest >= 0) second = depths[deepest]!;
      deepest = i;
    } else if (d > second) {
      second = d;
    }
  }
  if (deepest >= 0 && depths[deepest]! > second) depths[deepest] = second + 1;
}
