// round-robin: each decision takes the next eligible worker after the last one
// picked, in slot order, wrapping around. Ignores cache and load.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { readParams } from '../../plugins/params.js';

export function roundRobinPolicy(params?: unknown): SelectionPolicy {
  readParams('round-robin', params, {});
  let last = -1;
  return {
    name: 'round-robin',
    filters: [],
    scorers: [],
    picker: {
      name: 'round-robin',
      inputs: 0,
      pick(rows) {
        // Rows come in slot order: the first slot after the last pick, else the first row.
        let row = 0;
        for (let i = 0; i < rows.count; i++) {
          if (rows.slots[i]! > last) {
            row = i;
            break;
          }
        }
        last = rows.slots[row]!;
        return row;
      },
    },
  };
}
