// Maps external worker identities to the dense u32 slots the core indexes by.
//
// A worker is a (worker id, data-parallel rank) pair. Kernels that share a Core
// must share one WorkerSlots so a slot means the same worker everywhere. Freed
// slots are reused, lowest first, so per-slot columns stay as short as the fleet.

export interface WorkerKey {
  readonly id: string;
  readonly rank: number;
}

export function workerLabel(key: WorkerKey): string {
  return key.rank === 0 ? key.id : `${key.id}#${key.rank}`;
}

export class WorkerSlots {
  private readonly bySlot: (WorkerKey | undefined)[] = [];
  private readonly byId = new Map<string, Map<number, number>>();
  private readonly free: number[] = [];

  /** One past the highest slot ever handed out: the length per-slot columns need. */
  get capacity(): number {
    return this.bySlot.length;
  }

  get size(): number {
    return this.bySlot.length - this.free.length;
  }

  slotOf(id: string, rank = 0): number | undefined {
    return this.byId.get(id)?.get(rank);
  }

  /** The slot of (id, rank), assigning one if the worker is new. */
  ensure(id: string, rank = 0): number {
    validateKey(id, rank);
    let ranks = this.byId.get(id);
    const existing = ranks?.get(rank);
    if (existing !== undefined) return existing;
    if (!ranks) {
      ranks = new Map();
      this.byId.set(id, ranks);
    }
    let slot: number;
    if (this.free.length > 0) {
      // Lowest free slot first keeps the live slots dense.
      this.free.sort((a, b) => b - a);
      slot = this.free.pop()!;
    } else {
      slot = this.bySlot.length;
      this.bySlot.push(undefined);
    }
    const key = { id, rank };
    this.bySlot[slot] = key;
    ranks.set(rank, slot);
    return slot;
  }

  keyOf(slot: number): WorkerKey {
    const key = this.bySlot[slot];
    if (!key) throw new RangeError(`no worker holds slot ${slot}`);
    return key;
  }

  has(slot: number): boolean {
    return this.bySlot[slot] !== undefined;
  }

  /** Every slot of a worker id (all its ranks). */
  slotsOf(id: string): number[] {
    return [...(this.byId.get(id)?.values() ?? [])];
  }

  /** Forgets a worker rank; the caller has already removed its state from the kernels. */
  release(id: string, rank = 0): number | undefined {
    const ranks = this.byId.get(id);
    const slot = ranks?.get(rank);
    if (slot === undefined) return undefined;
    ranks!.delete(rank);
    if (ranks!.size === 0) this.byId.delete(id);
    this.bySlot[slot] = undefined;
    this.free.push(slot);
    return slot;
  }

  *entries(): IterableIterator<[number, WorkerKey]> {
    for (let slot = 0; slot < this.bySlot.length; slot++) {
      const key = this.bySlot[slot];
      if (key) yield [slot, key];
    }
  }
}

function validateKey(id: string, rank: number): void {
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('worker id must be a non-empty string');
  if (!Number.isInteger(rank) || rank < 0 || rank > 0xffff) {
    throw new RangeError(`data-parallel rank must be an integer in [0, 65535], got ${rank}`);
  }
}
