// Time for the engine. router/ never reads the wall clock or sleeps: the live
// server gives it a RealClock, replay and tests a VirtualClock, and both drive
// the same code.
import { MinHeap } from './min-heap.js';

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
    let handle: NodeJS.Timeout;
    // Node's timers run on the event loop's cached time, which can lag this
    // clock by a millisecond or two: a timer that fires early waits out the rest.
    const arm = () => {
      handle = setTimeout(() => (this.now() < at ? arm() : fn()), Math.max(0, Math.ceil(at - this.now())));
      // A pending timer must not keep a finished process alive.
      handle.unref?.();
    };
    arm();
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
  private readonly timers = new MinHeap<Pending>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq));

  constructor(start = 0) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  at(at: number, fn: () => void): Timer {
    const entry: Pending = { at: Math.max(at, this.time), seq: this.seq++, fn, cancelled: false };
    this.timers.push(entry);
    return { cancel: () => void (entry.cancelled = true) };
  }

  /** Time of the next live timer, or undefined when none is pending. */
  nextAt(): number | undefined {
    this.dropCancelled();
    return this.timers.peek()?.at;
  }

  /** Runs the next due timer, moving time to it; false when none is pending. */
  step(): boolean {
    this.dropCancelled();
    const next = this.timers.pop();
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
    while (this.timers.peek()?.cancelled) this.timers.pop();
  }
}
