// The eviction candidates of the block cache: inactive blocks (no request
// holds them) that have no cached children, ordered least recently used
// first. Evicting only leaves keeps a shared prefix cached while any longer
// chain built on it survives. An indexed binary heap, so a block that becomes
// active again (a cache hit) leaves the candidates in O(log n).

export interface HeapBlock {
  /** Monotonic tick of the block's last release; smaller = older. Unique per block release. */
  lastUsed: number;
  /** Position in the heap, -1 when the block is not a candidate. */
  heapIndex: number;
}

export class LeafHeap<T extends HeapBlock> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  push(block: T): void {
    block.heapIndex = this.items.length;
    this.items.push(block);
    this.up(block.heapIndex);
  }

  /** Removes and returns the least recently used candidate. */
  pop(): T | undefined {
    const top = this.items[0];
    if (top) this.remove(top);
    return top;
  }

  remove(block: T): void {
    const i = block.heapIndex;
    if (i < 0) return;
    const last = this.items.pop()!;
    block.heapIndex = -1;
    if (last === block) return;
    this.items[i] = last;
    last.heapIndex = i;
    this.down(i);
    this.up(last.heapIndex);
  }

  private swap(i: number, j: number): void {
    const a = this.items[i]!;
    const b = this.items[j]!;
    this.items[i] = b;
    this.items[j] = a;
    a.heapIndex = j;
    b.heapIndex = i;
  }

  private up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.items[parent]!.lastUsed <= this.items[i]!.lastUsed) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(i: number): void {
    const n = this.items.length;
    for (;;) {
      const l = 2 * i + 1;
      let m = i;
      if (l < n && this.items[l]!.lastUsed < this.items[m]!.lastUsed) m = l;
      if (l + 1 < n && this.items[l + 1]!.lastUsed < this.items[m]!.lastUsed) m = l + 1;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}
