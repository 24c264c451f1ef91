// The replay's audit view (simulate's `audit` option) and the wait breakdown
// built on it (sim/replay/ttft-audit.ts): hand-computed steps, then a replay
// whose every request's breakdown must account for its whole time to first
// token.
import { describe, expect, it } from 'vitest';
import type { StepReport } from '../../sim/mocker/engine-options.js';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { simulate } from '../../sim/replay/simulate.js';
import { firstStepAfter, waitBreakdown } from '../../sim/replay/ttft-audit.js';
import { jsonl, sharedDocumentTrace } from './replay-fixtures.js';

const step = (startMs: number, durationMs: number, prefillTokens: number, decodes: number, kvUsage: number): StepReport => ({
  startMs,
  durationMs,
  prefillTokens,
  decodes,
  requests: decodes + (prefillTokens > 0 ? 1 : 0),
  kvUsage,
});

describe('waitBreakdown', () => {
  // Arrival at 40 inside a step [0, 100); then a 1,000-token prefill step with
  // a decode batch at half the KV (its first token at its end, 170); a later
  // decode-only step is past the first token.
  const steps = [step(0, 100, 500, 0, 0.1), step(100, 70, 1000, 2, 0.5), step(170, 9, 0, 3, 0.5)];

  it('splits the wait into the step in flight and the later steps parts, by hand', () => {
    const b = waitBreakdown(steps, 0, 40, 170);
    expect(b.inFlightMs).toBe(60);
    expect(b.steps).toBe(1);
    expect(b.prefillTokens).toBe(1000);
    expect(b.fixedMs).toBeCloseTo(16.50142, 9);
    expect(b.linearMs).toBeCloseTo(15.18344, 9);
    expect(b.quadraticMs).toBeCloseTo(0.4209989, 9);
    // -25.74 x 0.25 + 54.01 x 0.5 + 5.74
    expect(b.decodeMs).toBeCloseTo(26.31, 9);
  });

  it('a decode-only step adds decode time and no prefill parts; speedup divides every part', () => {
    const b = waitBreakdown(steps, 0, 40, 180, 2);
    expect(b.steps).toBe(2);
    expect(b.inFlightMs).toBe(60);
    expect(b.fixedMs).toBeCloseTo(16.50142 / 2, 9);
    expect(b.decodeMs).toBeCloseTo(26.31, 9);
  });

  it('firstStepAfter skips the steps that ended by the arrival', () => {
    expect(firstStepAfter(steps, 0, 40)).toBe(0);
    expect(firstStepAfter(steps, 0, 100)).toBe(1);
    expect(firstStepAfter(steps, 1, 175)).toBe(2);
    expect(firstStepAfter(steps, 0, 500)).toBe(3);
  });
});

describe('the audit view of a replay', () => {
  const workload = parseMooncakeTrace(jsonl(sharedDocumentTrace({ requests: 60, documents: 30, docBlocks: 40, blockSize: 64, gapMs: 5 })), {
    traceBlockSize: 64,
  });
  const workers = 3;
  const arrivals: number[] = [];
  const explained: number[] = [];
  const steps: StepReport[][] = Array.from({ length: workers }, () => []);
  const run = simulate(workload, {
    label: 'ttft',
    selection: createSelectionPolicy('ttft'),
    workers,
    engine: { maxBatchedTokens: 1024 },
    eventDelayMs: 5,
    arrivalSpeedup: 1,
    seed: 0,
    audit: {
      arrival(index, route, fields, tokens) {
        arrivals.push(index);
        explained.push(route.explain(fields, tokens).workers.length);
      },
      step(worker, s) {
        steps[worker]!.push(s);
      },
    },
  });

  it('sees every request arrive once, with a router that can explain it, and every engine step', () => {
    expect([...arrivals].sort((a, b) => a - b)).toEqual(workload.requests.map((_, i) => i));
    expect(explained.every((n) => n === workers)).toBe(true);
    expect(steps.map((s) => s.length)).toEqual(run.engines.map((e) => e.steps));
  });

  it('each request breakdown adds up to its time to first token, and queued requests waited on others prefill', () => {
    const cursor = steps.map(() => 0);
    const order = run.records.map((_, i) => i).sort((a, b) => run.records[a]!.arrivalMs - run.records[b]!.arrivalMs);
    let waitedOnOthers = 0;
    for (const i of order) {
      const r = run.records[i]!;
      const list = steps[r.worker]!;
      const from = (cursor[r.worker] = firstStepAfter(list, cursor[r.worker]!, r.arrivalMs));
      const b = waitBreakdown(list, from, r.arrivalMs, r.firstTokenMs!);
      const sum = b.inFlightMs + b.fixedMs + b.linearMs + b.quadraticMs + b.decodeMs;
      expect(sum).toBeCloseTo(r.firstTokenMs! - r.arrivalMs, 6);
      expect(b.prefillTokens).toBeGreaterThanOrEqual(r.promptTokens - r.cachedTokens);
      if (b.prefillTokens > r.promptTokens - r.cachedTokens) waitedOnOthers++;
    }
    // 2,560-token prompts of 30 documents 5 ms apart on three workers of 1,024 tokens a step: some queue.
    expect(waitedOnOthers).toBeGreaterThan(0);
  });
});
