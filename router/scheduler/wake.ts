// Wake bookkeeping: where a blocked lane waits, and which lanes a change
// releases. The targeted rule keeps, for each blocked head, what it waits for:
//
// - capacity, in a wait group per class and capacity scope (the allowed set,
//   pin and placement constraint its capacity check depends on). Heads of one
//   group pass or fail that check together, so one failure closes the group.
//   A change opens only the groups it may have freed: a class's unrestricted
//   group when the fleet's headroom for the class is above 0, and a restricted
//   group when load fell on one of its workers and that worker is no longer
//   busy for the class (any change, for a group only the placement's
//   constraint or exclusions narrow). A change that may have touched any
//   worker opens a restricted group when one of its workers is not busy for
//   the class. Both read the ledger's running state through the placement
//   (headroom, busyFor), never a selection. An open group stands in the
//   class's ready heap at its first lane and hands its lanes over in lane
//   order, one at a time, until one fails again: a change that frees room for
//   k heads examines about k + 1 of them, however many wait.
// - the gate, until a time (the timers release it) or until the gate reports a
//   change, when every held head is asked again; holds without a time are also
//   asked again at the periodic tick.
// - admission: it refused a head the capacity check let through (a policy's
//   own filters can); the head is examined again at any capacity change.
// - capacity, for a class whose thresholds the placement cannot summarize
//   (their verdict depends on the request too, as a TTFT target's prediction
//   does): heads of one scope may then pass or fail apart, so each is
//   examined again at any capacity change.
//
// Every head the rule leaves waiting would fail if it were examined now, so
// dispatches come in exactly the order rechecking every lane would give
// (recheck-all.ts is that rule, for tests and benchmarks).
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { LaneHeapApi } from '../../bindings/lane-heap.js';
import type { Placement, SchedRequest } from './contracts.js';
import type { ClassQueue, ItemIds, Lane, LaneEntry, ReadySource, Waiting } from './lanes.js';

export interface WakeRule<E extends LaneEntry> {
  /** The lane's head found every worker of its scope busy for its class. */
  waitCapacity(cls: ClassQueue<E>, lane: Lane<E>, scope: CapacityScope): void;
  /** The gate held the lane's head; `until` is Infinity for a hold without a time. */
  waitGate(cls: ClassQueue<E>, lane: Lane<E>, until: number): void;
  /** Admission refused a head the capacity check let through. */
  waitRefused(cls: ClassQueue<E>, lane: Lane<E>): void;
  /** Load fell on `worker`; null when any worker's load, availability or a class's thresholds may have changed. */
  capacityFreed(worker: WorkerKey | null): void;
  /** The gate reported a change (or the worker set changed): held heads may answer otherwise. */
  gateChanged(): void;
  /** The periodic tick, a safety net for changes nobody reported. */
  tick(): void;
}

/** What a head's capacity check depends on besides its class: heads with equal keys get equal verdicts. */
export interface CapacityScope {
  /** '' for a head nothing narrows: the fleet's headroom decides. */
  readonly key: string;
  /** The workers it may use, or null when any worker's change may matter. */
  readonly workers: readonly WorkerKey[] | null;
}

export const FLEET: CapacityScope = Object.freeze({ key: '', workers: null });

export function capacityScope(request: SchedRequest, allowed: readonly WorkerKey[] | null, exclude: readonly WorkerKey[], constraint: string): CapacityScope {
  if (!request.pin && !allowed && exclude.length === 0 && constraint === '') return FLEET;
  const pin = request.pin ? workerLabel(request.pin) : '';
  const key = `${pin}|${allowed ? allowed.map(workerLabel).join(',') : '*'}|${exclude.map(workerLabel).join(',')}|${constraint}`;
  return { key, workers: request.pin ? [request.pin] : allowed };
}

/** Blocked lanes of one class, held in no particular order. */
class LaneSet<E extends LaneEntry> implements Waiting<E> {
  readonly lanes = new Set<Lane<E>>();
  constructor(private readonly cls: ClassQueue<E>) {}
  add(lane: Lane<E>): void {
    this.lanes.add(lane);
  }
  leave(lane: Lane<E>): void {
    this.lanes.delete(lane);
  }
  releaseAll(): void {
    for (const lane of [...this.lanes]) this.cls.unblock(lane);
  }
}

/** The lanes of one class waiting for capacity in one scope, in lane order. */
class WaitGroup<E extends LaneEntry> implements Waiting<E>, ReadySource {
  readonly item: number;
  private readonly heap: number;
  private size = 0;
  private open = false;

  constructor(
    private readonly owner: TargetedWake<E>,
    readonly cls: ClassQueue<E>,
    readonly scope: CapacityScope,
  ) {
    this.item = owner.ids.take();
    this.heap = owner.heap.createHeap();
  }

  add(lane: Lane<E>): void {
    this.owner.heap.push(this.heap, lane.item, this.cls.head(lane).order);
    this.size++;
  }

  leave(lane: Lane<E>): void {
    this.owner.heap.remove(lane.item);
    if (--this.size === 0) this.owner.drop(this);
    else if (this.open) this.stand();
  }

  promote(): void {
    this.cls.unblock(this.cls.laneOf(this.owner.heap.peek(this.heap)));
  }

  /** Its heads may pass now: stand in the ready heap at the first lane. */
  openUp(): void {
    if (this.open) return;
    this.open = true;
    this.stand();
  }

  /** Its heads fail now: out of the ready heap until a change opens it. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.cls.withdraw(this);
  }

  dispose(): void {
    this.close();
    this.owner.heap.destroyHeap(this.heap);
    this.owner.ids.give(this.item);
  }

  private stand(): void {
    this.cls.offer(this, this.cls.head(this.cls.laneOf(this.owner.heap.peek(this.heap))).order);
  }
}

/** One class's waiting lanes. */
interface ClassWaits<E extends LaneEntry> {
  readonly groups: Map<string, WaitGroup<E>>;
  readonly held: LaneSet<E>;
  readonly heldUntimed: LaneSet<E>;
  readonly refused: LaneSet<E>;
  /** Heads whose verdict depends on the request itself (the placement cannot summarize the class's thresholds). */
  readonly perHead: LaneSet<E>;
}

export class TargetedWake<E extends LaneEntry> implements WakeRule<E> {
  private readonly waits = new Map<ClassQueue<E>, ClassWaits<E>>();
  /** Restricted groups by the label of each worker they may use. */
  private readonly byWorker = new Map<string, Set<WaitGroup<E>>>();
  /** Restricted groups whose workers cannot be told (narrowed only by a placement constraint or exclusions). */
  private readonly anyWorker = new Set<WaitGroup<E>>();

  constructor(
    readonly heap: LaneHeapApi,
    readonly ids: ItemIds,
    classes: readonly ClassQueue<E>[],
    /** What the ledger says of the fleet's and each worker's room for a class. */
    private readonly room: Pick<Placement, 'summarizes' | 'headroom' | 'busyFor'>,
  ) {
    for (const cls of classes) {
      this.waits.set(cls, { groups: new Map(), held: new LaneSet(cls), heldUntimed: new LaneSet(cls), refused: new LaneSet(cls), perHead: new LaneSet(cls) });
    }
  }

  waitCapacity(cls: ClassQueue<E>, lane: Lane<E>, scope: CapacityScope): void {
    if (!this.summarized(cls)) {
      const set = this.waits.get(cls)!.perHead;
      cls.block(lane, 'capacity', Infinity, set);
      set.add(lane);
      return;
    }
    const group = this.groupFor(cls, scope);
    cls.block(lane, 'capacity', Infinity, group);
    group.add(lane);
    group.close();
  }

  waitGate(cls: ClassQueue<E>, lane: Lane<E>, until: number): void {
    const waits = this.waits.get(cls)!;
    const set = until === Infinity ? waits.heldUntimed : waits.held;
    cls.block(lane, 'gate', until, set);
    set.add(lane);
  }

  waitRefused(cls: ClassQueue<E>, lane: Lane<E>): void {
    const set = this.waits.get(cls)!.refused;
    cls.block(lane, 'refused', Infinity, set);
    set.add(lane);
  }

  capacityFreed(worker: WorkerKey | null): void {
    for (const [cls, waits] of this.waits) {
      waits.refused.releaseAll();
      waits.perHead.releaseAll();
      // Thresholds changed to ones the placement cannot summarize: every group may hold a head that passes.
      if (!this.summarized(cls)) {
        for (const group of waits.groups.values()) group.openUp();
        continue;
      }
      const fleet = waits.groups.get(FLEET.key);
      const busy = cls.policy.busy;
      if (fleet && (busy === null || this.room.headroom(busy) > 0)) fleet.openUp();
      if (worker === null) for (const group of waits.groups.values()) if (group !== fleet && this.mayPass(group)) group.openUp();
    }
    if (worker === null) return;
    for (const group of this.anyWorker) group.openUp();
    const groups = this.byWorker.get(workerLabel(worker));
    // A closed group found all its workers busy; only this one changed.
    if (groups) for (const group of groups) if (!this.busyFor(group, worker)) group.openUp();
  }

  gateChanged(): void {
    for (const waits of this.waits.values()) {
      waits.held.releaseAll();
      waits.heldUntimed.releaseAll();
    }
  }

  tick(): void {
    for (const waits of this.waits.values()) waits.heldUntimed.releaseAll();
    this.capacityFreed(null);
  }

  private summarized(cls: ClassQueue<E>): boolean {
    const busy = cls.policy.busy;
    return busy === null || this.room.summarizes(busy);
  }

  /** Whether some worker of the group is not busy for its class: only workers that serve and are busy keep it closed. */
  private mayPass(group: WaitGroup<E>): boolean {
    const workers = group.scope.workers;
    return workers === null || workers.some((worker) => !this.busyFor(group, worker));
  }

  private busyFor(group: WaitGroup<E>, worker: WorkerKey): boolean {
    const busy = group.cls.policy.busy;
    return busy !== null && this.room.busyFor(worker, busy);
  }

  /** Forgets an emptied group. */
  drop(group: WaitGroup<E>): void {
    this.waits.get(group.cls)!.groups.delete(group.scope.key);
    if (group.scope.key !== FLEET.key) {
      if (group.scope.workers === null) this.anyWorker.delete(group);
      else {
        for (const worker of group.scope.workers) {
          const label = workerLabel(worker);
          const set = this.byWorker.get(label);
          set?.delete(group);
          if (set?.size === 0) this.byWorker.delete(label);
        }
      }
    }
    group.dispose();
  }

  private groupFor(cls: ClassQueue<E>, scope: CapacityScope): WaitGroup<E> {
    const groups = this.waits.get(cls)!.groups;
    let group = groups.get(scope.key);
    if (group) return group;
    group = new WaitGroup(this, cls, scope);
    groups.set(scope.key, group);
    if (scope.key !== FLEET.key) {
      if (scope.workers === null) this.anyWorker.add(group);
      else {
        for (const worker of scope.workers) {
          const label = workerLabel(worker);
          let set = this.byWorker.get(label);
          if (!set) this.byWorker.set(label, (set = new Set()));
          set.add(group);
        }
      }
    }
    return group;
  }
}
