// Cold Pool membership: the workers that take Cold work, chosen by rendezvous
// (highest-random-weight) hashing of each worker's stable routing id, so the
// pool does not depend on the order workers registered in and moves as little
// as possible when workers come and go.
import { xxh3 } from '../../../bindings/reference/xxh3.js';
import type { RendezvousHasher } from '../../../bindings/selection-contract.js';
import { workerLabel, type WorkerKey } from '../../../bindings/workers.js';
import type { WorkerCapacity } from '../../scheduler/contracts.js';

const utf8 = new TextEncoder();

/** The key every worker is scored under: fixed, so every router replica picks the same pool. */
export const POOL_KEY = xxh3(utf8.encode('kvrouter/cold-pool'));

/** A worker rank's stable routing id: XXH3-64 of its label ("id", or "id#rank" for ranks past 0). */
export function routingId(worker: WorkerKey): bigint {
  return xxh3(utf8.encode(workerLabel(worker)));
}

/** P2: the configured size capped at a third of the workers (at least one); none below two workers or when configured 0. */
export function poolSize(workers: number, configured: number): number {
  if (configured === 0 || workers < 2) return 0;
  return Math.min(configured, Math.max(1, Math.floor(workers / 3)));
}

export interface Pool {
  /** The live workers it was computed from. */
  readonly workers: readonly WorkerCapacity[];
  /** Members, best-ranked first. */
  readonly members: readonly WorkerKey[];
  readonly labels: ReadonlySet<string>;
}

export class PoolMembership {
  private current: Pool | undefined;
  private ids = new Map<string, bigint>();

  constructor(
    private readonly configured: number,
    private readonly hasher: RendezvousHasher,
  ) {}

  /** The pool over these workers; recomputed only when the array changes (placements keep it until the worker set changes). */
  of(workers: readonly WorkerCapacity[]): Pool {
    if (this.current?.workers === workers) return this.current;
    const ids = new Map<string, bigint>();
    const list = new BigUint64Array(workers.length);
    workers.forEach((w, i) => {
      const label = workerLabel(w.worker);
      const id = this.ids.get(label) ?? routingId(w.worker);
      ids.set(label, id);
      list[i] = id;
    });
    // Only the current workers' ids are kept, so churn does not grow the memo.
    this.ids = ids;
    const k = poolSize(workers.length, this.configured);
    const members = k === 0 ? [] : this.hasher.topK(list, POOL_KEY, k).map((i) => workers[i]!.worker);
    this.current = { workers, members, labels: new Set(members.map(workerLabel)) };
    return this.current;
  }
}
