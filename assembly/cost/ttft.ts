// The ttft cost: when the request's first token would come out of worker w,
// plus what its prefill there costs the rest of the fleet, lower is better.
// For a request of P prompt tokens, C of them cached on w, in ms:
//   a_w + b_w x (Q + d x D + k x A + r x (P - C))
//   a_w  the fixed part of a time to first token on w (SPEED_BASE)
//   b_w  w's ms per prefill token (SPEED_TOKEN)
//   Q    w's booked prefill tokens not yet prefilled (ACTIVE_PREFILL)
//   D    w's requests past their first token (DECODING); d, the decode weight,
//        is how many tokens of queued prefill one of them counts as: a running
//        decode batch slows every step, and a new prefill stalls it
//   A    the KV tokens w's active requests hold (ACTIVE_DECODE, distinct blocks,
//        times the block size); k, the KV weight, is how many tokens of queued
//        prefill one of them counts as. A decode step reads every token its
//        batch holds, so on a worker holding more the steps of this request
//        take longer, and so do those of the later turns of its session,
//        which will find their context there and follow it. Long agent
//        contexts that share a system prompt would otherwise pile onto the
//        worker that cached it. Once every worker holds a full batch the
//        term differs little between them.
//   r    1 + kappa x L: L the fleet's queued prefill in engine steps (its
//        active prefill tokens over its max batched tokens), kappa the reuse
//        weight. Past capacity every recomputed token is capacity lost, so
//        uncached tokens weigh more the longer the fleet's queues are.
//   C    min(max(O, H) x bs, P): O the cached prefix depth on w, H the prompt
//        hashes w's active requests hold (chained hashes: a prefix too, about
//        to be cached there)
// Split for the fast path: the request-independent key, in tokens of w's speed,
//   key(w) = a_w / b_w + (Q + d x D + k x A)
// the worker-independent constant K = r x P, and the cost
//   cost = (key + K) - r x C
// times the host's group multiplier, which carries b_w / b_ref: the host puts
// workers of one speed in one group (router/model-fleet/core-groups.ts), so the
// cost is in tokens at the reference speed b_ref. A worker the request does
// not touch (C = 0) costs exactly key + K - 0: non-decreasing in the key, as
// cost/kind.ts requires. The pure-TS twin (bindings/reference/selector.ts)
// performs the same operations in the same order.

/** The request-independent part of a worker's cost, in tokens at its speed. */
@inline
export function ttftKey(
  prefillTokens: f64,
  decoding: u32,
  activeTokens: f64,
  baseMs: f64,
  msPerToken: f64,
  decodeWeight: f64,
  kvWeight: f64,
): f64 {
  return baseMs / msPerToken + (prefillTokens + decodeWeight * <f64>decoding + kvWeight * activeTokens);
}

/** The reuse factor r = 1 + kappa x L from the fleet's totals (L = 0 without capacity). */
@inline
export function ttftReuseFactor(fleetPrefill: f64, fleetBatched: f64, reuseWeight: f64): f64 {
  return fleetBatched > 0 ? 1 + reuseWeight * (fleetPrefill / fleetBatched) : 1;
}

/** Tokens of a P-token prompt cached on a worker whose prefix is credited `overlap` blocks (of `blockSize`). */
@inline
export function ttftCached(overlap: f64, blockSize: f64, promptTokens: f64): f64 {
  return min<f64>(overlap * blockSize, promptTokens);
}

/** The cost of a worker with key `key` and `cached` tokens cached: (key + K) - r x cached. */
@inline
export function ttftCost(key: f64, constant: f64, reuse: f64, cached: f64): f64 {
  return key + constant - reuse * cached;
}
