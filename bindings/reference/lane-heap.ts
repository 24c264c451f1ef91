// Pure-TS twin of the wasm lane heap: many indexed binary heaps over integer
// item ids, ordered by LaneOrder. Simple and obviously correct, not fast.
import { orderBefore, type LaneOrder } from '../lane-order.js';
import type { LaneHeapApi } from '../lane-heap.js';

interface Item extends LaneOrder {
  heap: number;
}

export class ReferenceLaneHeap implements LaneHeapApi {
  private readonly heaps = new Map<number, number[]>();
  private readonly items = new Map<number, Item>();
  private nextHeap = 0;

  createHeap(): number {
    const id = this.nextHeap++;
    this.heaps.set(id, []);
    return id;
  }

  destroyHeap(heap: number): void {
    for (const item of this.list(heap)) this.items.delete(item);
    this.heaps.delete(heap);
  }

  push(heap: number, item: number, order: LaneOrder): void {
    const list = this.list(heap);
    if (this.items.has(item)) throw new RangeError(`item ${item} is already in a heap`);
    this.items.set(item, { heap, ...order });
    list.push(item);
  }

  update(item: number, order: LaneOrder): void {
    const entry = this.items.get(item);
    if (!entry) throw new RangeError(`item ${item} is in no heap`);
    Object.assign(entry, order);
  }

  remove(item: number): boolean {
    const entry = this.items.get(item);
    if (!entry) return false;
    const list = this.list(entry.heap);
    list.splice(list.indexOf(item), 1);
    this.items.delete(item);
    return true;
  }

  peek(heap: number): number {
    let best = -1;
    for (const item of this.list(heap)) {
      if (best < 0 || orderBefore(this.items.get(item)!, this.items.get(best)!)) best = item;
    }
    return best;
  }

  pop(heap: number): number {
    const best = this.peek(heap);
    if (best >= 0) this.remove(best);
    return best;
  }

  size(heap: number): number {
    return this.list(heap).length;
  }

  heapOf(item: number): number {
    return this.items.get(item)?.heap ?? -1;
  }

  private list(heap: number): number[] {
    const list = this.heaps.get(heap);
    if (!list) throw new RangeError(`no heap ${heap}`);
    return list;
  }
}
