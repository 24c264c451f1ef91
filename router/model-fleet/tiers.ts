// The storage tiers of a worker's KV cache. Engines that offload (vLLM's
// offloading connector, SGLang's HiCache) publish each tier's blocks with a
// `medium`; a block in host memory or on disk saves its prefill only after a
// copy back to the device, so it is worth less than one in GPU memory. Each
// tier is a prefix index of its own (only the device's exists until an event
// names another), and a prompt's match on a worker is credited block by
// block at the best weight among the tiers holding that block.
import type { HostMatcher } from '../../bindings/decision-contract.js';
import type { MatchResult, PrefixIndexApi } from '../../bindings/prefix-index-api.js';

export type Tier = 'gpu' | 'cpu' | 'disk';

export const TIERS: readonly Tier[] = ['gpu', 'cpu', 'disk'];

/** How much a cached block in each tier is worth, as a share of a GPU-resident one. */
export type TierWeights = Readonly<Record<Tier, number>>;

export const DEFAULT_TIER_WEIGHTS: TierWeights = Object.freeze({ gpu: 1, cpu: 0.75, disk: 0.25 });

/** Blocks of a worker's cached prefix in each tier. */
export type TierDepths = Record<Tier, number>;

/** Checks weights given in part: each in [0, 1]; the missing ones take the defaults. */
export function tierWeights(given: Partial<Record<Tier, number>> = {}): TierWeights {
  const out = { ...DEFAULT_TIER_WEIGHTS, ...given };
  for (const tier of TIERS) {
    const w = out[tier];
    if (typeof w !== 'number' || !Number.isFinite(w) || w < 0 || w > 1) throw new RangeError(`tier weight ${tier} must be a number in [0, 1], got ${String(w)}`);
  }
  return Object.freeze(out);
}

// The medium names engines publish, by tier. vLLM: GPU, CPU, STORAGE;
// SGLang's HiCache: device, host and storage levels (GPU, CPU..., and its L3
// backends). Anything else is not indexed (counted as another medium).
const MEDIUMS: ReadonlyMap<string, Tier> = new Map([
  ['GPU', 'gpu'],
  ['HBM', 'gpu'],
  ['DEVICE', 'gpu'],
  ['CPU', 'cpu'],
  ['CPU_PINNED', 'cpu'],
  ['CPU_TIER1', 'cpu'],
  ['HOST', 'cpu'],
  ['DRAM', 'cpu'],
  ['L2', 'cpu'],
  ['STORAGE', 'disk'],
  ['DISK', 'disk'],
  ['SSD', 'disk'],
  ['NVME', 'disk'],
  ['FS', 'disk'],
  ['FILE', 'disk'],
  ['OBJ', 'disk'],
  ['L3', 'disk'],
  ['CPU_TIER2', 'disk'],
]);

/** The tier of an event's medium: the device cache when the engine names none; null for a medium the router does not know. */
export function tierOf(medium: string | null): Tier | null {
  if (medium === null) return 'gpu';
  return MEDIUMS.get(medium.toUpperCase()) ?? null;
}

/**
 * The blocks a prefix held at these depths is credited: each block at the
 * best weight among the tiers that hold it (a tier's prefix covers blocks
 * 0..depth-1).
 */
export function creditedBlocks(depths: TierDepths, weights: TierWeights): number {
  let credit = 0;
  let from = 0;
  // Walk the depths upwards; a segment is held by every tier at least that deep.
  const order = TIERS.filter((t) => depths[t] > 0).sort((a, b) => depths[a] - depths[b]);
  for (let i = 0; i < order.length; i++) {
    const to = depths[order[i]!];
    if (to <= from) continue;
    let best = 0;
    for (let j = i; j < order.length; j++) best = Math.max(best, weights[order[j]!]);
    credit += (to - from) * best;
    from = to;
  }
  return credit;
}

/**
 * A prompt's matches over every tier, for the decision: one per worker, its
 * depth the deepest of its tiers' and its credit by creditedBlocks.
 */
export class TierMatcher implements HostMatcher {
  constructor(
    private readonly indexes: ReadonlyMap<Tier, PrefixIndexApi>,
    private readonly weights: TierWeights,
    readonly epoch: () => number,
  ) {}

  find(local: BigUint64Array): MatchResult {
    const bySlot = this.depths(local);
    const count = bySlot.size;
    const slots = new Uint32Array(count);
    const depths = new Uint32Array(count);
    const credits = new Float64Array(count);
    let i = 0;
    for (const [slot, d] of bySlot) {
      slots[i] = slot;
      depths[i] = Math.max(d.gpu, d.cpu, d.disk);
      credits[i] = creditedBlocks(d, this.weights);
      i++;
    }
    return { count, slots, depths, credits };
  }

  /** Per worker slot, its cached prefix's depth in each tier (workers without one left out). */
  depths(local: ArrayLike<bigint>): Map<number, TierDepths> {
    const out = new Map<number, TierDepths>();
    for (const [tier, index] of this.indexes) {
      // A view valid until the next call on the index: read it now.
      const found = index.findMatches(local);
      for (let i = 0; i < found.count; i++) {
        const slot = found.slots[i]!;
        let d = out.get(slot);
        if (!d) {
          d = { gpu: 0, cpu: 0, disk: 0 };
          out.set(slot, d);
        }
        d[tier] = Math.max(d[tier], found.depths[i]!);
      }
    }
    return out;
  }
}
