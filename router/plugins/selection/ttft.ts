// ttft: the worker where the request's first token would come out soonest,
// evaluated in the wasm core for every worker (assembly/cost/ttft.ts): the
// fixed part of a first token there, plus its queued prefill and its own
// uncached tokens at the worker's learned speed (router/partition/speeds.ts),
// plus a decoding request's weight per request already decoding there; past
// capacity uncached tokens weigh more (reuse_weight x the fleet's queued
// prefill in engine steps), so the fleet keeps reusing what it cached.
// Cheapest wins (ties at random), or a softmax over normalised costs at
// temperature > 0.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { readParams } from '../params.js';

const spec = {
  reuse_weight: { type: 'number', default: 4, min: 0 },
  decode_weight: { type: 'number', default: 300, min: 0 },
  temperature: { type: 'number', default: 0, min: 0 },
} as const;

export function ttftPolicy(params?: unknown): SelectionPolicy {
  const p = readParams('ttft', params, spec);
  return {
    name: 'ttft',
    filters: [],
    scorers: [],
    coreCost: { kind: 'ttft', reuseWeight: p.reuse_weight, decodeWeight: p.decode_weight, temperature: p.temperature },
  };
}
