// Where a request's time to first token went, from the steps its engine ran
// while it waited (sim/mocker's step reports): the part of the step already
// running when it arrived, then each later step's parts in the timing model
// (sim/mocker/timing.ts): the fixed cost of a prefill step, its linear and
// quadratic terms, and the decode time the running batch added. An engine
// with work runs its steps back to back, and a request arriving at an idle
// engine starts a step at once, so the parts add up to the time to first
// token. bench/ttft-audit.ts sets them beside the router's prediction.
import type { StepReport } from '../mocker/engine-options.js';
import { PREFILL_FIXED_MS, PREFILL_LINEAR_MS, PREFILL_QUADRATIC_MS, decodeMs } from '../mocker/timing.js';

export interface WaitBreakdown {
  /** What was left of the step running when the request arrived, ms. */
  inFlightMs: number;
  /** Steps that started at or after its arrival, up to the one that gave its first token. */
  steps: number;
  fixedMs: number;
  linearMs: number;
  quadraticMs: number;
  decodeMs: number;
  /** Prefill tokens those steps computed. */
  prefillTokens: number;
}

/**
 * The breakdown of a request that arrived at `arrivalMs` and got its first
 * token at `firstTokenMs`, from its engine's steps in start order, beginning
 * at index `from` (a caller walking requests in arrival order passes the
 * first step that had not ended by this arrival, found by firstStepAfter).
 */
export function waitBreakdown(steps: readonly StepReport[], from: number, arrivalMs: number, firstTokenMs: number, speedup = 1): WaitBreakdown {
  const b: WaitBreakdown = { inFlightMs: 0, steps: 0, fixedMs: 0, linearMs: 0, quadraticMs: 0, decodeMs: 0, prefillTokens: 0 };
  for (let k = from; k < steps.length && steps[k]!.startMs < firstTokenMs; k++) {
    const s = steps[k]!;
    if (s.startMs < arrivalMs) {
      b.inFlightMs += s.startMs + s.durationMs - arrivalMs;
      continue;
    }
    const n = s.prefillTokens;
    b.steps++;
    b.prefillTokens += n;
    if (s.decodes > 0) b.decodeMs += decodeMs(s.kvUsage) / speedup;
    if (n > 0) {
      b.fixedMs += PREFILL_FIXED_MS / speedup;
      b.linearMs += (PREFILL_LINEAR_MS * n) / speedup;
      b.quadraticMs += (PREFILL_QUADRATIC_MS * n * n) / speedup;
    }
  }
  return b;
}

/** The first step at or after `from` that had not ended by `atMs`. */
export function firstStepAfter(steps: readonly StepReport[], from: number, atMs: number): number {
  let k = from;
  while (k < steps.length && steps[k]!.startMs + steps[k]!.durationMs <= atMs) k++;
  return k;
}
