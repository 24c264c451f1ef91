// The wake rule that rechecks every blocked lane at every change: the
// baseline the targeted rule (wake.ts) must dispatch exactly like, kept for
// the differential tests and the overload benchmark.
import type { WorkerKey } from '../../bindings/workers.js';
import type { ClassQueue, Lane, LaneEntry, Waiting } from './lanes.js';
import type { CapacityScope, WakeRule } from './wake.js';

export class RecheckEverything<E extends LaneEntry> implements WakeRule<E>, Waiting<E> {
  private readonly blocked = new Map<Lane<E>, ClassQueue<E>>();

  waitCapacity(cls: ClassQueue<E>, lane: Lane<E>, _scope: CapacityScope): void {
    this.park(cls, lane, 'capacity', Infinity);
  }
  waitGate(cls: ClassQueue<E>, lane: Lane<E>, until: number): void {
    this.park(cls, lane, 'gate', until);
  }
  waitRefused(cls: ClassQueue<E>, lane: Lane<E>): void {
    this.park(cls, lane, 'refused', Infinity);
  }
  capacityFreed(_worker: WorkerKey | null): void {
    this.releaseAll();
  }
  gateChanged(): void {
    this.releaseAll();
  }
  tick(): void {
    this.releaseAll();
  }
  leave(lane: Lane<E>): void {
    this.blocked.delete(lane);
  }

  private park(cls: ClassQueue<E>, lane: Lane<E>, reason: 'gate' | 'capacity' | 'refused', until: number): void {
    cls.block(lane, reason, until, this);
    this.blocked.set(lane, cls);
  }

  private releaseAll(): void {
    for (const [lane, cls] of [...this.blocked]) cls.unblock(lane);
  }
}
