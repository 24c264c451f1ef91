// Online calibration of the ttft policy in virtual-time replay, where the
// mocker's timing model (sim/mocker/timing.ts) is the ground truth: the
// learned speed converges to what that model takes, from a prior far off, and
// a worker slowed mid-run gets less work within seconds.
import { describe, expect, it } from 'vitest';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';
import { prefillMs } from '../../sim/mocker/timing.js';
import { simulate, type SimulationResult } from '../../sim/replay/simulate.js';
import type { ReplayRequest, Workload } from '../../sim/replay/workload.js';

/** Prompts that share nothing, `gapMs` apart, of lengths drawn by `length(i)`. */
function coldStream(count: number, gapMs: number, length: (i: number) => number, outputLength: number): Workload {
  const requests: ReplayRequest[] = Array.from({ length: count }, (_, i) => {
    const inputLength = length(i);
    return {
      id: `r${i}`,
      sessionId: null,
      arrival: { atMs: i * gapMs },
      inputLength,
      outputLength,
      writeTokens(out: Uint32Array) {
        for (let t = 0; t < inputLength; t++) out[t] = 1 + ((i * 7919 + t * 31) % 100_000);
      },
    };
  });
  return { name: 'cold-stream', requests };
}

/** A deterministic spread of lengths in [lo, hi]. */
function spread(lo: number, hi: number): (i: number) => number {
  return (i) => lo + (((i * 2654435761) >>> 0) % (hi - lo + 1));
}

function run(workload: Workload, policy: string, params: Record<string, number>, slowdowns: { worker: number; atMs: number; factor: number }[] = [], workers = 4): SimulationResult {
  return simulate(workload, { label: policy, selection: createSelectionPolicy(policy, params), workers, eventDelayMs: 5, arrivalSpeedup: 1, seed: 1, slowdowns });
}

/** Of the requests that arrived in [fromMs, toMs), the share dispatched to worker w. */
function share(result: SimulationResult, w: number, fromMs: number, toMs: number): number {
  const inWindow = result.records.filter((r) => r.arrivalMs >= fromMs && r.arrivalMs < toMs);
  return inWindow.filter((r) => r.worker === w).length / inWindow.length;
}

describe('ttft calibration in replay', () => {
  it('learns the prefill speed of the timing model to within 10%, from a prior 3x off', () => {
    // One request at a time (1.5 s apart, one output token): each first token
    // is one prefill step of its own prompt, so the timing model's time for n
    // uncached tokens is prefillMs(n). Its least-squares line over the
    // prompts' lengths is what a straight-line model can learn.
    const length = spread(500, 6000);
    const count = 400;
    const workload = coldStream(count, 1500, length, 1);
    const result = run(workload, 'ttft', { prior_tokens_per_s: 16_000, prior_base_ms: 60 }, [], 2);
    const xs = Array.from({ length: count }, (_, i) => length(i));
    const ys = xs.map(prefillMs);
    const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
    const mx = mean(xs);
    const my = mean(ys);
    const slope = xs.reduce((s, x, i) => s + (x - mx) * (ys[i]! - my), 0) / xs.reduce((s, x) => s + (x - mx) ** 2, 0);
    const base = my - slope * mx;
    for (const learned of result.speeds) {
      expect(learned!.speedClass).toBe(0);
      expect(learned!.observations).toBeGreaterThan(count / 4);
      expect(Math.abs(learned!.msPerToken / slope - 1)).toBeLessThan(0.1);
      // The predicted time to first token across the prompts' range.
      for (const n of [1000, mx, 5500]) {
        const predicted = learned!.baseMs + learned!.msPerToken * n;
        expect(Math.abs(predicted / (base + slope * n) - 1)).toBeLessThan(0.1);
      }
    }
  });

  it('sends a worker slowed mid-run less work within seconds, which kv does not', () => {
    // 4 workers at about a third of their capacity, one output token a request (no decode
    // batch to weigh); worker 0 turns 4x slower at 20 s.
    const workload = coldStream(2400, 25, spread(1000, 3000), 1);
    const slowdowns = [{ worker: 0, atMs: 20_000, factor: 4 }];
    const ttft = run(workload, 'ttft', {}, slowdowns);
    const kv = run(workload, 'kv', {}, slowdowns);
    // Before the slowdown every worker takes its share.
    expect(share(ttft, 0, 5_000, 20_000)).toBeGreaterThan(0.15);
    // From 5 s after it, worker 0 takes far less under ttft; kv, at this load, keeps sending it work.
    const after = share(ttft, 0, 25_000, 60_000);
    expect(after).toBeLessThan(0.05);
    expect(share(kv, 0, 25_000, 60_000)).toBeGreaterThan(2 * after);
    // The router learned it: worker 0 is in a slower class, the others stay at about 1. (It
    // learns no further than it needs: once idle worker 0 costs more than the others with
    // their queues, it gets no more requests to learn from at this load.)
    expect(ttft.speeds[0]!.speedClass).toBeGreaterThanOrEqual(1);
    expect(ttft.speeds[0]!.factor).toBeGreaterThan(1.2);
    for (const w of [1, 2, 3]) {
      expect(ttft.speeds[w]!.speedClass).toBe(0);
      expect(Math.abs(ttft.speeds[w]!.factor - 1)).toBeLessThan(0.1);
    }
  });
});
