// In replay, the ttft policy's queued prefill follows the engine's progress
// through a long prompt (router/model-fleet/prefill-progress.ts): at a later
// arrival the worker counts the long prompt less the blocks its finished
// steps stored (published at each step's end, applied the event delay
// later), while more than a step of it is left; prefill_progress=false
// still counts all of it.
import { describe, expect, it } from 'vitest';
import type { StepReport } from '../../sim/mocker/engine-options.js';
import { policyOf } from '../../sim/replay/policy-spec.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { simulate } from '../../sim/replay/simulate.js';
import { jsonl } from './replay-fixtures.js';

const LONG = 40_000;
const ARRIVAL = 500;
const DELAY = 5;
const trace = parseMooncakeTrace(
  jsonl([
    { timestamp: 0, input_length: LONG, output_length: 2, hash_ids: Array.from({ length: Math.ceil(LONG / 512) }, (_, i) => i + 1) },
    { timestamp: ARRIVAL, input_length: 300, output_length: 2, hash_ids: [1000] },
  ]),
  { traceBlockSize: 512 },
);

function queuedAtSecondArrival(policy: string): { queued: number; steps: StepReport[] } {
  let queued = NaN;
  const steps: StepReport[] = [];
  simulate(trace, {
    label: policy,
    selection: policyOf(policy),
    workers: 1,
    eventDelayMs: DELAY,
    arrivalSpeedup: 1,
    seed: 0,
    audit: {
      arrival(index, route) {
        if (index === 1) queued = route.fleet.load()[0]!.prefillTokens;
      },
      step(_, step) {
        steps.push(step);
      },
    },
  });
  return { queued, steps };
}

describe('queued prefill in replay', () => {
  it('under ttft, the long prompt less the full steps its engine finished and published by then', () => {
    const { queued, steps } = queuedAtSecondArrival('ttft');
    // Published and applied by the arrival: steps that ended DELAY ms before it.
    const published = steps.filter((s) => s.startMs + s.durationMs + DELAY <= ARRIVAL);
    expect(published.length).toBeGreaterThanOrEqual(2);
    // Each full step of 8,192 tokens stores 128 whole 64-token blocks.
    expect(published.every((s) => s.prefillTokens === 8192)).toBe(true);
    expect(LONG - 8192 * published.length).toBeGreaterThan(8192);
    expect(queued).toBe(LONG - 8192 * published.length);
  });

  it('with prefill_progress=false, the whole long prompt until its first token', () => {
    expect(queuedAtSecondArrival('ttft:prefill_progress=false').queued).toBe(LONG);
  });
});
