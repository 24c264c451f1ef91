// The groups the core keeps a tree for per fast-path view: workers with the
// same taints (taint-groups.ts) and the same speed class (speeds.ts). Required
// taints allow whole groups and preferred taints weight them; a speed class
// weights its group by its speed against the reference (the ttft cost charges
// a request's own tokens at the class's speed, assembly/cost/ttft.ts), so a
// decision still visits groups, never workers. Ids are numbered here on first
// sight of a (taint group, class) pair; a worker changes group only when its
// class changes, which the speeds' hysteresis keeps rare.
import type { GroupTable } from '../../bindings/decision-contract.js';

interface CoreGroup {
  readonly taint: number;
  readonly speedClass: number;
  members: number;
}

export class CoreGroups {
  private readonly ids = new Map<string, number>();
  private readonly list: CoreGroup[] = [];
  private readonly ofSlot = new Map<number, number>();
  /** Members per speed class. */
  private readonly classMembers = new Map<number, number>();
  private changes = 0;
  private uniformTable: { version: number; value: GroupTable | null } = { version: -1, value: null };

  /** @param multiplier a speed class's cost multiplier (its speed over the reference speed) */
  constructor(private readonly multiplier: (speedClass: number) => number) {}

  /** Bumped whenever a group gains or loses a worker. */
  get version(): number {
    return this.changes;
  }

  /** The core group of a slot (0 for a slot in none). */
  of(slot: number): number {
    return this.ofSlot.get(slot) ?? 0;
  }

  /** The speed class of a slot's group (0 for a slot in none). */
  classOf(slot: number): number {
    const id = this.ofSlot.get(slot);
    return id === undefined ? 0 : this.list[id]!.speedClass;
  }

  /** Puts a slot in the group of its taints and speed class; returns the group id. */
  place(slot: number, taint: number, speedClass: number): number {
    const key = `${taint}:${speedClass}`;
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.list.length;
      this.ids.set(key, id);
      this.list.push({ taint, speedClass, members: 0 });
    }
    const was = this.ofSlot.get(slot);
    if (was === id) return id;
    if (was !== undefined) this.leave(was);
    this.ofSlot.set(slot, id);
    this.list[id]!.members++;
    this.classMembers.set(speedClass, (this.classMembers.get(speedClass) ?? 0) + 1);
    this.changes++;
    return id;
  }

  /** Takes a slot out of its group. */
  drop(slot: number): void {
    const id = this.ofSlot.get(slot);
    if (id === undefined) return;
    this.ofSlot.delete(slot);
    this.leave(id);
    this.changes++;
  }

  /**
   * The decision's group table from a request's taint table (per taint group;
   * null without taints): per core group, its taint group's allowed flag, and
   * the taint multiplier times its class's. Null when the request names no
   * taints and every worker is in one class: then no group needs weighting
   * (one multiplier for all scales every cost alike, and the cheapest stays
   * the cheapest).
   */
  table(taints: GroupTable | null): GroupTable | null {
    if (!taints) {
      const kept = this.uniformTable;
      if (kept.version !== this.changes) {
        kept.version = this.changes;
        kept.value = this.classMembers.size <= 1 ? null : this.expand(null);
      }
      return kept.value;
    }
    return this.expand(taints);
  }

  private expand(taints: GroupTable | null): GroupTable {
    const n = this.list.length;
    const allowed = new Uint8Array(n);
    const multipliers = new Float64Array(n);
    for (let id = 0; id < n; id++) {
      const g = this.list[id]!;
      allowed[id] = taints ? (taints.allowed[g.taint] ?? 0) : 1;
      multipliers[id] = (taints ? (taints.multipliers[g.taint] ?? 1) : 1) * this.multiplier(g.speedClass);
    }
    return { allowed, multipliers };
  }

  private leave(id: number): void {
    const g = this.list[id]!;
    g.members--;
    const left = this.classMembers.get(g.speedClass)! - 1;
    if (left === 0) this.classMembers.delete(g.speedClass);
    else this.classMembers.set(g.speedClass, left);
  }
}
