// Sample statistics for benchmarks. Machines here are shared and noisy, so
// suites report medians and ratios measured side by side in one run.

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(values: readonly number[]): number {
  return percentile([...values].sort((a, b) => a - b), 50);
}

/**
 * Times fn once per sample (after warmup) and returns the sorted per-call
 * durations in microseconds. `inner` calls are made per sample and averaged,
 * for calls too short for the timer.
 */
export function sampleMicros(fn: () => void, samples: number, warmup = Math.min(100, samples), inner = 1): Float64Array {
  for (let i = 0; i < warmup; i++) for (let j = 0; j < inner; j++) fn();
  const out = new Float64Array(samples);
  for (let i = 0; i < samples; i++) {
    const t0 = process.hrtime.bigint();
    for (let j = 0; j < inner; j++) fn();
    out[i] = Number(process.hrtime.bigint() - t0) / 1000 / inner;
  }
  return out.sort();
}

/**
 * Runs two implementations of the same work alternately, so both see the same
 * machine noise, and returns each one's sorted samples (microseconds).
 */
export function sideBySide(a: () => void, b: () => void, samples: number, inner = 1): [Float64Array, Float64Array] {
  const sa = new Float64Array(samples);
  const sb = new Float64Array(samples);
  for (let i = 0; i < Math.min(50, samples); i++) {
    a();
    b();
  }
  for (let i = 0; i < samples; i++) {
    let t0 = process.hrtime.bigint();
    for (let j = 0; j < inner; j++) a();
    sa[i] = Number(process.hrtime.bigint() - t0) / 1000 / inner;
    t0 = process.hrtime.bigint();
    for (let j = 0; j < inner; j++) b();
    sb[i] = Number(process.hrtime.bigint() - t0) / 1000 / inner;
  }
  return [sa.sort(), sb.sort()];
}

export function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
