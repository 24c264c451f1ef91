// The replay scenarios, scaled down (a small fleet, a short run): the
// direction of each effect they exist to show, the figures they are read by,
// and how they take their options.
import { describe, expect, it } from 'vitest';
import { agentSessions } from '../../sim/replay/agent-sessions.js';
import { coldPrompts } from '../../sim/replay/cold-prompts.js';
import { buildScenario, figureTable, runScenario, scenarioJson, type ScenarioResult } from '../../sim/replay/scenarios.js';
import { programContextTokens } from '../../sim/replay/scenarios-agents.js';
import { coldBacklogMax, coldTtftThirds } from '../../sim/replay/scenarios-cold-pool.js';
import type { RequestRecord } from '../../sim/replay/simulate.js';

const byLabel = (results: ScenarioResult[]) => Object.fromEntries(results.map((r) => [r.spec.label, r]));

function coldRecord(arrivalMs: number, firstTokenMs: number | null): RequestRecord {
  return {
    id: `c${arrivalMs}`,
    sessionId: null,
    tag: 'cold',
    worker: 0,
    arrivalMs,
    dispatchMs: arrivalMs,
    firstTokenMs,
    endMs: firstTokenMs ?? arrivalMs,
    promptTokens: 10,
    cachedTokens: 0,
    outputTokens: 1,
    preemptions: 0,
    recomputedTokens: 0,
    outcome: firstTokenMs === null ? 'failed' : 'completed',
    error: null,
  };
}

describe('scenario cold-pool, scaled down (3 workers, 2 simulated minutes)', () => {
  // A pool of one (a third of 3 workers); a cold prompt every 5 s is about
  // 0.7 of a worker of prefill, which one member sustains.
  const sustainable = byLabel(runScenario(buildScenario('cold-pool', { workers: 3, seed: 1, durationS: 120, coldIntervalMs: 5000 }), { workers: 3, seed: 1 }));
  const pool = sustainable['cold-pool']!;
  const baseline = sustainable.baseline!;
  const coldWorkers = (r: ScenarioResult) => new Set(r.run.records.filter((x) => x.tag === 'cold').map((x) => x.worker));

  it('Cold Pool cuts the warm p99 ITL against its workers: 0 baseline at a rate the pool sustains', () => {
    expect(pool.figures.warm_itl_p99_ms!).toBeLessThan(baseline.figures.warm_itl_p99_ms! * 0.8);
  });

  it('keeps every cold prompt on its pool, while the baseline spreads them', () => {
    expect(coldWorkers(pool).size).toBe(1);
    expect(coldWorkers(baseline).size).toBeGreaterThan(1);
  });

  it('at a sustainable rate the cold backlog stays small and cold TTFT does not grow over the run', () => {
    expect(pool.figures.cold_backlog_max!).toBeLessThanOrEqual(2);
    expect(pool.figures.cold_ttft_last_third_ms!).toBeLessThan(pool.figures.cold_ttft_first_third_ms! * 1.5);
  });

  it('past the pool prefill capacity, cold TTFT grows with the run and the backlog builds', () => {
    const [overrun] = runScenario(buildScenario('cold-pool', { workers: 3, seed: 1, durationS: 60, coldIntervalMs: 2000 }), { workers: 3, seed: 1 });
    expect(overrun!.figures.cold_ttft_last_third_ms!).toBeGreaterThan(overrun!.figures.cold_ttft_first_third_ms! * 2);
    expect(overrun!.figures.cold_backlog_max!).toBeGreaterThanOrEqual(5);
  });

  it('splits the report by tag: every request is warm or cold, and all of them completed', () => {
    for (const r of [pool, baseline]) {
      const { warm, cold } = r.report.by_tag;
      expect(warm!.requests + cold!.requests).toBe(r.report.requests);
      expect([warm!.completed, cold!.completed]).toEqual([warm!.requests, cold!.requests]);
      expect(r.figures.warm_ttft_p99_ms).toBe(warm!.ttft_ms.p99);
      expect(r.figures.cold_ttft_p50_ms).toBe(cold!.ttft_ms.p50);
    }
  });

  it('prints the run, its classifier and figures ahead of the usual report fields', () => {
    const line = scenarioJson(pool);
    expect(Object.keys(line).slice(0, 6)).toEqual(['scenario', 'run', 'policy', 'classifier', 'figures', 'workers']);
    expect(line).toMatchObject({ scenario: 'cold-pool', run: 'cold-pool', policy: 'kv', classifier: { type: 'cold_pool', params: { request_threshold: 100_000, workers: 2 } } });
    expect(scenarioJson(baseline).classifier).toEqual({ type: 'cold_pool', params: { request_threshold: 100_000, workers: 0 } });
    const table = figureTable([pool, baseline]);
    expect(table.head).toEqual(['figure', 'cold-pool', 'baseline']);
    expect(table.rows.find((r) => r[0] === 'warm_itl_p99_ms')).toEqual(['warm_itl_p99_ms', String(pool.figures.warm_itl_p99_ms), String(baseline.figures.warm_itl_p99_ms)]);
  });
});

describe('scenario agents, scaled down (2 workers, 32 programs)', () => {
  const results = byLabel(runScenario(buildScenario('agents', { workers: 2, seed: 2 }), { workers: 2, seed: 2 }));
  const agent = results.thunderagent!;
  const plain = results.default!;

  it('the programs together need more KV than the fleet has', () => {
    const scenario = buildScenario('agents', { workers: 2, seed: 2 });
    expect(programContextTokens(scenario.workload)).toBeGreaterThan(2 * scenario.engine.numBlocks! * 64);
  });

  it('ThunderAgent cuts recomputation: fewer prefill tokens, more reuse, no more preemptions than the default', () => {
    expect(agent.figures.programs).toBe(32);
    expect(plain.figures.programs).toBe(32);
    expect(agent.figures.prefill_tokens!).toBeLessThan(plain.figures.prefill_tokens! * 0.7);
    expect(agent.figures.prefix_cache_reused_ratio!).toBeGreaterThan(plain.figures.prefix_cache_reused_ratio!);
    expect(agent.figures.preemptions!).toBeLessThanOrEqual(plain.figures.preemptions!);
  });

  it('on a cache small enough for the default to preempt, ThunderAgent cuts preemptions and their recomputed tokens', () => {
    const tight = byLabel(runScenario(buildScenario('agents', { workers: 2, seed: 2 }), { workers: 2, seed: 2, engine: { numBlocks: 1536 } }));
    expect(tight.default!.figures.recomputed_tokens!).toBeGreaterThan(0);
    expect(tight.thunderagent!.figures.recomputed_tokens!).toBeLessThan(tight.default!.figures.recomputed_tokens!);
    expect(tight.thunderagent!.figures.preemptions!).toBeLessThan(tight.default!.figures.preemptions!);
  });

  it('reports each program from its first arrival to its last token', () => {
    for (const r of [agent, plain]) {
      expect(r.report.program_e2e_ms.p50).toBe(r.figures.program_e2e_p50_ms);
      const turns = r.run.records.filter((x) => x.sessionId === 'agent0');
      const span = Math.max(...turns.map((x) => x.endMs)) - Math.min(...turns.map((x) => x.arrivalMs));
      expect(r.report.program_e2e_ms.mean! * 32).toBeGreaterThanOrEqual(span);
      expect(r.figures.program_e2e_p99_ms!).toBeGreaterThanOrEqual(r.figures.program_e2e_p50_ms!);
    }
  });
});

describe('scenario figures', () => {
  it('cold backlog: the most cold prompts arrived and still without a first token', () => {
    expect(coldBacklogMax([coldRecord(0, 10), coldRecord(5, 20), coldRecord(6, 30), coldRecord(25, 40)])).toBe(3);
    // One answered the moment another arrives has left first.
    expect(coldBacklogMax([coldRecord(0, 10), coldRecord(10, 20)])).toBe(1);
    expect(coldBacklogMax([])).toBe(0);
  });

  it('cold TTFT thirds: the mean of the first and last third by arrival, none below three prompts', () => {
    expect(coldTtftThirds([coldRecord(0, 100), coldRecord(10, 130), coldRecord(20, 320)])).toEqual([100, 300]);
    expect(coldTtftThirds([coldRecord(0, 100), coldRecord(10, 130)])).toEqual([null, null]);
    expect(coldTtftThirds([coldRecord(0, null), coldRecord(10, 130), coldRecord(20, 320)])).toEqual([null, 300]);
  });
});

describe('building scenarios', () => {
  it('an unknown scenario, or an option it does not take, is an error naming it', () => {
    expect(() => buildScenario('nope', { workers: 2, seed: 0 })).toThrow(/unknown scenario "nope" \(known: cold-pool, agents\)/);
    expect(() => buildScenario('agents', { workers: 2, seed: 0, coldIntervalMs: 5 })).toThrow(/scenario agents does not take coldIntervalMs/);
    expect(() => buildScenario('cold-pool', { workers: 2, seed: 0, programs: 5 })).toThrow(/scenario cold-pool does not take programs/);
    expect(() => buildScenario('cold-pool', { workers: 2, seed: 0, coldIntervalMs: 0 })).toThrow(/coldIntervalMs must be a number of ms > 0, got 0/);
    expect(() => buildScenario('cold-pool', { workers: 2, seed: 0, durationS: -1 })).toThrow(/durationS must be a number of seconds > 0/);
    expect(() => buildScenario('agents', { workers: 2, seed: 0, programs: 1.5 })).toThrow(/programs must be an integer >= 1, got 1.5/);
  });

  it('cold-pool: cold prompts from 2/15 of the run at the interval, warm load scaled to the fleet', () => {
    const s = buildScenario('cold-pool', { workers: 4, seed: 0, durationS: 150, coldIntervalMs: 10_000 });
    const cold = s.workload.requests.filter((r) => r.tag === 'cold');
    expect(cold.map((r) => ('atMs' in r.arrival ? r.arrival.atMs : NaN))).toEqual([20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 90_000, 100_000, 110_000, 120_000, 130_000, 140_000]);
    expect(cold.every((r) => r.inputLength === 160_000)).toBe(true);
    // One warm session per second per 8 workers: every 2 s on 4.
    const starts = s.workload.requests.filter((r) => r.tag === 'warm' && 'atMs' in r.arrival);
    expect(starts).toHaveLength(75);
    expect(Math.max(...s.workload.requests.filter((r) => r.tag === 'warm').map((r) => r.inputLength))).toBeLessThan(100_000);
    expect(buildScenario('cold-pool', { workers: 4, seed: 0, durationS: 150, warmGapMs: 1000 }).workload.requests.filter((r) => r.tag === 'warm' && 'atMs' in r.arrival)).toHaveLength(150);
  });

  it('agents: sixteen programs per worker unless told, on 4,096-block engines', () => {
    const s = buildScenario('agents', { workers: 3, seed: 0 });
    expect(new Set(s.workload.requests.map((r) => r.sessionId)).size).toBe(48);
    expect(s.engine).toEqual({ numBlocks: 4096 });
    expect(new Set(buildScenario('agents', { workers: 3, seed: 0, programs: 5 }).workload.requests.map((r) => r.sessionId)).size).toBe(5);
    expect(s.runs.map((r) => [r.label, r.classifier?.type ?? null])).toEqual([
      ['thunderagent', 'thunderagent'],
      ['default', null],
    ]);
  });

  it('generators tag their requests, and a tag can be chosen', () => {
    expect(new Set(agentSessions({ sessions: 2 }).requests.map((r) => r.tag))).toEqual(new Set(['agent']));
    expect(new Set(coldPrompts({ count: 2, tag: 'doc' }).requests.map((r) => r.tag))).toEqual(new Set(['doc']));
    expect(() => coldPrompts({ tag: '' })).toThrow(/tag must be a non-empty string/);
  });
});
