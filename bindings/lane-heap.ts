// Binding over the wasm lane heap (assembly/lane-heap.ts): indexed heaps of
// integer item ids, ordered by LaneOrder. The scheduler keeps one heap of ready
// lanes per policy class and one heap of queued entries per lane.
import { Core } from './core.js';
import type { LaneOrder } from './lane-order.js';

export interface LaneHeapApi {
  createHeap(): number;
  destroyHeap(heap: number): void;
  /** Adds an item (an id in no heap) to a heap. */
  push(heap: number, item: number, order: LaneOrder): void;
  /** Re-keys an item where it is. */
  update(item: number, order: LaneOrder): void;
  remove(item: number): boolean;
  /** The first item, or -1 when the heap is empty. */
  peek(heap: number): number;
  pop(heap: number): number;
  size(heap: number): number;
  /** The heap an item is in, or -1. */
  heapOf(item: number): number;
}

interface LaneHeapExports {
  lanesCreateHeap(): number;
  lanesDestroyHeap(heap: number): void;
  lanesPush(heap: number, item: number, tier: number, deadline: number, key: number, seq: number): number;
  lanesUpdate(item: number, tier: number, deadline: number, key: number, seq: number): number;
  lanesRemove(item: number): number;
  lanesPeek(heap: number): number;
  lanesPop(heap: number): number;
  lanesSize(heap: number): number;
  lanesHeapOf(item: number): number;
}

const MAX_ITEM = 0x7fffffff;

export function validateOrder(order: LaneOrder): void {
  if (!Number.isInteger(order.tier) || Math.abs(order.tier) > 0x7fffffff) throw new RangeError(`lane order tier must be a 32-bit integer, got ${order.tier}`);
  if (Number.isNaN(order.deadline) || order.deadline === -Infinity) throw new RangeError(`lane order deadline must be a time or Infinity, got ${order.deadline}`);
  if (!Number.isFinite(order.key)) throw new RangeError(`lane order key must be finite, got ${order.key}`);
  if (!Number.isInteger(order.seq) || order.seq < 0 || order.seq > 0xffffffff) throw new RangeError(`lane order seq must be a u32, got ${order.seq}`);
}

function validateItem(item: number): void {
  if (!Number.isInteger(item) || item < 0 || item > MAX_ITEM) throw new RangeError(`lane heap item must be an integer in [0, 2^31), got ${item}`);
}

export class LaneHeap implements LaneHeapApi {
  private readonly core: LaneHeapExports;
  private readonly heaps = new Set<number>();

  constructor(options: { core?: Core } = {}) {
    const core = options.core ?? new Core();
    core.claim('lanes');
    this.core = core.kernel<LaneHeapExports>();
  }

  createHeap(): number {
    const heap = this.core.lanesCreateHeap();
    this.heaps.add(heap);
    return heap;
  }

  destroyHeap(heap: number): void {
    this.checkHeap(heap);
    this.heaps.delete(heap);
    this.core.lanesDestroyHeap(heap);
  }

  push(heap: number, item: number, order: LaneOrder): void {
    this.checkHeap(heap);
    validateItem(item);
    validateOrder(order);
    if (!this.core.lanesPush(heap, item, order.tier, order.deadline, order.key, order.seq)) {
      throw new RangeError(`item ${item} is already in a heap`);
    }
  }

  update(item: number, order: LaneOrder): void {
    validateItem(item);
    validateOrder(order);
    if (!this.core.lanesUpdate(item, order.tier, order.deadline, order.key, order.seq)) {
      throw new RangeError(`item ${item} is in no heap`);
    }
  }

  remove(item: number): boolean {
    validateItem(item);
    return this.core.lanesRemove(item) !== 0;
  }

  peek(heap: number): number {
    this.checkHeap(heap);
    return this.core.lanesPeek(heap);
  }

  pop(heap: number): number {
    this.checkHeap(heap);
    return this.core.lanesPop(heap);
  }

  size(heap: number): number {
    this.checkHeap(heap);
    return this.core.lanesSize(heap);
  }

  heapOf(item: number): number {
    validateItem(item);
    return this.core.lanesHeapOf(item);
  }

  private checkHeap(heap: number): void {
    if (!this.heaps.has(heap)) throw new RangeError(`no heap ${heap}`);
  }
}
