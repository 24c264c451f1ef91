// The engine's waiting line: new requests join at the back, preempted ones
// go back to the front (they were admitted before anything still waiting).
// Aborted requests are dropped lazily when they reach the front.
import type { Sequence } from './sequence.js';

export class WaitingQueue {
  /** Requeued (preempted) requests; the last element is the front of the line. */
  private readonly front: Sequence[] = [];
  /** From `head` on, the line; before it, slots already let go of (undefined) until the next compaction. */
  private back: (Sequence | undefined)[] = [];
  private head = 0;
  private live = 0;

  get size(): number {
    return this.live;
  }

  push(seq: Sequence): void {
    this.back.push(seq);
    this.live++;
  }

  pushFront(seq: Sequence): void {
    this.front.push(seq);
    this.live++;
  }

  /** Marks a queued request as gone; it is skipped when it reaches the front. */
  forget(): void {
    this.live--;
  }

  peek(): Sequence | undefined {
    this.dropFinished();
    return this.front.length > 0 ? this.front[this.front.length - 1] : this.back[this.head];
  }

  shift(): Sequence | undefined {
    const seq = this.peek();
    if (!seq) return undefined;
    if (this.front.length > 0) this.front.pop();
    else this.advanceHead();
    this.live--;
    return seq;
  }

  /** Every live queued request, front first. */
  *[Symbol.iterator](): IterableIterator<Sequence> {
    for (let i = this.front.length - 1; i >= 0; i--) if (this.front[i]!.state === 'waiting') yield this.front[i]!;
    for (let i = this.head; i < this.back.length; i++) if (this.back[i]!.state === 'waiting') yield this.back[i]!;
  }

  private dropFinished(): void {
    while (this.front.length > 0 && this.front[this.front.length - 1]!.state !== 'waiting') this.front.pop();
    while (this.head < this.back.length && this.back[this.head]!.state !== 'waiting') this.advanceHead();
  }

  private advanceHead(): void {
    // Let go of the request now: the slot is only reclaimed when the array is compacted.
    this.back[this.head] = undefined;
    this.head++;
    // Compact now and then so a long replay does not keep every request alive.
    if (this.head > 1024 && this.head * 2 > this.back.length) {
      this.back = this.back.slice(this.head);
      this.head = 0;
    }
  }
}
