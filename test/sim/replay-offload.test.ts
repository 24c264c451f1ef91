// Replay with engines that load offloaded prefixes back: documents asked
// twice, with enough other prompts between to push them off every GPU (but
// not out of the CPU tiers). A router that credits the CPU tier sends each
// second ask to the worker holding the document in host memory, which loads
// it instead of computing it; one that credits only the GPU balances them by
// load and mostly computes them again.
import { describe, expect, it } from 'vitest';
import { policyOf } from '../../sim/replay/policy-spec.js';
import { simulate, type SimulationResult } from '../../sim/replay/simulate.js';
import type { ReplayRequest, Workload } from '../../sim/replay/workload.js';

const PROMPT = 4000;

function ask(id: string, doc: number, atMs: number): ReplayRequest {
  return {
    id,
    sessionId: null,
    arrival: { atMs },
    inputLength: PROMPT,
    outputLength: 8,
    tag: id.split('-')[0],
    writeTokens: (out) => out.forEach((_, j) => (out[j] = doc * 100_000 + j + 1)),
  };
}

const docs = 16;
const workload: Workload = {
  name: 'documents-twice',
  requests: [
    ...Array.from({ length: docs }, (_, d) => ask(`first-${d}`, d, d * 100)),
    ...Array.from({ length: 32 }, (_, f) => ask(`filler-${f}`, 1000 + f, 2000 + f * 50)),
    ...Array.from({ length: docs }, (_, d) => ask(`again-${d}`, d, 6000 + d * 200)),
  ],
};

function run(cpuWeight: number): SimulationResult {
  return simulate(workload, {
    label: `cpu ${cpuWeight}`,
    selection: policyOf('ttft'),
    workers: 4,
    // 512 GPU blocks of 16 tokens hold two documents; the CPU tier holds them all.
    engine: { blockSize: 16, numBlocks: 512, offloadBlocks: 8192, maxBatchedTokens: 8192 },
    tierWeights: { cpu: cpuWeight },
    eventDelayMs: 5,
    arrivalSpeedup: 1,
    seed: 1,
  });
}

const again = (r: SimulationResult) => r.records.filter((x) => x.tag === 'again');
const first = (r: SimulationResult, d: number) => r.records.find((x) => x.id === `first-${d}`)!;
const meanTtft = (r: SimulationResult) => {
  const xs = again(r);
  return xs.reduce((s, x) => s + (x.firstTokenMs! - x.arrivalMs), 0) / xs.length;
};

describe('replay: tier-aware routing and offload loads', () => {
  it('sends a document asked again to the worker holding it in its CPU tier, which loads it, for a lower TTFT', () => {
    const aware = run(0.75);
    const gpuOnly = run(0);
    for (const r of [aware, gpuOnly]) expect(r.records.every((x) => x.outcome === 'completed')).toBe(true);
    // Tier-aware: every second ask on its first ask's worker, its prompt loaded but for the last block's tokens.
    again(aware).forEach((x, d) => {
      expect(x.worker).toBe(first(aware, d).worker);
      expect(x.cachedTokens).toBe(PROMPT - (PROMPT % 16 || 16));
    });
    expect(aware.engines.reduce((s, e) => s + e.loadedTokens, 0)).toBeGreaterThanOrEqual(docs * (PROMPT - 16));
    // GPU-only: most second asks land elsewhere and compute the document again.
    const elsewhere = again(gpuOnly).filter((x, d) => x.worker !== first(gpuOnly, d).worker).length;
    expect(elsewhere).toBeGreaterThan(docs / 2);
    expect(meanTtft(aware)).toBeLessThan(meanTtft(gpuOnly));
  });
});
