// Rendezvous (highest-random-weight) hashing over the wasm core
// (assembly/rendezvous.ts): the k workers, by stable u64 routing id, that rank
// highest for a key. Used for stable pool membership (e.g. the Cold Pool).
import { Core, type CoreExports } from './core.js';
import { checkTopK, type RendezvousHasher, type RoutingIds } from './selection-contract.js';

export interface HrwExports {
  hrwReserve(n: number): number;
  hrwOutPtr(): number;
  hrwTopK(n: number, key: bigint, k: number): number;
}

export class Rendezvous implements RendezvousHasher {
  readonly core: Core;
  private readonly ex: HrwExports & CoreExports;

  constructor(options: { core?: Core } = {}) {
    this.core = options.core ?? new Core();
    this.core.claim('hrw');
    this.ex = this.core.kernel<HrwExports>();
  }

  topK(ids: RoutingIds, key: bigint, k: number): number[] {
    checkTopK(ids, key, k);
    const n = ids.length;
    const ptr = this.ex.hrwReserve(n);
    if (n > 0) this.core.u64(ptr, n).set(ids);
    const count = this.ex.hrwTopK(n, key, k);
    return Array.from(this.core.u32(this.ex.hrwOutPtr(), count));
  }

  topKIds(ids: RoutingIds, key: bigint, k: number): bigint[] {
    return this.topK(ids, key, k).map((i) => ids[i]!);
  }
}
