// least-loaded: the eligible worker with the fewest requests in flight (the
// router's own count), ties at random.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { argminRandomTies } from '../../selection/row-picks.js';
import { WorkerInputs } from '../../worker-inputs.js';
import { readParams } from '../../plugins/params.js';

export function leastLoadedPolicy(params?: unknown): SelectionPolicy {
  readParams('least-loaded', params, {});
  return {
    name: 'least-loaded',
    filters: [],
    scorers: [],
    picker: {
      name: 'least-loaded',
      inputs: WorkerInputs.OCCUPANCY,
      pick: (rows, _costs, ctx) => argminRandomTies(rows.count, (i) => rows.occupancy![i]!, ctx.random),
    },
  };
}
