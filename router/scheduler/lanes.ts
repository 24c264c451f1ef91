// The queue of one policy class: a shared lane, a lane per session and lanes
// named by a classifier. Each lane is a heap of entries; the class keeps a heap
// of its ready lanes keyed by each lane's head, so picking the class's next
// head never scans. A lane whose head the gate holds, or whose head has no free
// worker, is blocked: it leaves the ready heap and waits where the wake rule
// (wake.ts) files it, blocking only itself until the rule releases it.
//
// The ready heap may also hold sources: items standing for a group of blocked
// lanes, keyed by that group's first lane. When a source comes first it hands
// its first lane over, so a group of lanes re-enters in order one lane at a
// time instead of all at once.
import type { LaneHeapApi } from '../../bindings/lane-heap.js';
import type { LaneOrder } from '../../bindings/lane-order.js';
import type { DrrClass } from './drr.js';
import type { PolicyClass } from './contracts.js';

/** Why a lane is blocked: the gate held its head, no worker was free, or admission refused a head the capacity check let through. */
export type BlockReason = 'gate' | 'capacity' | 'refused';

export interface LaneEntry {
  readonly item: number;
  readonly order: LaneOrder;
  readonly promptTokens: number;
}

/** Where a blocked lane waits; told when the lane leaves it (released or dropped). */
export interface Waiting<E extends LaneEntry> {
  leave(lane: Lane<E>): void;
}

/** A ready-heap item standing for blocked lanes (see the top of this file). */
export interface ReadySource {
  readonly item: number;
  /** Releases its first lane to the ready heap (ClassQueue.unblock). */
  promote(): void;
}

export interface Lane<E extends LaneEntry> {
  readonly key: string;
  readonly item: number;
  readonly heap: number;
  size: number;
  blocked: BlockReason | null;
  holdUntil: number;
  /** Where the lane waits while blocked. */
  waiting: Waiting<E> | null;
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
  blockedLanes = 0;
  private readonly byItem = new Map<number, Lane<E>>();
  private readonly sources = new Map<number, ReadySource>();
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
    const lane = existing ?? { key: laneKey, item: this.ids.take(), heap: this.heap.createHeap(), size: 0, blocked: null, holdUntil: Infinity, waiting: null, entries: new Map() };
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
    // A new head: a blocked lane gets a fresh look at it.
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
    // An emptied class loses its credit however it emptied, so credit never depends on when DRR last looked.
    if (this.queuedRequests === 0) this.deficit = 0;
    if (lane.size === 0) {
      this.dropLane(lane);
      return undefined;
    }
    if (!lane.blocked) this.keyLane(lane);
    return wasHead ? lane : undefined;
  }

  /** The ready lane whose head comes first (sources ahead of it hand their lanes over), or undefined. */
  firstReady(): Lane<E> | undefined {
    for (;;) {
      const item = this.heap.peek(this.readyLanes);
      if (item < 0) return undefined;
      const lane = this.byItem.get(item);
      if (lane) return lane;
      this.sources.get(item)!.promote();
    }
  }

  head(lane: Lane<E>): E {
    return lane.entries.get(this.heap.peek(lane.heap))!;
  }

  /** The lane with this item id (a wait group's heap holds lane items). */
  laneOf(item: number): Lane<E> {
    return this.byItem.get(item)!;
  }

  /** Takes a ready lane out of the ready heap; `waiting` files it. */
  block(lane: Lane<E>, reason: BlockReason, until: number, waiting: Waiting<E>): void {
    this.heap.remove(lane.item);
    lane.blocked = reason;
    lane.holdUntil = until;
    lane.waiting = waiting;
    this.blockedLanes++;
  }

  unblock(lane: Lane<E>): void {
    if (!lane.blocked) return;
    this.clearBlock(lane);
    this.heap.push(this.readyLanes, lane.item, this.head(lane).order);
  }

  /** Puts a source in the ready heap at `order`, or moves it there. */
  offer(source: ReadySource, order: LaneOrder): void {
    if (this.heap.heapOf(source.item) >= 0) this.heap.update(source.item, order);
    else this.heap.push(this.readyLanes, source.item, order);
    this.sources.set(source.item, source);
  }

  withdraw(source: ReadySource): void {
    this.heap.remove(source.item);
    this.sources.delete(source.item);
  }

  destroy(): void {
    for (const lane of [...this.lanes.values()]) this.dropLane(lane);
    this.heap.destroyHeap(this.readyLanes);
  }

  private clearBlock(lane: Lane<E>): void {
    const waiting = lane.waiting;
    lane.blocked = null;
    lane.holdUntil = Infinity;
    lane.waiting = null;
    this.blockedLanes--;
    waiting?.leave(lane);
  }

  private keyLane(lane: Lane<E>): void {
    const order = this.head(lane).order;
    if (this.heap.heapOf(lane.item) >= 0) this.heap.update(lane.item, order);
    else this.heap.push(this.readyLanes, lane.item, order);
  }

  private dropLane(lane: Lane<E>): void {
    // A dropped lane holds nothing: pending hold timers for it go stale.
    if (lane.blocked) this.clearBlock(lane);
    this.heap.remove(lane.item);
    this.lanes.delete(lane.key);
    this.byItem.delete(lane.item);
    this.releaseLane(lane);
  }

  private releaseLane(lane: Lane<E>): void {
    this.heap.destroyHeap(lane.heap);
    this.ids.give(lane.item);
  }
}
