// The radix prefix-cache index in the wasm core (assembly/prefix-index.ts):
// KV events in, per-worker prefix overlap out. One wasm call per event; the
// hashes of an event cross through the core's I/O buffer as a BigUint64Array
// view, never one BigInt argument per block. Every call that changes the index
// or overwrites its match output records it (Core.wrote('matches')), so the
// fused decision (bindings/decider.ts) knows whether the matches it found are
// still there.
//
// One PrefixIndex is one core's index. It may be one shard of a model's index
// (bindings/prefix-index-sharded.ts): then it holds the model's worker slots
// s with s mod count == index, shares the model's WorkerSlots, and reports
// the model's slots.
//
// When the core cannot complete an update (no memory, or a trap), the worker
// it was for is cleared (after a trap, every worker of the core: the core's
// index is abandoned and starts empty), the failure is counted, and an
// IndexFailure names the workers, whose streams are stale from then on.
import { Core, CoreAbort, type CoreExports } from './core.js';
import { WorkerSlots, workerLabel, type WorkerKey } from './workers.js';
import {
  IndexFailure,
  checkArrayLike,
  checkHash,
  checkSameLength,
  checkTime,
  checkWorker,
  isU64,
  resolveIndexOptions,
  type IndexEvent,
  type MatchResult,
  type PrefixIndexApi,
  type PrefixIndexOptions,
  type PrefixIndexStats,
} from './prefix-index-api.js';
import { eventsFromSnapshot, type SnapshotId, type SnapshotNode } from './prefix-index-dump.js';
import { WIRE_APPLIED, WIRE_NOT_PARSED, WIRE_NO_MEMORY_STORING, WIRE_OTHER_SEED, WireBuffer, type WireExports, type WireTally } from './kv-wire-reader.js';

export { IndexFailure } from './prefix-index-api.js';
export type { IndexEvent, MatchResult, PrefixIndexApi, PrefixIndexOptions, PrefixIndexStats } from './prefix-index-api.js';
export { applyIndexEvents } from './prefix-index-dump.js';

interface IndexExports {
  indexInput(capacity: number): number;
  indexConfigure(ttlMs: number, maxRoutedBlocks: number, pruneTarget: number): void;
  indexConfigureShard(stride: number, offset: number): void;
  indexSetMemoryBound(bytes: number): void;
  indexStored(slot: number, hasParent: number, count: number): number;
  indexRemoved(slot: number, count: number): void;
  indexCleared(slot: number): void;
  indexFind(ptr: number, count: number, earlyExit: number): number;
  indexOutSlots(): number;
  indexOutDepths(): number;
  indexAnswer(): number;
  indexExpand(): number;
  indexInsertRouted(slot: number, count: number, nowMs: number): number;
  indexExpire(nowMs: number): number;
  indexRoutedTop(): number;
  indexRoutedTopPtr(): number;
  indexRoutedPop(): void;
  indexNodes(): number;
  indexBlocks(): number;
  indexRoutedBlocks(): number;
  indexUnknownParents(): number;
  indexUnknownRemovals(): number;
  indexEvictedBlocks(): number;
  indexSlotEvicted(slot: number): number;
  indexHeldBytes(): number;
  indexFailedUpdates(): number;
  indexUsedBytes(): number;
  indexEvictionLog(capacity: number): void;
  indexEvictionLogPtr(): number;
  indexEvictionLogCount(): number;
  indexEvictionLogClear(): void;
  indexReset(): void;
  indexDumpNodes(): number;
  indexDumpSlot(slot: number): number;
  indexDumpBuffer(): number;
  indexDumpRelease(): void;
}

/** Return codes of indexStored / indexInsertRouted (assembly/prefix-index.ts). */
const STORED = 1;
const NO_MEMORY = 2;
/** Slot the core treats as a worker holding nothing (removals from unknown workers). */
const NO_SLOT = 0xffffffff;
/** Hashes the I/O buffer holds from the start: events up to 255 blocks never grow it. */
const INITIAL_INPUT = 512;
/** Largest event or prompt, in blocks: keeps the I/O buffer's size within u32 indexes. */
export const MAX_BLOCKS = 1 << 26;

/** A routed block a prune would drop first (indexRoutedTop): for a model-wide prune over shards. */
export interface RoutedTop {
  expiry: number;
  external: bigint;
  slot: number;
  depth: number;
}

/** An evicted id, as the index logged it (PrefixIndexOptions of the binding: evictionLog). */
export interface Eviction {
  worker: WorkerKey;
  external: bigint;
}

/** What applyWire did: the tally of the events applied, and the failure that stopped the batch, if one did. */
export interface WireOutcome {
  tally: WireTally;
  failure: IndexFailure | null;
}

export interface PrefixIndexCoreOptions extends PrefixIndexOptions {
  core?: Core;
  workers?: WorkerSlots;
  /** This index as shard `index` of `count` (see the header). */
  shard?: { count: number; index: number };
  /** Log up to this many evicted ids for takeEvictions() (tests mirror them on the twin). */
  evictionLog?: number;
}

export class PrefixIndex implements PrefixIndexApi {
  readonly workers: WorkerSlots;
  readonly core: Core;
  private readonly k: IndexExports & WireExports & CoreExports;
  private readonly ownsSlots: boolean;
  private readonly shardCount: number;
  private readonly shardIndex: number;
  private readonly evictionLog: number;
  private failures = 0;
  private inputPtr = 0;
  private inputCapacity = 0;
  private inputView: BigUint64Array = new BigUint64Array(0);
  private inputGeneration = -1;
  // The whole memory as u32 words, for copyMatches, and the generation it was made under.
  private words: Uint32Array = new Uint32Array(0);
  private wordsGeneration = -1;
  // The word index of the core's record of where its answer is (assembly/prefix-match.ts).
  private readonly answer: number;
  private wire: WireBuffer | null = null;

  constructor(opts: PrefixIndexCoreOptions = {}) {
    const options = resolveIndexOptions(opts);
    const shard = opts.shard ?? { count: 1, index: 0 };
    if (!Number.isInteger(shard.count) || shard.count < 1 || !Number.isInteger(shard.index) || shard.index < 0 || shard.index >= shard.count) {
      throw new RangeError(`shard must be { count >= 1, 0 <= index < count }, got ${JSON.stringify(shard)}`);
    }
    this.core = opts.core ?? new Core();
    this.core.claim('index');
    this.k = this.core.kernel<IndexExports & WireExports>();
    this.ownsSlots = !opts.workers;
    this.workers = opts.workers ?? new WorkerSlots();
    this.shardCount = shard.count;
    this.shardIndex = shard.index;
    this.k.indexConfigure(options.ttlMs, options.maxRoutedBlocks, options.pruneTarget);
    this.k.indexConfigureShard(shard.count, shard.index);
    this.k.indexSetMemoryBound(options.memoryBoundBytes);
    this.evictionLog = opts.evictionLog ?? 0;
    if (this.evictionLog > 0) this.k.indexEvictionLog(this.evictionLog);
    if (!this.reserveInput(INITIAL_INPUT)) throw new CoreAbort('the core has no memory for the index I/O buffer');
    this.answer = this.k.indexAnswer() >>> 2;
  }

  applyStored(worker: WorkerKey, parent: bigint | null, external: ArrayLike<bigint>, local: ArrayLike<bigint>): boolean {
    checkArrayLike(external, 'external');
    checkArrayLike(local, 'local');
    checkSameLength(external, local);
    if (parent !== null) checkHash(parent, 'parent');
    checkWorker(worker);
    const n = blockCount(external, 'external');
    const view = this.stagingFor(worker, 1 + 2 * n);
    view[0] = parent ?? 0n;
    stage(external, view, 1, 'external');
    stage(local, view, 1 + n, 'local');
    const slot = this.workers.ensure(worker.id, worker.rank);
    this.core.wrote('matches');
    let status: number;
    try {
      status = this.k.indexStored(this.local(slot), parent === null ? 0 : 1, n);
    } catch (error) {
      return this.trapped(error, slot);
    }
    if (status === NO_MEMORY) this.noMemory(slot, 'storing');
    return status === STORED;
  }

  /**
   * Applies a batch WireReader.scan parsed to model slot `slot` of this
   * core: stores of blockSize (another size's are skipped and counted),
   * removals, clears, in order, through the same core calls as applyStored,
   * applyRemoved and clearSlot. A failure stops the batch where it happened,
   * with the same clearing and count as theirs, and comes back with the tally
   * of the events applied before it. Null when nothing was applied: the core
   * has no room for the batch, or it was hashed under another seed.
   */
  applyWire(slot: number, parsed: Uint8Array, blockSize: number, seed: bigint): WireOutcome | null {
    this.wire ??= new WireBuffer(this.core, this.k);
    if (!this.wire.stage(parsed)) return null;
    this.core.wrote('matches');
    let status: number;
    try {
      status = this.k.wireApply(this.local(slot), parsed.length, blockSize, seed);
    } catch (error) {
      const tally = this.wire.tally();
      return { tally, failure: failureOf(() => this.trapped(error, slot)) };
    } finally {
      this.forgetInput();
    }
    if (status === WIRE_OTHER_SEED) return null;
    if (status === WIRE_NOT_PARSED) throw new Error('applyWire was given bytes that are not a batch WireReader.scan parsed');
    const tally = this.wire.tally();
    if (status === WIRE_APPLIED) return { tally, failure: null };
    const doing = status === WIRE_NO_MEMORY_STORING ? 'storing' : `staging an event of ${tally.failedHashes} hashes of`;
    return { tally, failure: failureOf(() => this.noMemory(slot, doing)) };
  }

  applyRemoved(worker: WorkerKey, external: ArrayLike<bigint>): void {
    checkArrayLike(external, 'external');
    checkWorker(worker);
    const n = blockCount(external, 'external');
    const slot = this.workers.slotOf(worker.id, worker.rank);
    stage(external, this.stagingFor(worker, n), 0, 'external');
    this.core.wrote('matches');
    try {
      this.k.indexRemoved(slot === undefined ? NO_SLOT : this.local(slot), n);
    } catch (error) {
      this.trapped(error, slot);
    }
  }

  applyCleared(worker: WorkerKey): void {
    checkWorker(worker);
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot !== undefined) this.clearSlot(slot);
  }

  /**
   * Removes every rank of a worker id. The ranks' slots are released only when
   * this index made its own WorkerSlots; a shared one belongs to its creator.
   */
  removeWorker(id: string): void {
    if (typeof id !== 'string' || id.length === 0) throw new TypeError('worker id must be a non-empty string');
    for (const slot of this.workers.slotsOf(id)) {
      const { rank } = this.workers.keyOf(slot);
      if (this.holds(slot)) this.clearSlot(slot);
      if (this.ownsSlots) this.workers.release(id, rank);
    }
  }

  /** Clears one worker slot of this core. Never fails: clearing allocates nothing. */
  clearSlot(slot: number): void {
    this.core.wrote('matches');
    try {
      this.k.indexCleared(this.local(slot));
    } catch (error) {
      this.trapped(error, slot);
    }
  }

  findMatches(local: ArrayLike<bigint>, earlyExit = false): MatchResult {
    checkArrayLike(local, 'local');
    const n = blockCount(local, 'local');
    const view = this.input(n);
    // Without room for the prompt the index can say nothing about it: no overlap.
    if (!view) return EMPTY_MATCH;
    stage(local, view, 0, 'local');
    this.core.wrote('matches');
    return this.result(this.k.indexFind(this.inputPtr, n, earlyExit ? 1 : 0));
  }

  /** findMatches over `count` u64 local hashes already in core memory at `ptr` (e.g. the block hasher's output). */
  findMatchesAt(ptr: number, count: number, earlyExit = false): MatchResult {
    if (!Number.isInteger(count) || count < 0 || count > MAX_BLOCKS) throw new RangeError(`count must be an integer in [0, ${MAX_BLOCKS}], got ${count}`);
    if (!Number.isInteger(ptr) || ptr <= 0 || ptr % 8 !== 0 || ptr + 8 * count > this.core.memoryBytes) {
      throw new RangeError(`ptr must be an 8-byte aligned address of ${count} hashes inside core memory, got ${ptr}`);
    }
    this.core.wrote('matches');
    return this.result(this.k.indexFind(ptr, count, earlyExit ? 1 : 0));
  }

  /**
   * findMatches for a merge over shards (bindings/prefix-index-sharded.ts):
   * the hashes were checked by the caller, the answer stays in the core for
   * copyMatches, and no views are made. Returns how many workers it names.
   */
  findChecked(local: BigUint64Array): number {
    const view = this.input(local.length);
    if (!view) return 0;
    view.set(local);
    this.core.wrote('matches');
    return this.k.indexFind(this.inputPtr, local.length, 0) >>> 0;
  }

  /**
   * Copies the pairs of the `count` workers the last findChecked found to
   * slots and depths from `at` (the core writes its runs as pairs first).
   */
  copyMatches(slots: Uint32Array, depths: Uint32Array, at: number, count: number): void {
    this.k.indexExpand();
    const words = this.wordView();
    const from = words[this.answer + 4]! >>> 2;
    const depthsFrom = words[this.answer + 5]! >>> 2;
    slots.set(words.subarray(from, from + count), at);
    depths.set(words.subarray(depthsFrom, depthsFrom + count), at);
  }

  /**
   * Adds the last answer's size to `size`, for staging it in another core
   * (copyAnswer): its pairs, runs, and the u32 words of the member blocks
   * its runs name.
   */
  answerSize(size: AnswerSize): void {
    const words = this.wordView();
    const at = this.answer;
    const runs = words[at + 1]!;
    const records = words[at + 3]! >>> 2;
    size.pairs += words[at + 2]!;
    size.runs += runs;
    for (let r = 0; r < runs; r++) {
      const rec = records + RUN_WORDS * r;
      size.words += setWords(words, words[rec + 2]!, words[rec + 3]!) + setWords(words, words[rec + 4]!, words[rec + 5]!);
    }
  }

  /**
   * Copies the last answer into a stage in another core (AnswerStage): its
   * pairs from position `to.pairs` (of `pairsTotal`), its run records from
   * `to.runs`, the member blocks they name from word `to.words`, the records
   * pointing at them there; advances `to` past them.
   */
  copyAnswer(stage: AnswerCopy, to: AnswerSize, pairsTotal: number): void {
    const words = this.wordView();
    const at = this.answer;
    const runs = words[at + 1]!;
    const pairs = words[at + 2]!;
    const records = words[at + 3]! >>> 2;
    const slots = words[at + 4]! >>> 2;
    const depths = words[at + 5]! >>> 2;
    stage.pairs.set(words.subarray(slots, slots + pairs), to.pairs);
    stage.pairs.set(words.subarray(depths, depths + pairs), pairsTotal + to.pairs);
    let w = to.words;
    for (let r = 0; r < runs; r++) {
      const rec = records + RUN_WORDS * r;
      const out = RUN_WORDS * (to.runs + r);
      stage.runs.set(words.subarray(rec, rec + RUN_WORDS), out);
      // Each set of two or more (A at word 2, B at word 4): its block copied, the record pointing at the copy.
      for (let field = 2; field <= 4; field += 2) {
        const size = setWords(words, words[rec + field]!, words[rec + field + 1]!);
        if (size === 0) continue;
        const block = words[rec + field + 1]! >>> 2;
        stage.runs.set(words.subarray(block, block + size), w);
        stage.runs[out + field + 1] = stage.runsAddress + 4 * w;
        w += size;
      }
    }
    to.pairs += pairs;
    to.runs += runs;
    to.words = w;
  }

  /** The last answer's pairs, one per worker, as views (the core writes its runs as pairs first). */
  answerPairs(epoch: number, count: number): MatchPairs {
    if (this.core.epoch('matches') !== epoch) throw staleAnswer();
    this.k.indexExpand();
    return { slots: this.core.u32(this.k.indexOutSlots() >>> 0, count), depths: this.core.u32(this.k.indexOutDepths() >>> 0, count) };
  }

  // The whole memory as u32 words: the view made under the memory's generation.
  private wordView(): Uint32Array {
    const generation = this.core.generation;
    if (this.wordsGeneration !== generation) {
      this.words = this.core.u32(0, this.core.memoryBytes >>> 2);
      this.wordsGeneration = generation;
    }
    return this.words;
  }

  insertRouted(worker: WorkerKey, local: ArrayLike<bigint>, nowMs: number): void {
    checkArrayLike(local, 'local');
    checkTime(nowMs);
    checkWorker(worker);
    const n = blockCount(local, 'local');
    if (n === 0) return;
    stage(local, this.stagingFor(worker, n), 0, 'local');
    const slot = this.workers.ensure(worker.id, worker.rank);
    this.core.wrote('matches');
    let status: number;
    try {
      status = this.k.indexInsertRouted(this.local(slot), n, nowMs);
    } catch (error) {
      return this.trapped(error, slot);
    }
    if (status === NO_MEMORY) this.noMemory(slot, 'recording routed blocks for');
  }

  expire(nowMs: number): number {
    checkTime(nowMs);
    this.core.wrote('matches');
    try {
      return this.k.indexExpire(nowMs) >>> 0;
    } catch (error) {
      return this.trapped(error, undefined);
    }
  }

  /** The routed block the next prune drops first, or null. */
  routedTop(): RoutedTop | null {
    if (this.k.indexRoutedTop() === 0) return null;
    const ptr = this.k.indexRoutedTopPtr() >>> 0;
    const words = this.core.u32(ptr, 6);
    return { expiry: this.core.f64(ptr, 1)[0]!, external: this.core.u64(ptr + 8, 1)[0]!, slot: words[4]!, depth: words[5]! };
  }

  /** Drops the routed block routedTop() returned. */
  popRouted(): void {
    this.core.wrote('matches');
    try {
      this.k.indexRoutedPop();
    } catch (error) {
      this.trapped(error, undefined);
    }
  }

  dump(): IndexEvent[] {
    const k = this.k;
    try {
      const nodes: SnapshotNode[] = [];
      const nodeCount = k.indexDumpNodes() >>> 0;
      let words = this.core.u32(k.indexDumpBuffer() >>> 0, nodeCount * 4);
      let hashes = this.core.u64(k.indexDumpBuffer() >>> 0, nodeCount * 2);
      for (let i = 0; i < nodeCount; i++) nodes.push({ id: words[4 * i]!, parent: words[4 * i + 1]!, local: hashes[2 * i + 1]! });
      const workers: { worker: WorkerKey; ids: SnapshotId[] }[] = [];
      for (const [slot, worker] of this.workers.entries()) {
        if (!this.holds(slot)) continue;
        const count = k.indexDumpSlot(this.local(slot)) >>> 0;
        words = this.core.u32(k.indexDumpBuffer() >>> 0, count * 4);
        hashes = this.core.u64(k.indexDumpBuffer() >>> 0, count * 2);
        const ids: SnapshotId[] = [];
        for (let i = 0; i < count; i++) ids.push({ external: hashes[2 * i]!, node: words[4 * i + 2]!, refs: words[4 * i + 3]! });
        workers.push({ worker, ids });
      }
      return eventsFromSnapshot({ nodes, workers });
    } finally {
      k.indexDumpRelease();
    }
  }

  stats(): PrefixIndexStats {
    const k = this.k;
    return {
      nodes: k.indexNodes() >>> 0,
      blocks: k.indexBlocks() >>> 0,
      routedBlocks: k.indexRoutedBlocks() >>> 0,
      unknownParents: k.indexUnknownParents() >>> 0,
      unknownRemovals: k.indexUnknownRemovals() >>> 0,
      liveBytes: this.core.liveBytes,
      indexBytes: k.indexHeldBytes() >>> 0,
      evictedBlocks: k.indexEvictedBlocks(),
      allocationFailures: this.failures + (this.k.indexFailedUpdates() >>> 0),
    };
  }

  /** Bytes the index holds less its pools' free records: what the memory bound is compared with. */
  get usedBytes(): number {
    return this.k.indexUsedBytes() >>> 0;
  }

  evictedBlocks(worker: WorkerKey): number {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    return slot === undefined || !this.holds(slot) ? 0 : this.k.indexSlotEvicted(this.local(slot)) >>> 0;
  }

  /** The evicted ids logged since the last call (needs the evictionLog option). */
  takeEvictions(): Eviction[] {
    const count = this.k.indexEvictionLogCount();
    if (count < 0) throw new RangeError(`more than ${this.evictionLog} evictions happened between two takeEvictions() calls`);
    const ptr = this.k.indexEvictionLogPtr() >>> 0;
    const out: Eviction[] = [];
    if (count > 0) {
      const ids = this.core.u64(ptr, count * 2);
      const words = this.core.u32(ptr, count * 4);
      for (let i = 0; i < count; i++) out.push({ worker: this.workers.keyOf(words[4 * i + 2]!), external: ids[2 * i]! });
    }
    this.k.indexEvictionLogClear();
    return out;
  }

  /** Whether a model slot belongs to this core. */
  holds(slot: number): boolean {
    return slot % this.shardCount === this.shardIndex;
  }

  private local(slot: number): number {
    return Math.floor(slot / this.shardCount);
  }

  // An update threw: a trap abandons the core's index (see the header); anything else is rethrown.
  private trapped(error: unknown, slot: number | undefined): never {
    if (!(error instanceof WebAssembly.RuntimeError || error instanceof CoreAbort)) throw error;
    const workers = [...this.workers.entries()].filter(([s]) => this.holds(s)).map(([, key]) => key);
    this.core.wrote('matches');
    this.k.indexReset();
    this.failures++;
    const during = slot === undefined ? '' : ` while updating worker ${workerLabel(this.workers.keyOf(slot))}`;
    throw new IndexFailure('trap', workers, `the prefix index core trapped${during} (${(error as Error).message}); its ${workers.length} workers were cleared`);
  }

  private noMemory(slot: number, doing: string): never {
    this.clearSlot(slot);
    this.failures++;
    const worker = this.workers.keyOf(slot);
    throw new IndexFailure('no-memory', [worker], `the prefix index ran out of memory ${doing} worker ${workerLabel(worker)}; its cache entries were cleared`);
  }

  // A wire batch stages its events in the I/O buffer itself, and may have moved it.
  private forgetInput(): void {
    this.inputPtr = this.k.indexInput(0) >>> 0;
    this.inputGeneration = -1;
  }

  // The I/O buffer for an update of `worker`: a buffer that cannot grow is a failed update.
  private stagingFor(worker: WorkerKey, count: number): BigUint64Array {
    const view = this.input(count);
    if (view) return view;
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot === undefined) throw new IndexFailure('no-memory', [], `the prefix index has no memory for an event of ${count} hashes`);
    return this.noMemory(slot, `staging an event of ${count} hashes of`);
  }

  // The I/O buffer as a view of at least `count` hashes, grown when needed; null when it cannot grow.
  private input(count: number): BigUint64Array | null {
    if (count > this.inputCapacity && !this.reserveInput(count)) return null;
    const generation = this.core.generation;
    if (generation !== this.inputGeneration) {
      this.inputView = this.core.u64(this.inputPtr, this.inputCapacity);
      this.inputGeneration = generation;
    }
    return this.inputView;
  }

  private reserveInput(count: number): boolean {
    let capacity = Math.max(64, this.inputCapacity);
    while (capacity < count) capacity *= 2;
    const ptr = this.k.indexInput(capacity) >>> 0;
    if (ptr === 0) return false;
    this.inputPtr = ptr;
    this.inputCapacity = capacity;
    this.inputGeneration = -1;
    return true;
  }

  private result(count: number): MatchResult {
    count >>>= 0;
    if (count === 0) return EMPTY_MATCH;
    return new CompactAnswer(count, this, this.core.epoch('matches'));
  }
}

/** Counts of a compact answer (or positions in a stage of one): pairs, run records, u32 words of member blocks. */
export interface AnswerSize {
  pairs: number;
  runs: number;
  words: number;
}

/** Where an answer is staged in another core (AnswerStage.reserve's views). */
export interface AnswerCopy {
  pairs: Uint32Array;
  runs: Uint32Array;
  runsAddress: number;
}

/** u32 words of a run record (assembly/prefix-match.ts). */
export const RUN_WORDS = 8;
const BITMAP = 0x80000000;

/** The u32 words of the member block of a set (count, word) in memory `words`: none for a set of at most one. */
function setWords(words: Uint32Array, count: number, word: number): number {
  if (count <= 1) return 0;
  const header = words[word >>> 2]!;
  return 1 + ((header & BITMAP) !== 0 ? header & ~BITMAP : count);
}

/** A match result's pairs: one slot and depth per worker. */
export interface MatchPairs {
  slots: Uint32Array;
  depths: Uint32Array;
}

/** An index whose last answer is kept compact, as of an epoch of its writes. */
interface AnswerSource {
  /** The answer's pairs, one per worker; throws when the answer changed since `epoch`. */
  answerPairs(epoch: number, count: number): MatchPairs;
}

/**
 * A compact answer (assembly/prefix-match.ts; one core's, or several
 * shards') as a MatchResult: its count at once, its pairs derived when first
 * read, which must come before the next call that changes the answer.
 */
export class CompactAnswer implements MatchResult {
  private pairs: MatchPairs | null = null;

  constructor(
    readonly count: number,
    private readonly index: AnswerSource,
    private readonly epoch: number,
  ) {}

  get slots(): Uint32Array {
    return this.expanded().slots;
  }

  get depths(): Uint32Array {
    return this.expanded().depths;
  }

  private expanded(): MatchPairs {
    this.pairs ??= this.index.answerPairs(this.epoch, this.count);
    return this.pairs;
  }
}

/** A match result read after its index changed the answer it describes. */
export function staleAnswer(): Error {
  return new Error("a match result's pairs were read after a later call on its index replaced the answer (read them first, or copy them)");
}

/** The IndexFailure a failure handler throws. */
function failureOf(fail: () => never): IndexFailure {
  try {
    fail();
  } catch (error) {
    if (error instanceof IndexFailure) return error;
    throw error;
  }
}

const EMPTY_MATCH: MatchResult = Object.freeze({ count: 0, slots: new Uint32Array(0), depths: new Uint32Array(0) }) as MatchResult;

/**
 * Copies hashes into the I/O buffer, checking each on the way (one pass: a
 * bigint array's TypedArray.set costs several times more than element stores).
 */
function stage(values: ArrayLike<bigint>, view: BigUint64Array, at: number, field: string): void {
  if (values instanceof BigUint64Array) {
    view.set(values, at);
    return;
  }
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!isU64(v)) checkHash(v, `${field}[${i}]`);
    view[at + i] = v;
  }
}

function blockCount(values: ArrayLike<bigint>, field: string): number {
  if (values.length > MAX_BLOCKS) throw new RangeError(`${field} holds ${values.length} hashes, more than ${MAX_BLOCKS}`);
  return values.length;
}
