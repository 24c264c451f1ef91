// random: a uniformly random eligible worker.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { readParams } from '../../plugins/params.js';

export function randomPolicy(params?: unknown): SelectionPolicy {
  readParams('random', params, {});
  return {
    name: 'random',
    filters: [],
    scorers: [],
    picker: { name: 'random', inputs: 0, pick: (rows, _costs, ctx) => Math.min(rows.count - 1, Math.floor(ctx.random() * rows.count)) },
  };
}
