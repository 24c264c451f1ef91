// The workers of a model fleet: their specs and ranks (slots), whether they take
// new requests, their taint groups, and every change carried into the
// kernels. What requests ask of it (live ranks, capacities, slots) is kept up
// to date as workers change, so no request walks the fleet.
import type { DecisionKernel } from '../../bindings/decision-contract.js';
import type { LoadLedger } from '../../bindings/selection-contract.js';
import { WorkerSlots, type WorkerKey } from '../../bindings/workers.js';
import type { WorkerCapacity } from '../scheduler/contracts.js';
import { CoreGroups } from './core-groups.js';
import { TaintGroups } from './taint-groups.js';
import { emptyCounts, type EventCounts, type WorkerSpec } from './types.js';

export interface WorkerMeta {
  spec: WorkerSpec;
  readonly slots: readonly number[];
  /** Its taint group. */
  group: number;
  draining: boolean;
  /** Out of selection after failing (outlier ejection); kept apart from the operator's draining. */
  ejected: boolean;
  readonly events: EventCounts;
}

/** Whether a worker takes new requests. */
function serving(meta: WorkerMeta): boolean {
  return !meta.draining && !meta.ejected;
}

export class WorkerSet {
  readonly slots = new WorkerSlots();
  readonly groups = new TaintGroups();
  /** The core's groups: taint group and speed class (core-groups.ts). */
  readonly coreGroups: CoreGroups;
  private readonly meta = new Map<string, WorkerMeta>();
  /** Slots of workers without KV events (approximate mode). */
  private readonly approximate = new Set<number>();
  private live = 0;
  private changes = 0;
  /** capacities() until the worker set changes; undefined once it has. */
  private capacityList: readonly WorkerCapacity[] | undefined;

  constructor(
    readonly model: string,
    private readonly blockSize: number,
    speedMultiplier: (speedClass: number) => number,
  ) {
    this.coreGroups = new CoreGroups(speedMultiplier);
  }

  /** Bumped by every change to the workers, their availability or their groups. */
  get version(): number {
    return this.changes;
  }

  add(spec: WorkerSpec, ledger: LoadLedger, decider: DecisionKernel): WorkerKey[] {
    if (this.meta.has(spec.id)) throw new RangeError(`worker "${spec.id}" is already registered for model ${this.model}`);
    const ranks = spec.dataParallelSize ?? 1;
    if (!Number.isInteger(ranks) || ranks < 1) throw new RangeError(`worker "${spec.id}": dataParallelSize must be a positive integer`);
    const group = this.groups.groupOf(spec.taints);
    const slots: number[] = [];
    for (let rank = 0; rank < ranks; rank++) {
      const slot = this.slots.ensure(spec.id, rank);
      ledger.setWorker(slot, { totalBlocks: spec.totalBlocks, maxBatchedTokens: spec.maxBatchedTokens });
      ledger.setGroup(slot, this.coreGroups.place(slot, group, 0));
      const routed = spec.kvEvents === false;
      decider.setRouted(slot, routed);
      if (routed) this.approximate.add(slot);
      slots.push(slot);
    }
    this.meta.set(spec.id, { spec, slots, group, draining: false, ejected: false, events: emptyCounts() });
    this.live += ranks;
    this.changed();
    return slots.map((s) => this.slots.keyOf(s));
  }

  /** Forgets a worker (the caller removed it from the index); returns the ids of its requests still booked. */
  remove(id: string, ledger: LoadLedger): string[] {
    const meta = this.meta.get(id);
    if (!meta) return [];
    const dropped: string[] = [];
    for (const slot of meta.slots) {
      dropped.push(...ledger.removeWorker(slot));
      this.coreGroups.drop(slot);
      this.approximate.delete(slot);
      this.slots.release(id, this.slots.keyOf(slot).rank);
    }
    if (serving(meta)) this.live -= meta.slots.length;
    this.meta.delete(id);
    this.changed();
    return dropped;
  }

  setDraining(id: string, draining: boolean, ledger: LoadLedger): void {
    this.setServing(id, ledger, (meta) => (meta.draining = draining));
  }

  setEjected(id: string, ejected: boolean, ledger: LoadLedger): void {
    this.setServing(id, ledger, (meta) => (meta.ejected = ejected));
  }

  /** Applies a change to draining or ejected, and carries the worker's availability into the ledger. */
  private setServing(id: string, ledger: LoadLedger, change: (meta: WorkerMeta) => void): void {
    const meta = this.require(id);
    const before = serving(meta);
    change(meta);
    const after = serving(meta);
    if (before !== after) this.live += after ? meta.slots.length : -meta.slots.length;
    for (const slot of meta.slots) ledger.setAvailable(slot, after);
    this.changed();
  }

  /** Gives a worker another set of taints (what it serves changed): its ranks move to that taint group, keeping their speed class. */
  setTaints(id: string, taints: readonly string[], ledger: LoadLedger): void {
    const meta = this.require(id);
    const group = this.groups.groupOf(taints);
    meta.spec = { ...meta.spec, taints: [...taints] };
    if (group === meta.group) return;
    meta.group = group;
    for (const slot of meta.slots) ledger.setGroup(slot, this.coreGroups.place(slot, group, this.coreGroups.classOf(slot)));
    this.changed();
  }

  has(id: string): boolean {
    return this.meta.has(id);
  }

  /** Whether a registered worker takes new requests. */
  serves(id: string): boolean {
    const meta = this.meta.get(id);
    return meta !== undefined && serving(meta);
  }

  get(id: string): WorkerMeta | undefined {
    return this.meta.get(id);
  }

  require(id: string): WorkerMeta {
    const meta = this.meta.get(id);
    if (!meta) throw new RangeError(`worker "${id}" is not registered for model ${this.model}`);
    return meta;
  }

  ids(): string[] {
    return [...this.meta.keys()];
  }

  /** Worker ranks that take new requests. */
  get liveRanks(): number {
    return this.live;
  }

  isApproximate(slot: number): boolean {
    return this.approximate.has(slot);
  }

  /** The core group of a slot (its taints and speed class; 0 for an unknown slot). */
  groupOfSlot(slot: number): number {
    return this.coreGroups.of(slot);
  }

  /** Moves a slot to the core group of its taints and this speed class. */
  setSpeedClass(slot: number, speedClass: number, ledger: LoadLedger): void {
    const key = this.slots.has(slot) ? this.slots.keyOf(slot) : undefined;
    const meta = key && this.meta.get(key.id);
    if (!meta || this.coreGroups.classOf(slot) === speedClass) return;
    ledger.setGroup(slot, this.coreGroups.place(slot, meta.group, speedClass));
  }

  /** Live worker ranks and their KV capacity in tokens; the same array until the worker set changes. */
  capacities(): readonly WorkerCapacity[] {
    if (!this.capacityList) {
      const list: WorkerCapacity[] = [];
      for (const meta of this.meta.values()) {
        if (!serving(meta)) continue;
        for (const slot of meta.slots) list.push(Object.freeze({ worker: this.slots.keyOf(slot), capacityTokens: meta.spec.totalBlocks * this.blockSize }));
      }
      this.capacityList = Object.freeze(list);
    }
    return this.capacityList;
  }

  private changed(): void {
    this.changes++;
    this.capacityList = undefined;
  }
}
