// The kv cost (Dynamo's default), lower is better, for worker w and a request
// of B = ceil(prompt / bs) blocks and S sequence hashes:
//   scale x max(P / bs + B - credit x O, 0) + (D + S - H) + a x R
// (P active prefill tokens, D active decode blocks, R active requests, O the
// request's cached prefix depth on w, H the request's hashes w holds active).
// It is evaluated split into a request-independent key and a worker-independent
// constant,
//   key(w) = scale x (P / bs) + D + a x R
//   K      = scale x B + S
//   cost   = (key + K) - (scale x (credit x O) + H)   when P / bs + B - credit x O >= 0
//   cost   = (D + S - H) + a x R                      otherwise (prefill term clamped at 0)
// so that in floating point too a worker the request does not touch (O = H = 0)
// costs exactly key + K - 0: cost is then a non-decreasing function of the key,
// and the cheapest untouched workers are those with the smallest key. The
// pure-TS twin (bindings/reference/selector.ts) performs the same operations
// in the same order.

/** The request-independent part of a worker's cost. */
@inline
export function kvKey(prefillTokens: f64, decodeBlocks: u32, requests: u32, blockSize: f64, scale: f64, weight: f64): f64 {
  return scale * (prefillTokens / blockSize) + <f64>decodeBlocks + weight * <f64>requests;
}

/** The worker-independent part of a request's cost. */
@inline
export function kvConstant(promptBlocks: f64, seqCount: u32, scale: f64): f64 {
  return scale * promptBlocks + <f64>seqCount;
}

/**
 * Whether the prefill term is clamped at 0: P / bs + B - credited < 0, where
 * credited = credit x O. Only possible when credited > B (P / bs + B >= B holds
 * after rounding too), so callers test that first and read P only then.
 */
@inline
export function kvClamped(prefillTokens: f64, blockSize: f64, promptBlocks: f64, credited: f64): bool {
  return prefillTokens / blockSize + promptBlocks - credited < 0;
}

/** The cost when the prefill term is not clamped: key + K - (scale x credited + H). */
@inline
export function kvUnclamped(key: f64, constant: f64, credited: f64, held: u32, scale: f64): f64 {
  return key + constant - (scale * credited + <f64>held);
}

/** The cost when the prefill term is clamped at 0: (D + S - H) + a x R. */
@inline
export function kvClampedCost(decodeBlocks: u32, seqCount: u32, held: u32, requests: u32, weight: f64): f64 {
  return <f64>(decodeBlocks + seqCount - held) + weight * <f64>requests;
}
