// Time for the engine. router/ never reads the wall clock or sleeps: the live
// server gives it a RealClock, replay and tests a VirtualClock, and both drive
// the same code.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds on this clock's time line. */
  now(): number;
  /** Runs fn once at (or as soon as possible after) time `at`. */
  at(at: number, fn: () => void): Timer;
}

export class RealClock implements Clock {
  private readonly origin = performance.timeOrigin;

  now(): number {
    return this.origin + performance.now();
  }

  at(at: number, fn: () => void): Timer {
    const handle = setTimeout(fn, Math.max(0, at - this.now()));
    // A pending timer must not keep a finished process alive.
    handle.unref?.();
    return { cancel: () => clearTimeout(handle) };
  }
}

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that only moves when told to. Timers due at the same time run in the
 * order they were set, so a replay is deterministic.
 */
export class VirtualClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly heap: Pending[] = [];

  constructor(start = 0) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  at(at: number, fn: () => void): Timer {
    const entry: Pending = { at: Math.max(at, this.time), seq: this.seq++, fn, cancelled: false };
    this.push(entry);
    return { cancel: () => void (entry.cancelled = true) };
  }

  /** Time of the next live timer, or undefined when none is pending. */
  nextAt(): number | undefined {
    this.dropCancelled();
    return this.heap[0]?.at;
  }

  /** Runs the next due timer, moving time to it; false when none is pending. */
  step(): boolean {
    this.dropCancelled();
    const next = this.pop();
    if (!next) return false;
    this.time = next.at;
    next.fn();
    return true;
  }

  /** Runs every timer due at or before `until`, then sets time to `until`. */
  advanceTo(until: number): void {
    for (;;) {
      const next = this.nextAt();
      if (next === undefined || next > until) break;
      this.step();
    }
    if (until > this.time) this.time = until;
  }

  /** Runs timers until none is pending or `limit` have run; returns how many ran. */
  runAll(limit = Number.POSITIVE_INFINITY): number {
    let ran = 0;
    while (ran < limit && this.step()) ran++;
    return ran;
  }

  private dropCancelled(): void {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) this.pop();
  }

  private less(a: Pending, b: Pending): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private push(entry: Pending): void {
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): Pending | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}
