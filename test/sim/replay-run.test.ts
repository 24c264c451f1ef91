// End-to-end replays on small traces and fleets: the real router and mock
// engines in virtual time.
import { describe, expect, it } from 'vitest';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';
import { agentSessions } from '../../sim/replay/agent-sessions.js';
import { coldPrompts } from '../../sim/replay/cold-prompts.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { replay, type ReplayOptions } from '../../sim/replay/replay.js';
import { simulate } from '../../sim/replay/simulate.js';
import { mergeWorkloads } from '../../sim/replay/workload.js';
import { jsonl, sharedDocumentTrace } from './replay-fixtures.js';

const documents = parseMooncakeTrace(jsonl(sharedDocumentTrace({ requests: 70, documents: 7, docBlocks: 8, blockSize: 64, gapMs: 250 })), {
  traceBlockSize: 64,
  source: 'docs',
});
const base: ReplayOptions = { policies: ['kv'], workers: 4, engine: { blockSize: 16, numBlocks: 4096 }, eventDelayMs: 5 };

describe('replay through the router and mock engines', () => {
  const [kv, rr] = replay(documents, { ...base, policies: ['kv', 'round-robin'] });

  it('finishes every request of the trace', () => {
    for (const r of [kv!, rr!]) expect([r.report.completed, r.report.rejected, r.report.failed]).toEqual([70, 0, 0]);
  });

  it('kv reuses far more of the prompt than round-robin, close to the ideal', () => {
    const ideal = kv!.report.ideal_prefix_reuse_ratio;
    expect(ideal).toBeGreaterThan(0.7);
    expect(kv!.report.prefix_cache_reused_ratio).toBeGreaterThan(0.9 * ideal);
    expect(kv!.report.prefix_cache_reused_ratio).toBeGreaterThan(rr!.report.prefix_cache_reused_ratio + 0.2);
    expect(kv!.report.ttft_ms.mean!).toBeLessThan(rr!.report.ttft_ms.mean!);
  });

  it('the engines block size and the router agree: every stored event lands in the index', () => {
    const events = kv!.run.routerEvents;
    expect(events.stored).toBeGreaterThan(0);
    expect([events.skippedStores, events.blockSizeMismatches]).toEqual([0, 0]);
  });

  it('the router learns cache state only from KV events: delayed past the run, kv finds nothing', () => {
    const [blind] = replay(documents, { ...base, eventDelayMs: 1e9 });
    expect(blind!.report.prefix_cache_reused_ratio).toBeLessThan(kv!.report.prefix_cache_reused_ratio - 0.2);
  });

  it('round-robin spreads requests evenly over the workers', () => {
    expect(Object.values(rr!.report.per_worker).map((w) => w.requests)).toEqual([18, 18, 17, 17]);
  });
});

describe('arrival times', () => {
  const trace = parseMooncakeTrace(
    jsonl([
      { timestamp: 1000, session_id: 's', input_length: 100, output_length: 5, hash_ids: [1] },
      { delay: 3000, session_id: 's', input_length: 150, output_length: 2, hash_ids: [1] },
      { timestamp: 2000, input_length: 50, output_length: 1, hash_ids: [9] },
    ]),
    { traceBlockSize: 256 },
  );
  const run = (arrivalSpeedup: number) =>
    simulate(trace, { label: 'kv', selection: createSelectionPolicy('kv'), workers: 2, eventDelayMs: 0, arrivalSpeedup, seed: 0 }).records;

  it('a delayed turn arrives its delay after the previous turn of the session completed', () => {
    const [first, second, other] = run(1);
    expect(first!.arrivalMs).toBe(1000);
    expect(first!.endMs).toBeGreaterThan(first!.arrivalMs);
    expect(second!.arrivalMs).toBeCloseTo(first!.endMs + 3000, 9);
    expect(other!.arrivalMs).toBe(2000);
  });

  it('--arrival-speedup divides timestamps and session delays alike', () => {
    const [first, second, other] = run(4);
    expect(first!.arrivalMs).toBe(250);
    expect(second!.arrivalMs).toBeCloseTo(first!.endMs + 750, 9);
    expect(other!.arrivalMs).toBe(500);
  });
});

describe('determinism', () => {
  const workload = mergeWorkloads(
    'mixed',
    agentSessions({ sessions: 6, turns: [2, 4], systemPromptTokens: 512, taskTokens: [64, 256], toolResultTokens: [32, 256], outputTokens: [4, 16], toolPauseMs: [50, 500], sessionGapMs: 300, seed: 3 }),
    coldPrompts({ count: 3, intervalMs: 700, promptTokens: 3000, outputTokens: 4, seed: 3 }),
  );
  const options: ReplayOptions = { ...base, policies: ['kv', 'random', 'power-of-two', 'two-tier'], seed: 11 };
  const json = () => replay(workload, options).map((r) => JSON.stringify({ ...r.report, wall_ms: 0 }));

  it('the same workload, seed and options give byte-identical JSON apart from wall_ms', () => {
    const first = json();
    expect(json()).toEqual(first);
    expect(first).toHaveLength(4);
  });

  it('replays generated multi-turn agent sessions to completion, kv reusing near the ideal', () => {
    // Ties between idle workers are broken at random, so judge kv over a few seeds.
    const reuse: number[] = [];
    for (const seed of [11, 12, 13]) {
      const [kv, rr] = replay(workload, { ...base, policies: ['kv', 'round-robin'], seed });
      expect(kv!.report.completed).toBe(workload.requests.length);
      // Later turns extend earlier prompts: a cache-aware router keeps a session where its prefix is.
      expect(kv!.report.prefix_cache_reused_ratio).toBeGreaterThan(0.85 * kv!.report.ideal_prefix_reuse_ratio);
      expect(kv!.report.prefix_cache_reused_ratio).toBeGreaterThan(rr!.report.prefix_cache_reused_ratio + 0.05);
      reuse.push(kv!.report.prefix_cache_reused_ratio / kv!.report.ideal_prefix_reuse_ratio);
    }
    expect(reuse.reduce((a, b) => a + b) / reuse.length).toBeGreaterThan(0.9);
  });
});

describe('requests the fleet cannot serve', () => {
  it('a prompt no engine cache could hold fails alone; the rest complete', () => {
    const trace = parseMooncakeTrace(
      jsonl([
        { timestamp: 0, input_length: 100, output_length: 2, hash_ids: [1] },
        { timestamp: 5, input_length: 5000, output_length: 2, hash_ids: [2, 3, 4, 5, 6] },
        { timestamp: 10, input_length: 100, output_length: 2, hash_ids: [1] },
      ]),
      { traceBlockSize: 1024 },
    );
    const [kv] = replay(trace, { ...base, engine: { blockSize: 16, numBlocks: 64 } });
    expect(kv!.run.records.map((r) => r.outcome)).toEqual(['completed', 'failed', 'completed']);
    expect(kv!.run.records[1]!.error).toMatch(/KV blocks/);
    expect([kv!.report.completed, kv!.report.failed]).toEqual([2, 1]);
  });

  it('rejects bad options with messages naming them', () => {
    expect(() => replay(documents, { ...base, workers: 0 })).toThrow(/workers/);
    expect(() => replay(documents, { ...base, arrivalSpeedup: 0 })).toThrow(/arrivalSpeedup/);
    expect(() => replay(documents, { ...base, eventDelayMs: -1 })).toThrow(/eventDelayMs/);
    expect(() => replay(documents, { ...base, policies: ['kv', 'nope'] })).toThrow(/unknown selection policy "nope"/);
    expect(() => replay(documents, { ...base, policies: ['kv:overlap_credit=-1'] })).toThrow(/overlap_credit/);
    expect(() => replay(documents, { ...base, engine: { blockSize: 0 } })).toThrow(/blockSize/);
  });
});

describe('admission in the replayed router', () => {
  it('requests queued on busy workers wait in the scheduler, dispatch later, and count the wait in TTFT', () => {
    const busy = () => ({
      classes: [{ name: 'default', quantum: 4096, queuePolicy: 'fcfs' as const, busy: { prefillTokens: 1 }, queueLimit: { requests: null, tokens: null }, sloMs: null }],
      tickMs: 50,
    });
    // Every request arrives at once: with one prefill per worker allowed, most must queue.
    const burst = parseMooncakeTrace(jsonl(sharedDocumentTrace({ requests: 12, documents: 3, docBlocks: 4, blockSize: 64, gapMs: 0 })), { traceBlockSize: 64 });
    const [queued] = replay(burst, { ...base, workers: 2, router: busy });
    const [free] = replay(burst, { ...base, workers: 2 });
    expect(queued!.report.completed).toBe(12);
    const waited = queued!.run.records.filter((r) => r.dispatchMs! > r.arrivalMs);
    expect(waited.length).toBeGreaterThan(0);
    expect(free!.run.records.every((r) => r.dispatchMs === r.arrivalMs)).toBe(true);
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const records = queued!.run.records;
    expect(queued!.report.ttft_ms.mean!).toBeCloseTo(mean(records.map((r) => r.firstTokenMs! - r.arrivalMs)), 2);
    expect(queued!.report.ttft_ms.mean!).toBeGreaterThan(mean(records.map((r) => r.firstTokenMs! - r.dispatchMs!)));
  });
});
