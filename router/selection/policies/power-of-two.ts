// power-of-two: sample two distinct eligible workers at random and take the
// one with fewer requests in flight (ties: either, at random). Near
// least-loaded balance without looking at every worker's load.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { WorkerInputs } from '../../worker-inputs.js';
import { readParams } from '../../plugins/params.js';

export function powerOfTwoPolicy(params?: unknown): SelectionPolicy {
  readParams('power-of-two', params, {});
  return {
    name: 'power-of-two',
    filters: [],
    scorers: [],
    picker: {
      name: 'power-of-two',
      inputs: WorkerInputs.OCCUPANCY,
      pick(rows, _costs, ctx) {
        if (rows.count === 1) return 0;
        const a = Math.min(rows.count - 1, Math.floor(ctx.random() * rows.count));
        let b = Math.min(rows.count - 2, Math.floor(ctx.random() * (rows.count - 1)));
        if (b >= a) b++;
        const la = rows.occupancy![a]!;
        const lb = rows.occupancy![b]!;
        if (la !== lb) return la < lb ? a : b;
        return ctx.random() < 0.5 ? a : b;
      },
    },
  };
}
