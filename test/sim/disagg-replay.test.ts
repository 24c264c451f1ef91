// Replay of a disaggregated fleet: split requests run prefill, KV transfer and
// decode on the mock engines in virtual time, the ledger settles, and the
// comparison against an aggregated fleet of the same size reports both.
import { describe, expect, it } from 'vitest';
import { compareDisaggregation } from '../../sim/replay/disagg-compare.js';
import { coldPrompts } from '../../sim/replay/cold-prompts.js';
import { simulate } from '../../sim/replay/simulate.js';
import { policyOf } from '../../sim/replay/policy-spec.js';
import { prefillMs } from '../../sim/mocker/timing.js';

const engine = { blockSize: 16, numBlocks: 8192, maxBatchedTokens: 2048 };

describe('disaggregated replay', () => {
  it('a lone long prompt: TTFT is the prefill, the transfer and the decode step, in virtual time', () => {
    const workload = coldPrompts({ count: 1, promptTokens: [4005, 4005], outputTokens: [8, 8], seed: 1 });
    const run = (transfer: { kvBytesPerToken: number; kvBandwidth: number }) =>
      simulate(workload, {
        label: 't',
        selection: policyOf('kv'),
        workers: 2,
        engine,
        eventDelayMs: 0,
        arrivalSpeedup: 1,
        seed: 0,
        disaggregation: { prefillWorkers: 1, minRemotePrefillTokens: 512, transfer },
      });
    const fast = run({ kvBytesPerToken: 1000, kvBandwidth: 1e12 });
    const slow = run({ kvBytesPerToken: 1_000_000, kvBandwidth: 1e9 });
    const [a, b] = [fast.records[0]!, slow.records[0]!];
    expect(a.outcome).toBe('completed');
    expect(a.worker).toBe(1); // the decode worker
    expect(a.outputTokens).toBe(8);
    // The 250 full blocks (4000 tokens) at 1 MB a token over 1 GB/s take 4000 ms, against 4 us at the fast link.
    expect(b.firstTokenMs! - a.firstTokenMs!).toBeCloseTo(4000 - 0.004, 3);
    // The prefill computed the prompt (two chunks of the 2048-token budget); the decode only the partial block.
    expect(a.firstTokenMs! - a.arrivalMs).toBeGreaterThanOrEqual(prefillMs(2048) + prefillMs(1957));
    expect(fast.engines[0]!.admittedPromptTokens).toBe(4005);
    expect(fast.engines[1]!.receivedTokens).toBe(4000);
  });

  it('compares an aggregated and a disaggregated fleet of the same size', () => {
    // Long prompts and long answers, arriving faster than one worker prefills them.
    const workload = coldPrompts({ count: 120, intervalMs: 60, promptTokens: [4000, 8000], outputTokens: [200, 400], seed: 7 });
    const [agg, dis] = compareDisaggregation(workload, { workers: 4, prefillWorkers: 1, minRemotePrefillTokens: 512, engine: { ...engine, numBlocks: 16_384 }, seed: 3 });
    expect(agg.policy).toBe('aggregated 4');
    expect(dis.policy).toBe('disaggregated 1P+3D');
    for (const r of [agg, dis]) expect(r.completed).toBe(120);
    // The decode workers' steps never carry a prompt's prefill chunks beside their decodes, so tokens come
    // faster; the one prefill worker queues prompts, so first tokens come later.
    expect(dis.itl_ms.mean!).toBeLessThan(0.75 * agg.itl_ms.mean!);
    expect(dis.ttft_ms.p50!).toBeGreaterThan(agg.ttft_ms.p50!);
    expect(dis.per_worker.w0!.requests).toBe(0); // records name the decode worker
  });

  it('short prompts run whole on decode workers', () => {
    const workload = coldPrompts({ count: 10, intervalMs: 100, promptTokens: [100, 200], outputTokens: [4, 8], seed: 2 });
    const result = simulate(workload, {
      label: 's',
      selection: policyOf('kv'),
      workers: 3,
      engine,
      eventDelayMs: 0,
      arrivalSpeedup: 1,
      seed: 0,
      disaggregation: { prefillWorkers: 1, minRemotePrefillTokens: 512 },
    });
    expect(result.records.every((r) => r.outcome === 'completed' && r.worker >= 1)).toBe(true);
    expect(result.engines[0]!.admittedPromptTokens).toBe(0);
  });

  it('names a fleet with no decode worker', () => {
    const workload = coldPrompts({ count: 1, seed: 1 });
    expect(() =>
      simulate(workload, { label: 'x', selection: policyOf('kv'), workers: 2, eventDelayMs: 0, arrivalSpeedup: 1, seed: 0, disaggregation: { prefillWorkers: 2, minRemotePrefillTokens: 1 } }),
    ).toThrow(/prefillWorkers must leave at least one of the 2 workers to decode, got 2/);
  });
});
