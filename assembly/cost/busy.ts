// When a worker is busy (overloaded) for a request class: the same rule for
// the full scan (select.ts), the fast path's views (ledger/views.ts) and the
// twin (bindings/reference/selector.ts).

export const REASON_BUSY_PREFILL_TOKENS: u8 = 4;
export const REASON_BUSY_PREFILL_FRACTION: u8 = 5;
export const REASON_BUSY_DECODE_FRACTION: u8 = 6;

/**
 * Why a worker is busy, or 0. Busy means any of: prefill tokens > prefillTokens;
 * prefill tokens > prefillFraction x max batched tokens (workers with a known
 * max only); decode blocks / total blocks > decodeFraction (workers with a known
 * capacity only). +Infinity disables a threshold.
 */
@inline
export function busyReason(
  tokens: f64,
  maxTokens: u32,
  decodeBlocks: u32,
  totalBlocks: u32,
  prefillTokens: f64,
  prefillFraction: f64,
  decodeFraction: f64,
): u8 {
  if (tokens > prefillTokens) return REASON_BUSY_PREFILL_TOKENS;
  if (maxTokens > 0 && tokens > prefillFraction * <f64>maxTokens) return REASON_BUSY_PREFILL_FRACTION;
  if (totalBlocks > 0 && <f64>decodeBlocks / <f64>totalBlocks > decodeFraction) return REASON_BUSY_DECODE_FRACTION;
  return 0;
}
