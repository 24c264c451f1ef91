// two-tier: sgl-router's cache_aware in two gates. When in-flight load is
// imbalanced (max - min > balance_abs_threshold and max > balance_rel_threshold
// x min) take the least-loaded worker; otherwise, when the best cached prefix
// covers more than cache_threshold of the prompt, the least-loaded worker among
// those holding it; otherwise the least-loaded worker.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { argminRandomTies } from '../../selection/row-picks.js';
import { WorkerInputs } from '../../worker-inputs.js';
import { readParams } from '../../plugins/params.js';

const spec = {
  cache_threshold: { type: 'number', default: 0.5, min: 0, max: 1 },
  balance_abs_threshold: { type: 'number', default: 32, min: 0 },
  balance_rel_threshold: { type: 'number', default: 1.1, min: 1 },
} as const;

export function twoTierPolicy(params?: unknown): SelectionPolicy {
  const p = readParams('two-tier', params, spec);
  return {
    name: 'two-tier',
    filters: [],
    scorers: [],
    picker: {
      name: 'two-tier',
      inputs: WorkerInputs.LOAD | WorkerInputs.CACHE,
      pick(rows, _costs, ctx) {
        const load = rows.activeRequests!;
        const overlap = rows.overlapBlocks!;
        let min = Infinity;
        let max = -Infinity;
        let best = 0;
        for (let i = 0; i < rows.count; i++) {
          min = Math.min(min, load[i]!);
          max = Math.max(max, load[i]!);
          best = Math.max(best, overlap[i]!);
        }
        const byLoad = (i: number) => load[i]!;
        if (max - min > p.balance_abs_threshold && max > p.balance_rel_threshold * min) return argminRandomTies(rows.count, byLoad, ctx.random);
        if (ctx.promptBlocks > 0 && best / ctx.promptBlocks > p.cache_threshold) {
          return argminRandomTies(rows.count, byLoad, ctx.random, (i) => overlap[i] === best);
        }
        return argminRandomTies(rows.count, byLoad, ctx.random);
      },
    },
  };
}
