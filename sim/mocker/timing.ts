// How long a simulated engine step takes. The polynomial fits a mid-size model
// on one GPU (vLLM-like): prefill time grows with the new tokens computed in the
// step, decode time with how full the KV cache is (attention reads every
// cached token). `speedup` compresses time uniformly so tests and demos run
// faster than a real GPU would.

export interface StepWork {
  /** Uncached prompt (or recomputed) tokens computed in the step. */
  prefillTokens: number;
  /** Whether at least one running request decodes one token in the step. */
  decoding: boolean;
  /** Active KV blocks / total KV blocks after the step's allocations. */
  kvUtilization: number;
}

/** The prefill polynomial's terms, ms before speedup: per step, per token, per token squared. */
export const PREFILL_FIXED_MS = 16.50142;
export const PREFILL_LINEAR_MS = 1.518344e-2;
export const PREFILL_QUADRATIC_MS = 4.209989e-7;

/** Prefill time in ms, before speedup, for `n` new tokens; 0 when nothing is prefilled. */
export function prefillMs(n: number): number {
  if (n <= 0) return 0;
  return PREFILL_QUADRATIC_MS * n * n + PREFILL_LINEAR_MS * n + PREFILL_FIXED_MS;
}

/** Time of one decode step in ms, before speedup, at KV utilisation `u` (0..1); never under 1 ms. */
export function decodeMs(u: number): number {
  return Math.max(1, -25.74 * u * u + 54.01 * u + 5.74);
}

/** Rejects a speedup that is not a finite number > 0. */
export function checkSpeedup(speedup: number): number {
  if (typeof speedup !== 'number' || !Number.isFinite(speedup) || speedup <= 0) {
    throw new RangeError(`speedup must be a finite number > 0, got ${speedup}`);
  }
  return speedup;
}

export class TimingModel {
  /** Multiplies every step's time from now on (a throttled GPU, a noisy neighbour); 1 by default. */
  slowdown = 1;

  constructor(
    readonly speedup = 1,
    /** ms per token loaded from the offload tier, before speedup. */
    private readonly loadMsPerToken = 0,
  ) {
    checkSpeedup(speedup);
  }

  /** Time to load `tokens` tokens' KV from the offload tier to the GPU, ms on the engine's clock. */
  loadMs(tokens: number): number {
    return (tokens * this.loadMsPerToken * this.slowdown) / this.speedup;
  }

  /** Duration of one step in ms on the engine's clock. */
  stepMs(work: StepWork): number {
    const decode = work.decoding ? decodeMs(work.kvUtilization) : 0;
    return ((prefillMs(work.prefillTokens) + decode) * this.slowdown) / this.speedup;
  }
}
