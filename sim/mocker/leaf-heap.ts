// The eviction candidates of the block cache: inactive blocks (no request
// holds them) that have no cached children, ordered least recently used
// first. Evicting only leaves keeps a shared prefix cached while any longer
// chain built on it survives. An indexed binary heap over the cache's block
// slots, so a block that becomes active again (a cache hit) leaves the
// candidates in O(log n). It lives in typed arrays, with each candidate's
// release tick next to it: a replay pushes and pops millions of candidates.

export class LeafHeap {
  /** The heap: slots, and their release ticks at the same positions. */
  private readonly slots: Int32Array;
  private readonly ticks: Float64Array;
  /** Per slot, its position in the heap; -1 when it is not a candidate. */
  private readonly position: Int32Array;
  private count = 0;

  /** @param capacity slots 0..capacity-1 may be candidates */
  constructor(capacity: number) {
    this.slots = new Int32Array(capacity);
    this.ticks = new Float64Array(capacity);
    this.position = new Int32Array(capacity).fill(-1);
  }

  get size(): number {
    return this.count;
  }

  /** Adds a slot released at `tick` (smaller = older; unique per release). */
  push(slot: number, tick: number): void {
    const i = this.count++;
    this.place(i, slot, tick);
    this.up(i);
  }

  /** Removes and returns the least recently used candidate; -1 when there is none. */
  pop(): number {
    if (this.count === 0) return -1;
    const top = this.slots[0]!;
    this.remove(top);
    return top;
  }

  remove(slot: number): void {
    const i = this.position[slot]!;
    if (i < 0) return;
    this.position[slot] = -1;
    const last = --this.count;
    if (i === last) return;
    // The last candidate fills the hole and moves whichever way the order says.
    this.place(i, this.slots[last]!, this.ticks[last]!);
    if (i > 0 && this.ticks[(i - 1) >> 1]! > this.ticks[i]!) this.up(i);
    else this.down(i);
  }

  private place(i: number, slot: number, tick: number): void {
    this.slots[i] = slot;
    this.ticks[i] = tick;
    this.position[slot] = i;
  }

  private up(i: number): void {
    const slot = this.slots[i]!;
    const tick = this.ticks[i]!;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.ticks[parent]! <= tick) break;
      this.place(i, this.slots[parent]!, this.ticks[parent]!);
      i = parent;
    }
    this.place(i, slot, tick);
  }

  private down(i: number): void {
    const n = this.count;
    const slot = this.slots[i]!;
    const tick = this.ticks[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const m = l + 1 < n && this.ticks[l + 1]! < this.ticks[l]! ? l + 1 : l;
      if (this.ticks[m]! >= tick) break;
      this.place(i, this.slots[m]!, this.ticks[m]!);
      i = m;
    }
    this.place(i, slot, tick);
  }
}
