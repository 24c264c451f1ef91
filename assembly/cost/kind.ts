import { decodeOf, decodingOf, fleetBatchedTokens, fleetPrefillTokens, prefillOf, requestsOf, speedBaseOf, speedTokenOf } from '../ledger/rows';
import { kvClamped, kvClampedCost, kvConstant, kvKey, kvUnclamped } from './kv';
import { ttftCached, ttftCost, ttftKey, ttftReuseFactor } from './ttft';

// Cost kinds: the per-worker cost a decision minimises, behind one interface
// the scan (select.ts), the fast path (select-fast.ts) and the ledger's trees
// (ledger/views.ts) share. A kind splits a worker's cost for a request into
//   key(w)            request-independent, kept per worker in the fast path's trees
//   constant          worker-independent, from the request
//   touched(w, key, O, H)   the exact cost of a worker the request touches
//                           (cached prefix depth O, prompt hashes held active H)
//   untouched(key)    the cost of every other worker,
//   bound(minKey, O)  a lower bound on touched(w, key, O, 0) for key >= minKey,
// with untouched(key) == touched(w, key, 0, 0) bit for bit and non-decreasing
// in key, so the cheapest untouched workers are the smallest keys. A new kind
// adds a case to each switch below (and its parameters to costBegin).
//   0  COST_KV    the kv cost (cost/kv.ts); weights: prefill load scale, active request weight (its
//                 third weight is unused, and 0)
//   1  COST_TTFT  predicted time to first token (cost/ttft.ts); weights: reuse weight, decode weight, KV weight
//
// Two parameter sets: the configured one (costConfigure) that the ledger's
// keys are kept under, and a decision's own (costBegin), which may differ; a
// decision takes the fast path only when they match (costMatchesConfigured).

export const COST_KV: u32 = 0;
export const COST_TTFT: u32 = 1;

// The configured cost: the KEY column and the trees follow it.
let configured = false;
let cfgKind: u32 = COST_KV;
let cfgScale: f64 = 0;
let cfgWeight: f64 = 0;
let cfgThird: f64 = 0;
let cfgBlockSize: f64 = 0;

export function costConfigure(kind: u32, scale: f64, weight: f64, third: f64, blockSize: u32): void {
  configured = true;
  cfgKind = kind;
  cfgScale = scale;
  cfgWeight = weight;
  cfgThird = third;
  cfgBlockSize = <f64>blockSize;
}

@inline
export function costConfigured(): bool {
  return configured;
}

export function costMatchesConfigured(kind: u32, scale: f64, weight: f64, third: f64, blockSize: u32): bool {
  return configured && kind == cfgKind && scale == cfgScale && weight == cfgWeight && third == cfgThird && <f64>blockSize == cfgBlockSize;
}

/** Worker w's key under the configured cost. */
@inline
export function configuredKey(w: u32): f64 {
  switch (cfgKind) {
    case COST_TTFT:
      return ttftKey(prefillOf(w), decodingOf(w), <f64>decodeOf(w) * cfgBlockSize, speedBaseOf(w), speedTokenOf(w), cfgWeight, cfgThird);
    default:
      return kvKey(prefillOf(w), decodeOf(w), requestsOf(w), cfgBlockSize, cfgScale, cfgWeight);
  }
}

// One decision's cost: its parameters and its request's terms (costBegin).
let kind: u32 = COST_KV;
let scale: f64 = 0;
let weight: f64 = 0;
let third: f64 = 0;
let credit: f64 = 0;
let blockSize: f64 = 0;
let promptBlocks: f64 = 0;
let seqCount: u32 = 0;
let promptTokenCount: f64 = 0;
let constant: f64 = 0;
// COST_TTFT: the reuse factor r of this decision.
let reuse: f64 = 1;

/** Sets a decision's cost: its kind and weights, and the request (prompt tokens, sequence hashes). */
export function costBegin(k: u32, s: f64, w: f64, t: f64, c: f64, size: u32, promptTokens: u32, hashes: u32): void {
  kind = k;
  scale = s;
  weight = w;
  third = t;
  credit = c;
  blockSize = <f64>size;
  promptBlocks = Math.ceil(<f64>promptTokens / blockSize);
  promptTokenCount = <f64>promptTokens;
  seqCount = hashes;
  switch (kind) {
    case COST_TTFT:
      reuse = ttftReuseFactor(fleetPrefillTokens(), fleetBatchedTokens(), scale);
      constant = reuse * promptTokenCount;
      break;
    default:
      constant = kvConstant(promptBlocks, seqCount, scale);
  }
}

/** Worker w's key under the decision's parameters (the scan's; equal to the KEY column when they match). */
@inline
export function costKey(w: u32): f64 {
  switch (kind) {
    case COST_TTFT:
      return ttftKey(prefillOf(w), decodingOf(w), <f64>decodeOf(w) * blockSize, speedBaseOf(w), speedTokenOf(w), weight, third);
    default:
      return kvKey(prefillOf(w), decodeOf(w), requestsOf(w), blockSize, scale, weight);
  }
}

/** The exact cost of worker w with key `key`, a cached prefix credited `overlap` blocks and `held` prompt hashes active. */
@inline
export function costTouched(w: u32, key: f64, overlap: f64, held: u32): f64 {
  switch (kind) {
    case COST_TTFT:
      return ttftCost(key, constant, reuse, ttftCached(max<f64>(overlap, <f64>held), blockSize, promptTokenCount));
    default: {
      const credited = credit * overlap;
      // Only a credit beyond the prompt can clamp the prefill term: read P only then.
      if (credited > promptBlocks && kvClamped(prefillOf(w), blockSize, promptBlocks, credited)) {
        return kvClampedCost(decodeOf(w), seqCount, held, requestsOf(w), weight);
      }
      return kvUnclamped(key, constant, credited, held, scale);
    }
  }
}

/**
 * A lower bound on costTouched(w, key, overlap, 0) over every member whose key
 * is at least minKey (computed with the same operations, so it holds in
 * floating point too), or -Infinity when the kind has none at this overlap.
 */
@inline
export function costBound(minKey: f64, overlap: f64): f64 {
  switch (kind) {
    case COST_TTFT:
      return ttftCost(minKey, constant, reuse, ttftCached(overlap, blockSize, promptTokenCount));
    default: {
      const credited = credit * overlap;
      // A clamped prefill term is not bounded by the key.
      return credited > promptBlocks ? -Infinity : kvUnclamped(minKey, constant, credited, 0, scale);
    }
  }
}

/**
 * The cached prefix a booking under cost kind `k` takes off the request's
 * prefill, in blocks: the kv cost books what the index holds (its credited
 * overlap); the ttft cost also the prefix the worker's active requests hold
 * (held), which it prices as cached, so the ledger's queued prefill is the
 * work the worker will do.
 */
@inline
export function costBookedOverlap(k: u32, overlap: f64, held: u32): f64 {
  return k == COST_TTFT ? max<f64>(overlap, <f64>held) : overlap;
}

/** The cost of a worker the request does not touch, from its key. */
@inline
export function costUntouched(key: f64): f64 {
  switch (kind) {
    case COST_TTFT:
      return ttftCost(key, constant, reuse, 0);
    default:
      return kvUnclamped(key, constant, 0, 0, scale);
  }
}
