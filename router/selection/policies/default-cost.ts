// kv: the default cost, evaluated in the wasm core for every worker:
// prefill_load_scale x max(prefill blocks + prompt blocks - overlap_credit x
// overlap blocks, 0) + decode blocks (+ active_request_weight x active
// requests), times the preferred-taint multiplier; cheapest wins (ties at
// random), or a softmax over normalised costs at temperature > 0.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { readParams } from '../../plugins/params.js';

const spec = {
  overlap_credit: { type: 'number', default: 1, min: 0 },
  prefill_load_scale: { type: 'number', default: 1, min: 0 },
  active_request_weight: { type: 'number', default: 0, min: 0 },
  temperature: { type: 'number', default: 0, min: 0 },
} as const;

export function defaultCostPolicy(params?: unknown): SelectionPolicy {
  const p = readParams('kv', params, spec);
  return {
    name: 'kv',
    filters: [],
    scorers: [],
    coreCost: {
      kind: 'kv',
      overlapCredit: p.overlap_credit,
      prefillLoadScale: p.prefill_load_scale,
      activeRequestWeight: p.active_request_weight,
      temperature: p.temperature,
    },
  };
}
