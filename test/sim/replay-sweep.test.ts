// The load sweep and the capacity search, on runs whose TTFT p90 is a
// known function of the load, so every bracket and probe can be checked by
// hand; and the same search on real replays, run serially and on worker
// threads.
import { describe, expect, it } from 'vitest';
import type { PolicyRun } from '../../sim/replay/replay.js';
import { checkLoads, MAX_EXTENSIONS, sweep, type LoadJob } from '../../sim/replay/sweep.js';

/** A run whose only figures are its load and a TTFT p90 of p90(load) (null: nothing completed). */
function fakeRun(job: LoadJob, p90: number | null): PolicyRun {
  return { report: { policy: job.label, arrival_speedup: job.arrivalSpeedup, completed: p90 === null ? 0 : 10, ttft_ms: { p90 } } } as unknown as PolicyRun;
}

/** Runs every job with its policy's p90 curve, and records what was asked for. */
function fakeRunner(curves: Record<string, (load: number) => number | null>) {
  const asked: LoadJob[][] = [];
  const run = async (jobs: readonly LoadJob[]) => {
    asked.push([...jobs]);
    return jobs.map((j) => fakeRun(j, curves[j.label]!(j.arrivalSpeedup)));
  };
  return { run, asked };
}

const policy = (label: string) => ({ label, policy: label });

describe('the capacity search', () => {
  it('bisects between the last load that meets the SLO and the first that misses it, to the precision', async () => {
    // p90 = 150 ms per unit of load: the SLO of 1000 ms is crossed at 6.67.
    const { run, asked } = fakeRunner({ a: (x) => 150 * x });
    const { runs, capacities } = await sweep([policy('a')], [1, 2, 4, 8], { ttftP90Ms: 1000, precision: 0.05 }, run);
    expect(runs[0]!.loads.map((r) => r.report.arrival_speedup)).toEqual([1, 2, 4, 8]);
    const c = capacities[0]!;
    expect(c.status).toBe('found');
    const [lo, hi] = c.bracket as [number, number];
    expect(lo).toBeLessThanOrEqual(1000 / 150);
    expect(hi).toBeGreaterThan(1000 / 150);
    expect(hi / lo).toBeLessThanOrEqual(1.05);
    expect(c.capacity).toBe(lo);
    // Each probe halves the octave [4, 8] in log scale: 4 * 2^(k / 2^m).
    const probes = c.probes.map((p) => p.arrival_speedup).filter((x) => x > 4 && x < 8);
    for (const x of probes) {
      const k = Math.log2(x / 4) * 16;
      expect(Math.abs(k - Math.round(k))).toBeLessThan(1e-9);
    }
    // log2(2) / log2(1.05) = 14.2 steps of 5% in an octave: ceil(log2(14.2)) = 4 bisections, one per round.
    expect(probes).toHaveLength(4);
    expect(asked.map((round) => round.length)).toEqual([4, 1, 1, 1, 1]);
    expect(c.probes.map((p) => p.meets_slo)).toEqual(c.probes.map((p) => 150 * p.arrival_speedup <= 1000));
  });

  it('a tighter precision takes more probes and a narrower bracket', async () => {
    const { run } = fakeRunner({ a: (x) => 150 * x });
    const { capacities } = await sweep([policy('a')], [1, 2, 4, 8], { ttftP90Ms: 1000, precision: 0.01 }, run);
    const [lo, hi] = capacities[0]!.bracket as [number, number];
    expect(hi / lo).toBeLessThanOrEqual(1.01);
    expect(lo).toBeLessThanOrEqual(1000 / 150);
    expect(hi).toBeGreaterThan(1000 / 150);
    expect(capacities[0]!.probes.length).toBe(4 + 7); // ceil(log2(log2(2) / log2(1.01))) = 7
  });

  it('extends the bracket upwards by doubling when every load meets the SLO', async () => {
    const { run } = fakeRunner({ a: (x) => 20 * x }); // crosses at 50
    const { capacities } = await sweep([policy('a')], [1, 2], { ttftP90Ms: 1000, precision: 0.05 }, run);
    const c = capacities[0]!;
    // 4, 8, 16 and 32 meet it, 64 does not: the bracket is [32, 64], then bisected.
    expect(c.status).toBe('found');
    expect(c.probes.map((p) => p.arrival_speedup).filter((x) => Number.isInteger(Math.log2(x)))).toEqual([1, 2, 4, 8, 16, 32, 64]);
    expect(c.bracket[0]!).toBeGreaterThanOrEqual(32);
    expect(c.bracket[0]!).toBeLessThanOrEqual(50);
    expect(c.bracket[1]!).toBeGreaterThan(50);
  });

  it('gives a lower bound when even 32x the top load meets the SLO', async () => {
    expect(MAX_EXTENSIONS).toBe(5);
    const { run } = fakeRunner({ a: () => 5 });
    const { capacities } = await sweep([policy('a')], [1, 2], { ttftP90Ms: 1000, precision: 0.05 }, run);
    expect(capacities[0]).toMatchObject({ status: 'above', capacity: 64, bracket: [64, null] });
    expect(capacities[0]!.probes.map((p) => p.arrival_speedup)).toEqual([1, 2, 4, 8, 16, 32, 64]);
  });

  it('extends downwards by halving when no load meets it, and reports none when nothing ever does', async () => {
    const { run } = fakeRunner({ a: (x) => 4000 * x, never: () => null });
    const { capacities } = await sweep([policy('a'), policy('never')], [1, 2], { ttftP90Ms: 1000, precision: 0.05 }, run);
    const [a, never] = capacities;
    expect(a!.status).toBe('found');
    expect(a!.bracket[0]!).toBeLessThanOrEqual(0.25);
    expect(a!.bracket[1]!).toBeGreaterThan(0.25);
    expect(never).toMatchObject({ status: 'below', capacity: null, bracket: [null, 1 / 32] });
  });

  it('takes the first crossing when p90 is not monotonic in load', async () => {
    // Misses the SLO at 2x only.
    const { run } = fakeRunner({ a: (x) => (x === 2 ? 5000 : 100) });
    const { capacities } = await sweep([policy('a')], [1, 2, 4, 8], { ttftP90Ms: 1000, precision: 0.05 }, run);
    const [lo, hi] = capacities[0]!.bracket as [number, number];
    expect(lo).toBeGreaterThanOrEqual(1);
    expect(hi).toBeLessThanOrEqual(2);
  });

  it('searches every policy in the same rounds, one probe each', async () => {
    const { run, asked } = fakeRunner({ a: (x) => 150 * x, b: (x) => 300 * x });
    const { capacities } = await sweep([policy('a'), policy('b')], [1, 2, 4, 8], { ttftP90Ms: 1000, precision: 0.05 }, run);
    expect(capacities.map((c) => c.policy)).toEqual(['a', 'b']);
    expect(asked[0]!.map((j) => `${j.label}@${j.arrivalSpeedup}`)).toEqual(['a@1', 'a@2', 'a@4', 'a@8', 'b@1', 'b@2', 'b@4', 'b@8']);
    expect(asked.slice(1).every((round) => round.length <= 2 && new Set(round.map((j) => j.label)).size === round.length)).toBe(true);
    expect(capacities[1]!.capacity!).toBeLessThan(capacities[0]!.capacity!);
  });

  it('without an SLO replays the sweep and searches nothing', async () => {
    const { run, asked } = fakeRunner({ a: (x) => 150 * x });
    const result = await sweep([policy('a')], [2, 1], null, run);
    expect(result.capacities).toEqual([]);
    expect(asked).toHaveLength(1);
    expect(result.runs[0]!.loads.map((r) => r.report.arrival_speedup)).toEqual([1, 2]);
  });

  it('rejects loads and SLOs it cannot use', async () => {
    const { run } = fakeRunner({ a: () => 1 });
    expect(() => checkLoads([])).toThrow(/at least one/);
    expect(() => checkLoads([1, 0])).toThrow(/> 0, got 0/);
    expect(() => checkLoads([1, 2, 1])).toThrow(/1 is given twice/);
    await expect(sweep([policy('a')], [1, 2], { ttftP90Ms: 0, precision: 0.05 }, run)).rejects.toThrow(/SLO/);
    await expect(sweep([policy('a')], [1, 2], { ttftP90Ms: 100, precision: 0 }, run)).rejects.toThrow(/precision/);
  });
});
