// The radix prefix-cache index in the wasm core (assembly/prefix-index.ts):
// KV events in, per-worker prefix overlap out. One wasm call per event; the
// hashes of an event cross through the core's I/O buffer as a BigUint64Array
// view, never one BigInt argument per block. Every call that changes the index
// or overwrites its match output records it (Core.wrote('matches')), so the
// fused decision (bindings/decider.ts) knows whether the matches it found are
// still there.
import { Core, type CoreExports } from './core.js';
import { WorkerSlots, type WorkerKey } from './workers.js';
import {
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

export type { IndexEvent, MatchResult, PrefixIndexApi, PrefixIndexOptions, PrefixIndexStats } from './prefix-index-api.js';
export { applyIndexEvents } from './prefix-index-dump.js';

interface IndexExports {
  indexInput(capacity: number): number;
  indexConfigure(ttlMs: number, maxRoutedBlocks: number, pruneTarget: number): void;
  indexStored(slot: number, hasParent: number, count: number): number;
  indexRemoved(slot: number, count: number): void;
  indexCleared(slot: number): void;
  indexFind(ptr: number, count: number, earlyExit: number): number;
  indexOutSlots(): number;
  indexOutDepths(): number;
  indexInsertRouted(slot: number, count: number, nowMs: number): void;
  indexExpire(nowMs: number): number;
  indexNodes(): number;
  indexBlocks(): number;
  indexRoutedBlocks(): number;
  indexUnknownParents(): number;
  indexUnknownRemovals(): number;
  indexDumpNodes(): number;
  indexDumpSlot(slot: number): number;
  indexDumpBuffer(): number;
  indexDumpRelease(): void;
}

/** Slot the core treats as a worker holding nothing (removals from unknown workers). */
const NO_SLOT = 0xffffffff;
/** Hashes the I/O buffer holds from the start: events up to 255 blocks never grow it. */
const INITIAL_INPUT = 512;
/** Largest event or prompt, in blocks: keeps the I/O buffer's size within u32 indexes. */
const MAX_BLOCKS = 1 << 26;

export class PrefixIndex implements PrefixIndexApi {
  readonly workers: WorkerSlots;
  private readonly core: Core;
  private readonly k: IndexExports & CoreExports;
  private readonly ownsSlots: boolean;
  private inputPtr = 0;
  private inputCapacity = 0;
  private inputView: BigUint64Array = new BigUint64Array(0);
  private inputGeneration = -1;

  constructor(opts: PrefixIndexOptions & { core?: Core; workers?: WorkerSlots } = {}) {
    const options = resolveIndexOptions(opts);
    this.core = opts.core ?? new Core();
    this.core.claim('index');
    this.k = this.core.kernel<IndexExports>();
    this.ownsSlots = !opts.workers;
    this.workers = opts.workers ?? new WorkerSlots();
    this.k.indexConfigure(options.ttlMs, options.maxRoutedBlocks, options.pruneTarget);
    this.input(INITIAL_INPUT);
  }

  applyStored(worker: WorkerKey, parent: bigint | null, external: ArrayLike<bigint>, local: ArrayLike<bigint>): boolean {
    checkArrayLike(external, 'external');
    checkArrayLike(local, 'local');
    checkSameLength(external, local);
    if (parent !== null) checkHash(parent, 'parent');
    checkWorker(worker);
    const n = blockCount(external, 'external');
    const view = this.input(1 + 2 * n);
    view[0] = parent ?? 0n;
    stage(external, view, 1, 'external');
    stage(local, view, 1 + n, 'local');
    const slot = this.workers.ensure(worker.id, worker.rank);
    this.core.wrote('matches');
    return this.k.indexStored(slot, parent === null ? 0 : 1, n) === 1;
  }

  applyRemoved(worker: WorkerKey, external: ArrayLike<bigint>): void {
    checkArrayLike(external, 'external');
    checkWorker(worker);
    const n = blockCount(external, 'external');
    stage(external, this.input(n), 0, 'external');
    this.core.wrote('matches');
    this.k.indexRemoved(this.workers.slotOf(worker.id, worker.rank) ?? NO_SLOT, n);
  }

  applyCleared(worker: WorkerKey): void {
    checkWorker(worker);
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot !== undefined) this.k.indexCleared(slot);
    this.core.wrote('matches');
  }

  /**
   * Removes every rank of a worker id. The ranks' slots are released only when
   * this index made its own WorkerSlots; a shared one belongs to its creator.
   */
  removeWorker(id: string): void {
    if (typeof id !== 'string' || id.length === 0) throw new TypeError('worker id must be a non-empty string');
    this.core.wrote('matches');
    for (const slot of this.workers.slotsOf(id)) {
      const { rank } = this.workers.keyOf(slot);
      this.k.indexCleared(slot);
      if (this.ownsSlots) this.workers.release(id, rank);
    }
  }

  findMatches(local: ArrayLike<bigint>, earlyExit = false): MatchResult {
    checkArrayLike(local, 'local');
    const n = blockCount(local, 'local');
    stage(local, this.input(n), 0, 'local');
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

  insertRouted(worker: WorkerKey, local: ArrayLike<bigint>, nowMs: number): void {
    checkArrayLike(local, 'local');
    checkTime(nowMs);
    checkWorker(worker);
    const n = blockCount(local, 'local');
    if (n === 0) return;
    stage(local, this.input(n), 0, 'local');
    this.core.wrote('matches');
    this.k.indexInsertRouted(this.workers.ensure(worker.id, worker.rank), n, nowMs);
  }

  expire(nowMs: number): number {
    checkTime(nowMs);
    this.core.wrote('matches');
    return this.k.indexExpire(nowMs) >>> 0;
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
        const count = k.indexDumpSlot(slot) >>> 0;
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
    };
  }

  // The I/O buffer as a view of at least `count` hashes; grows it when needed.
  private input(count: number): BigUint64Array {
    if (count > this.inputCapacity) {
      let capacity = Math.max(64, this.inputCapacity);
      while (capacity < count) capacity *= 2;
      this.inputPtr = this.k.indexInput(capacity) >>> 0;
      this.inputCapacity = capacity;
      this.inputGeneration = -1;
    }
    const generation = this.core.generation;
    if (generation !== this.inputGeneration) {
      this.inputView = this.core.u64(this.inputPtr, this.inputCapacity);
      this.inputGeneration = generation;
    }
    return this.inputView;
  }

  private result(count: number): MatchResult {
    count >>>= 0;
    if (count === 0) return { count: 0, slots: new Uint32Array(0), depths: new Uint32Array(0) };
    return {
      count,
      slots: this.core.u32(this.k.indexOutSlots() >>> 0, count),
      depths: this.core.u32(this.k.indexOutDepths() >>> 0, count),
    };
  }
}

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
