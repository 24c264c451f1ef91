// End to end: a steady stream of short (Warm) requests over six workers, and a
// long uncached (Cold) prompt arriving in the middle, through the real
// ModelRouter on virtual time. Engines answer after a fixed time per kind.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { ModelRouter } from '../../router/model-router.js';
import type { RoutedRequest } from '../../router/model-fleet.js';
import { coldPool } from '../../router/plugins/cold-pool/index.js';
import { defaultCostPolicy } from '../../router/selection/policies/default-cost.js';

interface Run {
  id: string;
  kind: 'warm' | 'cold';
  arrived: number;
  dispatched?: number;
  worker?: string;
  completed?: number;
}

const WARM_EVERY_MS = 50;
const WARM_MS = 600;
const COLD_MS = 2000;
const COLD_AT = 1000;
const SOFT_DRAIN_MS = 3000;

function simulate(poolWorkers = 2, policy = defaultCostPolicy()) {
  const clock = new VirtualClock(0);
  const pool = coldPool<RoutedRequest>({ requestThreshold: 2000, workers: poolWorkers, softDrainTimeoutMs: SOFT_DRAIN_MS });
  const route = new ModelRouter({ model: 'mixed', blockSize: 16, clock, seed: 3, classifier: pool, sweepIntervalMs: 0, policy });
  const workers = ['n0', 'n1', 'n2', 'n3', 'n4', 'n5'];
  for (const id of workers) route.addWorker({ id, totalBlocks: 4096, maxBatchedTokens: 8192 });
  const runs: Run[] = [];
  let n = 0;
  const submit = (kind: Run['kind'], length: number) => {
    const run: Run = { id: `${kind}${n++}`, kind, arrived: clock.now() };
    runs.push(run);
    const tokens = Array.from({ length }, (_, i) => n * 1_000_000 + i);
    const fields = { id: run.id, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null };
    route.submit(fields, tokens, {
      dispatch: (a) => {
        run.dispatched = clock.now();
        run.worker = a.worker.id;
        route.sent(run.id, a.worker);
        const ms = kind === 'warm' ? WARM_MS : COLD_MS;
        clock.at(clock.now() + ms / 4, () => route.firstToken(run.id));
        clock.at(clock.now() + ms, () => {
          run.completed = clock.now();
          route.completed(run.id);
        });
      },
      reject: (error) => {
        throw error;
      },
    });
  };
  for (let t = 0; t < 6000; t += WARM_EVERY_MS) clock.at(t, () => submit('warm', 300));
  clock.at(COLD_AT, () => submit('cold', 6000));
  clock.runAll(100_000);
  return { runs, pool, route, members: pool.poolMembers(), workers };
}

/** Warm runs on `worker` that overlap the time `at`. */
const warmRunningAt = (runs: Run[], worker: string, at: number) =>
  runs.filter((r) => r.kind === 'warm' && r.worker === worker && r.dispatched! < at && r.completed! > at);

describe('Cold Pool end to end', () => {
  const { runs, pool, route, members, workers } = simulate();
  const cold = runs.find((r) => r.kind === 'cold')!;
  const warm = runs.filter((r) => r.kind === 'warm');
  const between = (from: number, to: number) => warm.filter((r) => r.arrived >= from && r.arrived < to);

  it('a cold prompt waits for a drained pool member, within the soft-drain timeout', () => {
    expect(members).toHaveLength(2);
    expect(members).toContain(cold.worker);
    expect(cold.dispatched!).toBeGreaterThan(cold.arrived);
    expect(cold.dispatched! - cold.arrived).toBeLessThan(SOFT_DRAIN_MS);
    // It went the moment the last Warm request on its member completed, and landed on no Warm work.
    const drained = warm.filter((r) => r.worker === cold.worker && r.dispatched! < cold.dispatched!);
    expect(Math.max(...drained.map((r) => r.completed!))).toBe(cold.dispatched);
    expect(warmRunningAt(runs, cold.worker!, cold.dispatched!)).toEqual([]);
  });

  it('warm traffic keeps flowing on the other workers while the cold prompt waits', () => {
    const waiting = between(COLD_AT, cold.dispatched!);
    expect(waiting.length).toBeGreaterThanOrEqual(5);
    for (const r of waiting) {
      expect(r.dispatched).toBe(r.arrived);
      expect(members).not.toContain(r.worker);
    }
  });

  it('while the cold prompt runs, warm traffic avoids only its worker, and returns to it afterwards', () => {
    const during = between(cold.dispatched!, cold.completed!);
    for (const r of during) {
      expect(r.dispatched).toBe(r.arrived);
      expect(r.worker).not.toBe(cold.worker);
    }
    const otherMember = members.find((m) => m !== cold.worker);
    expect(during.some((r) => r.worker === otherMember)).toBe(true);
    expect(between(cold.completed!, Infinity).some((r) => r.worker === cold.worker)).toBe(true);
  });

  it('leaves nothing behind', () => {
    expect(runs.every((r) => r.completed !== undefined)).toBe(true);
    expect(new Set(warm.map((r) => r.worker))).toEqual(new Set(workers));
    expect(pool.snapshot()).toMatchObject({ pendingCold: 0, warm: {}, cold: {} });
    expect(route.fleet.bookedRequests).toBe(0);
  });

  it('the baseline (workers: 0) sends the cold prompt at once, onto warm work', () => {
    const base = simulate(0);
    const baseCold = base.runs.find((r) => r.kind === 'cold')!;
    expect(base.members).toEqual([]);
    expect(baseCold.dispatched).toBe(baseCold.arrived);
    expect(warmRunningAt(base.runs, baseCold.worker!, baseCold.dispatched!).length).toBeGreaterThan(0);
  });
});
