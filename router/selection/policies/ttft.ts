// ttft: the worker where the request's first token would come out soonest,
// evaluated in the wasm core for every worker (assembly/cost/ttft.ts): the
// fixed part of a first token there, plus its queued prefill and its own
// uncached tokens at the worker's learned speed (router/model-fleet/speeds.ts),
// plus a decoding request's weight per request already decoding there and a
// KV weight per token of KV its active requests hold (a decode step reads all
// of it, for this request and for its session's later turns there); past
// capacity uncached tokens weigh more (reuse_weight x the fleet's queued
// prefill in engine steps), so the fleet keeps reusing what it cached. The
// queued prefill is what is left of it: the blocks a worker's KV events show
// computed come off its oldest booking in prefill, down to one engine step of
// it (prefill_progress; false counts every booking whole until its first
// token). Cheapest wins (ties at random), or a softmax over normalised costs at
// temperature > 0.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { DEFAULT_SPEED_PRIOR } from '../../model-fleet/speeds.js';
import { readParams } from '../../plugins/params.js';

const spec = {
  reuse_weight: { type: 'number', default: 1, min: 0 },
  decode_weight: { type: 'number', default: 300, min: 0 },
  kv_weight: { type: 'number', default: 0.05, min: 0 },
  temperature: { type: 'number', default: 0, min: 0 },
  prefill_progress: { type: 'boolean', default: true },
  // The speed prior (router/model-fleet/speeds.ts): what a worker does before its first tokens are measured.
  prior_tokens_per_s: { type: 'number', default: DEFAULT_SPEED_PRIOR.tokensPerSecond, min: 0, exclusiveMin: true },
  prior_base_ms: { type: 'number', default: DEFAULT_SPEED_PRIOR.baseMs, min: 0 },
  speed_memory: { type: 'number', default: DEFAULT_SPEED_PRIOR.memory, min: 2 },
} as const;

export function ttftPolicy(params?: unknown): SelectionPolicy {
  const p = readParams('ttft', params, spec);
  return {
    name: 'ttft',
    filters: [],
    scorers: [],
    coreCost: { kind: 'ttft', reuseWeight: p.reuse_weight, decodeWeight: p.decode_weight, kvWeight: p.kv_weight, prefillProgress: p.prefill_progress, temperature: p.temperature },
    speedPrior: { tokensPerSecond: p.prior_tokens_per_s, baseMs: p.prior_base_ms, memory: p.speed_memory },
  };
}
