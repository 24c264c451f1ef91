// Pure-TS twin of Rendezvous: score every id with BigInt arithmetic and sort.
import { checkTopK, type RendezvousHasher, type RoutingIds } from '../selection-contract.js';

const MASK = (1n << 64n) - 1n;

/** The SplitMix64 finalizer. */
function mix(z: bigint): bigint {
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return z ^ (z >> 31n);
}

/** What a worker id scores for a key; higher ranks first. */
export function rendezvousScore(id: bigint, key: bigint): bigint {
  return mix(id ^ mix((key + 0x9e3779b97f4a7c15n) & MASK));
}

export class ReferenceRendezvous implements RendezvousHasher {
  topK(ids: RoutingIds, key: bigint, k: number): number[] {
    checkTopK(ids, key, k);
    const ranked = [...ids].map((id, index) => ({ id, index, score: rendezvousScore(id, key) }));
    ranked.sort((a, b) => (a.score !== b.score ? (a.score > b.score ? -1 : 1) : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return ranked.slice(0, k).map((r) => r.index);
  }

  topKIds(ids: RoutingIds, key: bigint, k: number): bigint[] {
    return this.topK(ids, key, k).map((i) => ids[i]!);
  }
}
