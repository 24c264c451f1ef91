// The scheduler's time: queued deadlines, the gate's holds until a time, and
// the periodic tick, on one timer armed for the earliest of them. A hold
// whose time comes releases its lane; a deadline that passes refuses its
// request; the tick runs the wake rule's safety net and nothing else.
import type { Clock, Timer } from '../clock.js';
import { MinHeap } from '../min-heap.js';
import type { SchedRequest } from './contracts.js';
import type { Entry } from './entry.js';
import type { ClassQueue, Lane, LaneEntry } from './lanes.js';

interface Hold<R extends SchedRequest> {
  until: number;
  lane: Lane<Entry<R>>;
  cls: ClassQueue<Entry<R>>;
}

export interface TimersOptions<R extends SchedRequest> {
  clock: Clock;
  /** Period of the tick while any request waits (ms). */
  tickMs: number;
  waiting(): boolean;
  /** The timer fired (holds due are released already); `tick` when the periodic tick is due. */
  fired(tick: boolean): void;
  /** Refuses a queued request whose deadline passed. */
  expire(entry: Entry<R>, held: boolean): void;
}

export class Timers<R extends SchedRequest> {
  /** Queued deadlines, earliest first; equal ones in queue order, so refusals come in the same order however the heap got there. */
  private readonly deadlines = new MinHeap<Entry<R>>((a, b) => a.deadline < b.deadline || (a.deadline === b.deadline && a.order.seq < b.order.seq));
  /** Lanes held until a time, earliest first; an entry is stale once its lane's hold changed. */
  private readonly holds = new MinHeap<Hold<R>>((a, b) => a.until < b.until);
  private timer: Timer | undefined;
  private timerAt = Infinity;
  private tickAt = Infinity;
  private stopped = false;

  constructor(private readonly o: TimersOptions<R>) {}

  /** Watches a queued request's deadline. */
  deadline(entry: Entry<R>): void {
    if (entry.deadline !== Infinity) this.deadlines.push(entry);
  }

  /** Releases a held lane at `until` (unless its hold changed by then). */
  hold(until: number, lane: Lane<Entry<R>>, cls: ClassQueue<Entry<R>>): void {
    this.holds.push({ until, lane, cls });
  }

  /** Refuses every queued request whose deadline has passed, earliest first. */
  expireDue(): void {
    const now = this.o.clock.now();
    for (let top = this.deadlines.peek(); top && top.deadline <= now; top = this.deadlines.peek()) {
      this.deadlines.pop();
      if (top.state !== 'queued') continue;
      const lane = top.cls.lanes.get(top.lane);
      this.o.expire(top, top.heldOnce || (lane?.blocked === 'gate' && top.cls.head(lane) === top));
    }
  }

  /** One timer for the earliest of: a hold's until, a queued deadline, the periodic tick. */
  arm(): void {
    if (this.stopped) return;
    while (this.holds.peek() && !isHeld(this.holds.peek()!)) this.holds.pop();
    while (this.deadlines.peek() && this.deadlines.peek()!.state !== 'queued') this.deadlines.pop();
    this.tickAt = this.o.waiting() ? this.o.clock.now() + this.o.tickMs : Infinity;
    const next = Math.min(this.holds.peek()?.until ?? Infinity, this.deadlines.peek()?.deadline ?? Infinity, this.tickAt);
    if (next === this.timerAt) return;
    this.timer?.cancel();
    this.timer = undefined;
    this.timerAt = next;
    if (next === Infinity) return;
    this.timer = this.o.clock.at(next, () => this.fire());
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.o.clock.now();
    for (let top = this.holds.peek(); top && top.until <= now; top = this.holds.peek()) {
      this.holds.pop();
      if (isHeld(top)) top.cls.unblock(top.lane);
    }
    this.o.fired(now >= this.tickAt);
  }
}

/** Whether a hold entry still describes its lane (not released or held anew since). */
function isHeld(h: { until: number; lane: Lane<LaneEntry> }): boolean {
  return h.lane.blocked === 'gate' && h.lane.holdUntil === h.until;
}
