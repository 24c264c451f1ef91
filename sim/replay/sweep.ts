// Latency against load: every policy replayed at each arrival speed-up of a
// sweep, and each policy's capacity at a TTFT SLO, the highest speed-up at
// which its TTFT p90 stays at or under the SLO, found by bisection.
//
// The bracket. The sweep's own loads are read first, lowest up: the
// capacity lies between the last load of the leading run of loads that meet
// the SLO and the first load that does not. When every load meets it, the
// bracket is extended upwards by doubling the top load, at most
// MAX_EXTENSIONS times; when none does, downwards by halving the lowest.
// Then the bracket [lo, hi] is bisected at its geometric midpoint (loads
// scale multiplicatively) until hi / lo <= 1 + precision; the capacity is
// lo, a load that was measured to meet the SLO. A policy whose p90 is not
// monotonic in load gets the first crossing, which is what "stays under"
// means.
//
// Every probe is a full replay and a pure function of (policy, load), so the
// search is deterministic however the runs are scheduled: each round asks
// for one probe per policy still searching, and the caller may run them in
// parallel.
import type { PolicyRun } from './replay.js';

export const DEFAULT_SLO_TTFT_MS = 1000;
/**
 * Default width of the final bracket, relative: the capacity is within 5% of
 * the crossing, four or five runs per octave of the sweep. Policies judged by
 * capacity ratios of 1.15x or more are told apart at that resolution.
 */
export const DEFAULT_CAPACITY_PRECISION = 0.05;
/** Doublings (or halvings) past the sweep's loads before the search gives up: 32x either way. */
export const MAX_EXTENSIONS = 5;

/** One replay of a sweep: a policy at a load. */
export interface LoadJob {
  /** The run's label (the policy's canonical spec). */
  label: string;
  policy: string;
  arrivalSpeedup: number;
}

/** Runs a batch of jobs (in any order, in parallel if it likes) and returns their runs in job order. */
export type RunJobs = (jobs: readonly LoadJob[]) => Promise<PolicyRun[]>;

export interface Slo {
  ttftP90Ms: number;
  /** Stop when the bracket's hi / lo is at most 1 + precision. */
  precision: number;
}

/** A load the capacity search measured, with the figures it went by. */
export interface Probe {
  arrival_speedup: number;
  ttft_p90_ms: number | null;
  meets_slo: boolean;
}

export interface Capacity {
  policy: string;
  slo_ttft_p90_ms: number;
  precision: number;
  /**
   * found: the highest measured load meeting the SLO, within precision of
   * the first one that does not. above: every load tried meets it (capacity is
   * a lower bound). below: none does (capacity is null).
   */
  status: 'found' | 'above' | 'below';
  capacity: number | null;
  /** [the capacity, the lowest load found to miss the SLO]; a side is null when no such load was measured. */
  bracket: [number | null, number | null];
  /** Every load measured for the policy (the sweep's and the search's), ascending. */
  probes: Probe[];
}

export interface SweepResult {
  /** Per policy, in the order given, its runs at the sweep's loads, ascending. */
  runs: { label: string; loads: PolicyRun[] }[];
  /** Per policy, in the same order; empty without an SLO. */
  capacities: Capacity[];
}

export function meetsSlo(run: PolicyRun, slo: Slo): boolean {
  const p90 = run.report.ttft_ms.p90;
  return run.report.completed > 0 && p90 !== null && p90 <= slo.ttftP90Ms;
}

/** Checks a list of loads; returns it ascending. */
export function checkLoads(loads: readonly number[]): number[] {
  if (loads.length === 0) throw new RangeError('give at least one arrival speed-up');
  for (const x of loads) if (!Number.isFinite(x) || x <= 0) throw new RangeError(`an arrival speed-up must be a finite number > 0, got ${x}`);
  const sorted = [...loads].sort((a, b) => a - b);
  for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) throw new RangeError(`arrival speed-up ${sorted[i]} is given twice`);
  return sorted;
}

export function checkSlo(slo: Slo): void {
  if (!Number.isFinite(slo.ttftP90Ms) || slo.ttftP90Ms <= 0) throw new RangeError(`the TTFT SLO must be a number of ms > 0, got ${slo.ttftP90Ms}`);
  if (!Number.isFinite(slo.precision) || slo.precision < 0.001 || slo.precision > 1) {
    throw new RangeError(`the capacity precision must be between 0.001 and 1, got ${slo.precision}`);
  }
}

/** One policy's capacity search: the next load to measure, until the bracket is narrow enough. */
class CapacitySearch {
  private readonly measured = new Map<number, Probe>();
  private lo: number | null = null;
  private hi: number | null = null;
  private extensions = 0;

  constructor(
    readonly job: Omit<LoadJob, 'arrivalSpeedup'>,
    private readonly slo: Slo,
  ) {}

  /** Takes the sweep's runs and sets the first bracket from them. */
  start(loads: readonly number[], runs: readonly PolicyRun[]): void {
    runs.forEach((run, i) => this.measure(loads[i]!, run));
    const miss = loads.findIndex((_, i) => !meetsSlo(runs[i]!, this.slo));
    this.lo = miss === 0 ? null : loads[miss < 0 ? loads.length - 1 : miss - 1]!;
    this.hi = miss < 0 ? null : loads[miss]!;
  }

  /** The load to measure next, or null when the search is over. */
  next(): number | null {
    const { lo, hi } = this;
    if (lo !== null && hi !== null) return hi / lo <= 1 + this.slo.precision ? null : Math.sqrt(lo * hi);
    if (this.extensions >= MAX_EXTENSIONS) return null;
    return hi === null ? lo! * 2 : hi / 2;
  }

  record(load: number, run: PolicyRun): void {
    if (this.lo === null || this.hi === null) this.extensions++;
    if (this.measure(load, run).meets_slo) this.lo = load;
    else this.hi = load;
  }

  private measure(load: number, run: PolicyRun): Probe {
    const probe = { arrival_speedup: load, ttft_p90_ms: run.report.ttft_ms.p90, meets_slo: meetsSlo(run, this.slo) };
    this.measured.set(load, probe);
    return probe;
  }

  result(): Capacity {
    const { lo, hi, slo } = this;
    const probes = [...this.measured.values()].sort((a, b) => a.arrival_speedup - b.arrival_speedup);
    return {
      policy: this.job.label,
      slo_ttft_p90_ms: slo.ttftP90Ms,
      precision: slo.precision,
      status: lo === null ? 'below' : hi === null ? 'above' : 'found',
      capacity: lo,
      bracket: [lo, hi],
      probes,
    };
  }
}

/**
 * Replays every policy at every load, then (with an SLO) searches each
 * policy's capacity. Runs go to `run` in rounds: first the whole sweep, then
 * one probe per policy still searching.
 */
export async function sweep(policies: readonly Omit<LoadJob, 'arrivalSpeedup'>[], loads: readonly number[], slo: Slo | null, run: RunJobs): Promise<SweepResult> {
  const sorted = checkLoads(loads);
  if (slo) checkSlo(slo);
  const jobs = policies.flatMap((p) => sorted.map((arrivalSpeedup) => ({ ...p, arrivalSpeedup })));
  const done = await run(jobs);
  const runs = policies.map((p, i) => ({ label: p.label, loads: done.slice(i * sorted.length, (i + 1) * sorted.length) }));
  if (!slo) return { runs, capacities: [] };
  const searches = policies.map((p, i) => {
    const search = new CapacitySearch(p, slo);
    search.start(sorted, runs[i]!.loads);
    return search;
  });
  for (;;) {
    const round = searches.flatMap((search) => {
      const load = search.next();
      return load === null ? [] : [{ search, load }];
    });
    if (round.length === 0) break;
    const probed = await run(round.map(({ search, load }) => ({ ...search.job, arrivalSpeedup: load })));
    round.forEach(({ search, load }, i) => search.record(load, probed[i]!));
  }
  return { runs, capacities: searches.map((s) => s.result()) };
}
