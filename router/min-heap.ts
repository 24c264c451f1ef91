// A binary min-heap over arbitrary values with a caller-supplied order, for
// timers and deadlines. Removal is lazy: callers mark values dead and skip them.

export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(value: T): void {
    const h = this.items;
    // Sift a hole up instead of swapping: one move per level, and no
    // temporary arrays (destructuring swaps allocate on hot timer paths).
    let i = h.length;
    h.push(value);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = h[parent]!;
      if (!this.before(value, above)) break;
      h[i] = above;
      i = parent;
    }
    h[i] = value;
  }

  pop(): T | undefined {
    const h = this.items;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    const n = h.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const m = r < n && this.before(h[r]!, h[l]!) ? r : l;
        if (!this.before(h[m]!, last)) break;
        h[i] = h[m]!;
        i = m;
      }
      h[i] = last;
    }
    return top;
  }
}
