// The queue of one policy class: a shared lane, a lane per session and lanes
// named by a classifier. Each lane is a heap of entries; the class keeps a heap
// of its ready lanes keyed by each lane's head, so picking the class's next
// head never scans. A lane whose head the gate holds, or whose head has no free
// worker, is parked in `blocked` and blocks only itself until a wake.
import type { LaneHeapApi } from '../../bindings/lane-heap.js';
import type { LaneOrder } from '../../bindings/lane-order.js';
import type { DrrClass } from './drr.js';
import type { PolicyClass } from './contracts.js';

export type BlockReason = 'gate' | 'capacity';

export interface LaneEntry {
  readonly item: number;
  readonly order: LaneOrder;
  readonly promptTokens: number;
}

export interface Lane<E extends LaneEntry> {
  readonly key: string;
  readonly item: number;
  readonly heap: number;
  size: number;
  blocked: BlockReason | null;
  holdUntil: number;
  /** Entries by item id, for the heads the heap returns. */
  readonly entries: Map<number, E>;
}

/** Hands out item ids, unique across every heap of one LaneHeap. */
export class ItemIds {
  private next = 0;
  private readonly free: number[] = [];
  take(): number {
    return this.free.pop() ?? this.next++;
  }
  give(id: number): void {
    this.free.push(id);
  }
}

export class ClassQueue<E extends LaneEntry> implements DrrClass {
  deficit = 0;
  readonly quantum: number;
  readonly readyLanes: number;
  readonly lanes = new Map<string, Lane<E>>();
  readonly blocked = new Set<Lane<E>>();
  private readonly byItem = new Map<number, Lane<E>>();
  queuedRequests = 0;
  queuedTokens = 0;

  constructor(
    readonly policy: PolicyClass,
    private readonly heap: LaneHeapApi,
    private readonly ids: ItemIds,
  ) {
    this.quantum = policy.quantum;
    this.readyLanes = heap.createHeap();
  }

  /** Queues an entry in its lane; when the heap refuses the entry (its order), nothing changes. */
  enqueue(laneKey: string, entry: E): void {
    const existing = this.lanes.get(laneKey);
    const lane = existing ?? { key: laneKey, item: this.ids.take(), heap: this.heap.createHeap(), size: 0, blocked: null, holdUntil: Infinity, entries: new Map() };
    const before = this.heap.peek(lane.heap);
    try {
      this.heap.push(lane.heap, entry.item, entry.order);
    } catch (error) {
      // A lane exists only while it holds entries: one made for a refused entry goes again.
      if (!existing) this.releaseLane(lane);
      throw error;
    }
    if (!existing) {
      this.lanes.set(laneKey, lane);
      this.byItem.set(lane.item, lane);
    }
    lane.entries.set(entry.item, entry);
    lane.size++;
    this.queuedRequests++;
    this.queuedTokens += entry.promptTokens;
    if (this.heap.peek(lane.heap) === before) return;
    // A new head: a parked lane gets a fresh look at it.
    if (lane.blocked) this.unblock(lane);
    else this.keyLane(lane);
  }

  /** Removes an entry; returns its lane when the entry was that lane's head and others remain. */
  remove(laneKey: string, entry: E): Lane<E> | undefined {
    const lane = this.lanes.get(laneKey);
    if (!lane || !lane.entries.has(entry.item)) return undefined;
    const wasHead = this.heap.peek(lane.heap) === entry.item;
    this.heap.remove(entry.item);
    lane.entries.delete(entry.item);
    lane.size--;
    this.queuedRequests--;
    this.queuedTokens -= entry.promptTokens;
    if (lane.size === 0) {
      this.dropLane(lane);
      return undefined;
    }
    if (!lane.blocked) this.keyLane(lane);
    return wasHead ? lane : undefined;
  }

  /** The ready lane whose head comes first, or undefined. */
  firstReady(): Lane<E> | undefined {
    const item = this.heap.peek(this.readyLanes);
    return item < 0 ? undefined : this.byItem.get(item);
  }

  head(lane: Lane<E>): E {
    return lane.entries.get(this.heap.peek(lane.heap))!;
  }

  block(lane: Lane<E>, reason: BlockReason, until: number): void {
    this.heap.remove(lane.item);
    lane.blocked = reason;
    lane.holdUntil = until;
    this.blocked.add(lane);
  }

  unblock(lane: Lane<E>): void {
    if (!lane.blocked) return;
    lane.blocked = null;
    lane.holdUntil = Infinity;
    this.blocked.delete(lane);
    this.heap.push(this.readyLanes, lane.item, this.head(lane).order);
  }

  unblockAll(): void {
    for (const lane of [...this.blocked]) this.unblock(lane);
  }

  destroy(): void {
    for (const lane of [...this.lanes.values()]) this.dropLane(lane);
    this.heap.destroyHeap(this.readyLanes);
  }

  private keyLane(lane: Lane<E>): void {
    const order = this.head(lane).order;
    if (this.heap.heapOf(lane.item) >= 0) this.heap.update(lane.item, order);
    else this.heap.push(this.readyLanes, lane.item, order);
  }

  private dropLane(lane: Lane<E>): void {
    this.heap.remove(lane.item);
    this.blocked.delete(lane);
    // A dropped lane holds nothing: pending hold timers for it go stale.
    lane.blocked = null;
    lane.holdUntil = Infinity;
    this.lanes.delete(lane.key);
    this.byItem.delete(lane.item);
    this.releaseLane(lane);
  }

  private releaseLane(lane: Lane<E>): void {
    this.heap.destroyHeap(lane.heap);
    this.ids.give(lane.item);
  }
}
