// The reuse the fleet's cache room allows: one LRU cache holding as many
// blocks as every worker's cache together, serving the whole workload in
// order. The ideal (metrics.ts idealPrefixHits) has no room limit; this one
// shows how much of the gap between a policy and the ideal is room, not
// placement: no placement reuses a block its worker has evicted, and workers
// that each keep a copy of one prefix hold fewer distinct blocks between
// them. It is a reference, not a bound: the engines evict per worker, and a
// placement that keeps each prefix's requests together can do slightly
// better than one LRU over everything.
import type { HashBlocks } from '../mocker/block-hash.js';
import { traceBlockHashes } from './trace-prefixes.js';
import type { Workload } from './workload.js';

/**
 * Each request's reused tokens under one LRU cache of `capacityBlocks`
 * blocks of `blockSize`: the leading run of its full blocks the cache holds
 * (capped so one token is computed, as the engine caps it); then every full
 * block of the prompt is the most recently used, and the least recently used
 * blocks beyond the capacity are evicted.
 */
export function fleetLruHits(workload: Workload, blockSize: number, capacityBlocks: number, hashBlocks: HashBlocks): Float64Array {
  if (!Number.isInteger(capacityBlocks) || capacityBlocks < 1) throw new RangeError(`capacityBlocks must be an integer >= 1, got ${capacityBlocks}`);
  // A Map iterates in insertion order: deleting and setting a block makes it the most recent.
  const cache = new Map<bigint, true>();
  const reused = new Float64Array(workload.requests.length);
  workload.requests.forEach((request, r) => {
    const length = request.inputLength;
    const hashes = request.trace ? traceBlockHashes(request.trace, length, blockSize) : hashBlocks(promptOf(request, length), blockSize);
    const limit = Math.min(Math.floor((length - 1) / blockSize), hashes.length);
    let hits = 0;
    while (hits < limit && cache.has(hashes[hits]!)) hits++;
    for (const hash of hashes) {
      cache.delete(hash);
      cache.set(hash, true);
    }
    for (const oldest of cache.keys()) {
      if (cache.size <= capacityBlocks) break;
      cache.delete(oldest);
    }
    reused[r] = hits * blockSize;
  });
  return reused;
}

function promptOf(request: Workload['requests'][number], length: number): Uint32Array {
  const tokens = new Uint32Array(length);
  request.writeTokens(tokens);
  return tokens;
}
