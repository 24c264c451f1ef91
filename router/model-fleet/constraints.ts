// A decision's constraints as the fused decision takes them: the slots it may
// use (a pin, the caller's allowed workers), the slots it must not (earlier
// failures), and its taint groups' table. The caller's allowed set is turned
// into slots once per set (by identity) while the workers stay the same, and a
// request's taint table once per request while the groups stay the same (a
// request's decisions come one after another: cached tokens, capacity,
// admission), so a decision costs time in its own lists, never in the fleet.
// Group tables index the core's groups (taints and speed class).
import { NO_CONSTRAINTS, type DecisionConstraints, type GroupTable } from '../../bindings/decision-contract.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { WorkerSet } from './worker-set.js';
import type { RoutedRequest } from './types.js';

const NOTHING = new Uint32Array(0);

/** Allowed sets whose slots are kept: the sets of the last few decisions (a class's pool, a request's own). */
const ALLOWED_KEPT = 8;

interface Kept<K, V> {
  key: K;
  version: number;
  value: V;
}

export class Constraints {
  private readonly allowedSlots: Kept<readonly WorkerKey[], Uint32Array>[] = [];
  private table: Kept<RoutedRequest | null, GroupTable | null> = { key: null, version: -1, value: null };

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

  /**
   * The request's group table over the core's groups (core-groups.ts): its
   * taints' flags and multipliers with the speed classes' multipliers; null
   * without taints while every worker is in one speed class.
   */
  tableOf(request: RoutedRequest): GroupTable | null {
    const core = this.workers.coreGroups;
    if (request.requiredTaints.length === 0 && request.preferredTaints.length === 0) return core.table(null);
    const version = core.version;
    const kept = this.table;
    if (kept.key !== request || kept.version !== version) {
      kept.key = request;
      kept.version = version;
      kept.value = core.table(this.workers.groups.tableFor(request.requiredTaints, request.preferredTaints));
    }
    return kept.value;
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
    const kept = this.allowedSlots;
    for (let i = 0; i < kept.length; i++) {
      const k = kept[i]!;
      if (k.key !== allowed) continue;
      if (k.version !== version) {
        k.version = version;
        k.value = this.slotList(allowed);
      }
      // Most recently used first.
      if (i > 0) kept.unshift(...kept.splice(i, 1));
      return k.value;
    }
    const slots = this.slotList(allowed);
    kept.unshift({ key: allowed, version, value: slots });
    if (kept.length > ALLOWED_KEPT) kept.pop();
    return slots;
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
