// Pure-TS twin of the prefix index (bindings/prefix-index.ts): the same public
// interface and rules, written for obviousness rather than speed. It is the
// oracle of the differential tests and the baseline of the benchmarks.
//
// Matching here computes every worker's overlap directly (walk the prompt's
// path while the worker holds each block); the wasm index gets the same
// numbers incrementally.
import { WorkerSlots, type WorkerKey } from '../workers.js';
import {
  checkChain,
  checkHashes,
  checkTime,
  checkWorker,
  resolveIndexOptions,
  type IndexEvent,
  type MatchResult,
  type PrefixIndexApi,
  type PrefixIndexOptions,
  type PrefixIndexStats,
  type ResolvedIndexOptions,
} from '../prefix-index-api.js';
import { eventsFromSnapshot, type IndexSnapshot, type SnapshotNode } from '../prefix-index-dump.js';

const M64 = (1n << 64n) - 1n;

/** The routed blocks' chained id: see chainMix in assembly/prefix-bind.ts. */
export function chainMix(prev: bigint, local: bigint): bigint {
  let k = (prev * 0x9e3779b97f4a7c15n + local) & M64;
  k ^= k >> 33n;
  k = (k * 0xff51afd7ed558ccdn) & M64;
  k ^= k >> 33n;
  k = (k * 0xc4ceb9fe1a85ec53n) & M64;
  k ^= k >> 33n;
  return k;
}

class TreeNode {
  readonly children = new Map<bigint, TreeNode>();
  /** slot -> how many of the worker's ids point at this node. */
  readonly members = new Map<number, number>();
  constructor(
    readonly id: number,
    readonly local: bigint,
    readonly parent: TreeNode | null,
    readonly depth: number,
  ) {}
}

interface Binding {
  node: TreeNode;
  refs: number;
  /** Set for a routed block (approximate mode). */
  expiry: number | null;
}

export class ReferencePrefixIndex implements PrefixIndexApi {
  readonly workers: WorkerSlots;
  private readonly ownsSlots: boolean;
  private readonly options: ResolvedIndexOptions;
  private readonly root = new TreeNode(0, 0n, null, 0);
  private readonly ids = new Map<number, Map<bigint, Binding>>();
  private nextId = 1;
  private nodes = 0;
  private blocks = 0;
  private unknownParents = 0;
  private unknownRemovals = 0;
  private evicted = 0;
  /** slot -> ids forgotten since the worker was last cleared. */
  private readonly evictedBySlot = new Map<number, number>();

  constructor(opts: PrefixIndexOptions & { workers?: WorkerSlots } = {}) {
    this.options = resolveIndexOptions(opts);
    this.ownsSlots = !opts.workers;
    this.workers = opts.workers ?? new WorkerSlots();
  }

  applyStored(worker: WorkerKey, parent: bigint | null, external: ArrayLike<bigint>, local: ArrayLike<bigint>): boolean {
    checkChain(external, local);
    if (parent !== null) checkHashes([parent], 'parent');
    checkWorker(worker);
    const slot = this.workers.ensure(worker.id, worker.rank);
    let cur = this.root;
    if (parent !== null) {
      const b = this.ids.get(slot)?.get(parent);
      if (!b) {
        this.unknownParents++;
        return false;
      }
      cur = b.node;
    }
    for (let i = 0; i < external.length; i++) {
      cur = this.child(cur, local[i]!);
      this.bindStored(slot, external[i]!, cur);
    }
    return true;
  }

  applyRemoved(worker: WorkerKey, external: ArrayLike<bigint>): void {
    checkHashes(external, 'external');
    checkWorker(worker);
    const slot = this.workers.slotOf(worker.id, worker.rank);
    for (let i = 0; i < external.length; i++) {
      if (slot === undefined || !this.unbind(slot, external[i]!)) this.unknownRemovals++;
    }
  }

  applyCleared(worker: WorkerKey): void {
    checkWorker(worker);
    const slot = this.workers.slotOf(worker.id, worker.rank);
    if (slot !== undefined) this.clear(slot);
  }

  removeWorker(id: string): void {
    if (typeof id !== 'string' || id.length === 0) throw new TypeError('worker id must be a non-empty string');
    for (const slot of this.workers.slotsOf(id)) {
      const { rank } = this.workers.keyOf(slot);
      this.clear(slot);
      if (this.ownsSlots) this.workers.release(id, rank);
    }
  }

  findMatches(local: ArrayLike<bigint>, earlyExit = false): MatchResult {
    checkHashes(local, 'local');
    const path: TreeNode[] = [];
    for (let i = 0, cur = this.root; i < local.length; i++) {
      const next = cur.children.get(local[i]!);
      if (!next) break;
      path.push(next);
      cur = next;
    }
    const scores = new Map<number, number>();
    for (const slot of path[0]?.members.keys() ?? []) {
      let d = 1;
      while (d < path.length && path[d]!.members.has(slot)) d++;
      scores.set(slot, d);
    }
    if (earlyExit) {
      // The first depth at which a single worker still matches ends the walk.
      for (let d = 1; d <= path.length; d++) {
        const left = [...scores].filter(([, s]) => s >= d);
        if (left.length === 1) {
          scores.set(left[0]![0], d);
          break;
        }
      }
    }
    const slots = new Uint32Array(scores.size);
    const depths = new Uint32Array(scores.size);
    let k = 0;
    for (const [slot, d] of scores) {
      slots[k] = slot;
      depths[k++] = d;
    }
    return { count: scores.size, slots, depths };
  }

  insertRouted(worker: WorkerKey, local: ArrayLike<bigint>, nowMs: number): void {
    checkHashes(local, 'local');
    checkTime(nowMs);
    checkWorker(worker);
    if (local.length === 0) return;
    const slot = this.workers.ensure(worker.id, worker.rank);
    const expiry = nowMs + this.options.ttlMs;
    let cur = this.root;
    let seq = 0n;
    for (let i = 0; i < local.length; i++) {
      seq = i === 0 ? local[0]! : chainMix(seq, local[i]!);
      cur = this.child(cur, local[i]!);
      this.bindRouted(slot, seq, cur, expiry);
    }
    const routed = this.routedBlocks();
    if (routed.length > this.options.maxRoutedBlocks) {
      routed.sort(
        (a, b) =>
          a.binding.expiry! - b.binding.expiry! ||
          b.binding.node.depth - a.binding.node.depth ||
          a.slot - b.slot ||
          (a.external < b.external ? -1 : a.external > b.external ? 1 : 0),
      );
      for (const r of routed.slice(0, routed.length - this.options.pruneTarget)) this.unbind(r.slot, r.external);
    }
  }

  expire(nowMs: number): number {
    checkTime(nowMs);
    const due = this.routedBlocks().filter((r) => r.binding.expiry! <= nowMs);
    for (const r of due) this.unbind(r.slot, r.external);
    return due.length;
  }

  dump(): IndexEvent[] {
    const nodes: SnapshotNode[] = [];
    const walk = (n: TreeNode): void => {
      for (const c of n.children.values()) {
        nodes.push({ id: c.id, parent: n.id, local: c.local });
        walk(c);
      }
    };
    walk(this.root);
    const snapshot: IndexSnapshot = {
      nodes,
      workers: [...this.workers.entries()].map(([slot, worker]) => ({
        worker,
        ids: [...(this.ids.get(slot) ?? [])].map(([external, b]) => ({
          external,
          node: b.node.id,
          refs: b.expiry === null ? b.refs : 1,
        })),
      })),
    };
    return eventsFromSnapshot(snapshot);
  }

  stats(): PrefixIndexStats {
    return {
      nodes: this.nodes,
      blocks: this.blocks,
      routedBlocks: this.routedBlocks().length,
      unknownParents: this.unknownParents,
      unknownRemovals: this.unknownRemovals,
      liveBytes: 0,
      indexBytes: 0,
      evictedBlocks: this.evicted,
      allocationFailures: 0,
    };
  }

  evictedBlocks(worker: WorkerKey): number {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    return slot === undefined ? 0 : (this.evictedBySlot.get(slot) ?? 0);
  }

  /**
   * Forgets ids whatever their references, as the wasm index does when it
   * evicts them under its memory bound: the way a test applies the wasm
   * index's evictions here. Ids the worker does not hold are ignored.
   */
  forget(worker: WorkerKey, external: readonly bigint[]): void {
    const slot = this.workers.slotOf(worker.id, worker.rank);
    const t = slot === undefined ? undefined : this.ids.get(slot);
    if (slot === undefined || !t) return;
    for (const id of external) {
      const b = t.get(id);
      if (!b) continue;
      b.refs = 1;
      b.expiry = null;
      this.unbind(slot, id);
      this.evicted++;
      this.evictedBySlot.set(slot, (this.evictedBySlot.get(slot) ?? 0) + 1);
    }
  }

  private child(parent: TreeNode, local: bigint): TreeNode {
    let c = parent.children.get(local);
    if (!c) {
      c = new TreeNode(this.nextId++, local, parent, parent.depth + 1);
      parent.children.set(local, c);
      this.nodes++;
    }
    return c;
  }

  private table(slot: number): Map<bigint, Binding> {
    let t = this.ids.get(slot);
    if (!t) {
      t = new Map();
      this.ids.set(slot, t);
    }
    return t;
  }

  private bindStored(slot: number, external: bigint, node: TreeNode): void {
    const b = this.table(slot).get(external);
    if (!b) {
      this.table(slot).set(external, { node, refs: 1, expiry: null });
      this.addRef(node, slot);
    } else if (b.node === node) {
      b.refs = b.expiry === null ? b.refs + 1 : 1;
      b.expiry = null;
    } else {
      const old = b.node;
      Object.assign(b, { node, refs: 1, expiry: null });
      this.addRef(node, slot);
      this.dropRef(old, slot);
    }
  }

  private bindRouted(slot: number, external: bigint, node: TreeNode, expiry: number): void {
    const b = this.table(slot).get(external);
    if (!b) {
      this.table(slot).set(external, { node, refs: 1, expiry });
      this.addRef(node, slot);
    } else if (b.node === node) {
      if (b.expiry !== null) b.expiry = expiry;
    } else {
      const old = b.node;
      Object.assign(b, { node, refs: 1, expiry });
      this.addRef(node, slot);
      this.dropRef(old, slot);
    }
  }

  private unbind(slot: number, external: bigint): boolean {
    const t = this.ids.get(slot);
    const b = t?.get(external);
    if (!t || !b) return false;
    if (b.expiry === null && b.refs > 1) {
      b.refs--;
      return true;
    }
    t.delete(external);
    if (t.size === 0) this.ids.delete(slot);
    this.dropRef(b.node, slot);
    return true;
  }

  private clear(slot: number): void {
    this.evictedBySlot.delete(slot);
    const t = this.ids.get(slot);
    if (!t) return;
    this.ids.delete(slot);
    for (const b of t.values()) this.dropRef(b.node, slot);
  }

  private addRef(node: TreeNode, slot: number): void {
    const n = node.members.get(slot) ?? 0;
    if (n === 0) this.blocks++;
    node.members.set(slot, n + 1);
  }

  private dropRef(node: TreeNode, slot: number): void {
    const n = node.members.get(slot)! - 1;
    if (n > 0) {
      node.members.set(slot, n);
      return;
    }
    node.members.delete(slot);
    this.blocks--;
    // A block nobody holds and nothing hangs from is forgotten, and so up the chain.
    for (let cur: TreeNode = node; cur.parent && cur.members.size === 0 && cur.children.size === 0; cur = cur.parent) {
      cur.parent.children.delete(cur.local);
      this.nodes--;
    }
    // An emptied index starts over: no worker's count of evicted ids survives it.
    if (this.nodes === 0) this.evictedBySlot.clear();
  }

  private routedBlocks(): { slot: number; external: bigint; binding: Binding }[] {
    const out: { slot: number; external: bigint; binding: Binding }[] = [];
    for (const [slot, t] of this.ids) {
      for (const [external, binding] of t) if (binding.expiry !== null) out.push({ slot, external, binding });
    }
    return out;
  }
}
