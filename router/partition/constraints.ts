// A decision's constraints as the fused decision takes them: the slots it may
// use (a pin, the caller's allowed workers), the slots it must not (earlier
// failures), and its taint groups' table. The caller's allowed set is turned
// into slots once per set (by identity) while the workers stay the same, and a
// request's taint table once per request while the groups stay the same, so a
// decision costs time in its own lists, never in the fleet.
import { NO_CONSTRAINTS, type DecisionConstraints, type GroupTable } from '../../bindings/decision-contract.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { WorkerSet } from './worker-set.js';
import type { RoutedRequest } from './types.js';

const NOTHING = new Uint32Array(0);

interface Versioned<T> {
  version: number;
  value: T;
}

export class Constraints {
  private readonly allowedSlots = new WeakMap<readonly WorkerKey[], Versioned<Uint32Array>>();
  private readonly tables = new WeakMap<RoutedRequest, Versioned<GroupTable | null>>();

  constructor(private readonly workers: WorkerSet) {}

  /** The request's constraints with this allowed set and these exclusions. */
  of(request: RoutedRequest, allowed: readonly WorkerKey[] | null, exclude: readonly WorkerKey[]): DecisionConstraints {
    const groups = this.tableOf(request);
    if (!allowed && !request.pin && exclude.length === 0 && !groups) return NO_CONSTRAINTS;
    return { slots: this.slotsOf(request.pin, allowed), excluded: exclude.length > 0 ? this.slotList(exclude) : null, groups };
  }

  /** Whether the constraints let the request use this slot (its group included). */
  allows(constraints: DecisionConstraints, slot: number): boolean {
    if (constraints.slots && !constraints.slots.includes(slot)) return false;
    if (constraints.excluded?.includes(slot)) return false;
    return !constraints.groups || constraints.groups.allowed[this.workers.groupOfSlot(slot)] === 1;
  }

  /** The request's taint-group table (null without taints). */
  tableOf(request: RoutedRequest): GroupTable | null {
    const version = this.workers.groups.count;
    let memo = this.tables.get(request);
    if (!memo || memo.version !== version) {
      memo = { version, value: this.workers.groups.tableFor(request.requiredTaints, request.preferredTaints) };
      this.tables.set(request, memo);
    }
    return memo.value;
  }

  /** A pin (within the allowed set) or the allowed set as slots; null when neither restricts. */
  private slotsOf(pin: WorkerKey | null, allowed: readonly WorkerKey[] | null): Uint32Array | null {
    if (pin) {
      const slot = this.workers.slots.slotOf(pin.id, pin.rank);
      if (slot === undefined) return NOTHING;
      if (allowed && !allowed.some((k) => workerLabel(k) === workerLabel(pin))) return NOTHING;
      return Uint32Array.of(slot);
    }
    if (!allowed) return null;
    const version = this.workers.version;
    let memo = this.allowedSlots.get(allowed);
    if (!memo || memo.version !== version) {
      memo = { version, value: this.slotList(allowed) };
      this.allowedSlots.set(allowed, memo);
    }
    return memo.value;
  }

  /** The slots of registered workers among keys. */
  private slotList(keys: readonly WorkerKey[]): Uint32Array {
    const slots: number[] = [];
    for (const k of keys) {
      const slot = this.workers.slots.slotOf(k.id, k.rank);
      if (slot !== undefined) slots.push(slot);
    }
    return Uint32Array.from(slots);
  }
}
