// Replays one workload once per routing policy, each time with a fresh router
// and fresh engines, and summarises every run. What the CLI, the benchmark and
// the tests call.
import { resolveEngineShape } from '../mocker/engine-options.js';
import { wasmChainedHashes } from './engine-hasher.js';
import { distribution, idealPrefixHits, reuseShare } from './metrics.js';
import { policyList, policyOf } from './policy-spec.js';
import { summarize, type IdealFigures, type PolicyReport } from './report.js';
import { checkReplayOptions, simulate, type FleetEngineShape, type ReplayRouterOptions, type SimulateOptions, type SimulationResult } from './simulate.js';
import { fleetLruHits } from './fleet-lru.js';
import { ttftFloors } from './ttft-floor.js';
import { checkWorkload, type Workload } from './workload.js';

/**
 * Default delay between an engine publishing KV events and the router applying
 * them: a vLLM publisher sends at the end of each step and a router on the same
 * network decodes them within a few milliseconds.
 */
export const DEFAULT_EVENT_DELAY_MS = 5;

export interface ReplayOptions {
  /** Policy specs (policy-spec.ts): a name, optionally with parameters, e.g. "kv:overlap_credit=2:temperature=0.1"; "all" for every built-in one. */
  policies: readonly string[];
  workers: number;
  engine?: Partial<FleetEngineShape>;
  /** What the router credits a cached block in each storage tier. */
  tierWeights?: SimulateOptions['tierWeights'];
  eventDelayMs?: number;
  arrivalSpeedup?: number;
  seed?: number;
  /** Admission settings, made fresh for each run (a classifier keeps state). */
  router?: () => ReplayRouterOptions;
  /** Progress of each run, named by its label (the policy spec for replay()). */
  onProgress?(label: string, finished: number, total: number): void;
}

export interface PolicyRun {
  report: PolicyReport;
  run: SimulationResult;
}

/** One run of a comparison: a selection policy with its own admission settings. */
export interface ReplayRun {
  /** Name the run is reported under. */
  label: string;
  /** Policy spec, as for ReplayOptions.policies. */
  policy: string;
  /** Admission settings, made fresh for the run (a classifier keeps state). */
  router?: () => ReplayRouterOptions;
  /** This run's arrival speed-up, in place of the options' (one load of a sweep). */
  arrivalSpeedup?: number;
}

export type ReplayRunOptions = Omit<ReplayOptions, 'policies' | 'router'>;

/** The settings every run of a comparison shares, with the defaults filled in and checked. */
export type RunSettings = Required<Pick<ReplayRunOptions, 'workers' | 'eventDelayMs' | 'arrivalSpeedup' | 'seed'>> & Pick<ReplayRunOptions, 'engine' | 'tierWeights'>;

export function runSettings(options: ReplayRunOptions): RunSettings {
  const settings = {
    workers: options.workers,
    eventDelayMs: options.eventDelayMs ?? DEFAULT_EVENT_DELAY_MS,
    arrivalSpeedup: options.arrivalSpeedup ?? 1,
    seed: options.seed ?? 0,
    engine: options.engine,
    tierWeights: options.tierWeights,
  };
  checkReplayOptions(settings);
  resolveEngineShape({ ...settings.engine });
  return settings;
}

/**
 * The ideal figures of a workload on the engines (the same for every run and
 * load); the fleet LRU's too when `fleetWorkers` is given. That pass costs
 * several times the ideal's (a recency list of every block), so only the
 * command line, which prints it, asks for it.
 */
export function idealFigures(workload: Workload, engine: Partial<FleetEngineShape> | undefined, fleetWorkers?: number): IdealFigures {
  const shape = resolveEngineShape({ ...engine });
  const hashBlocks = wasmChainedHashes();
  const prompts = workload.requests.map((r) => r.inputLength);
  const at = (hits: Float64Array) => ({
    reuse: reuseShare(workload, hits),
    ttft: distribution(Array.from(ttftFloors(prompts, hits, shape.maxBatchedTokens, shape.speedup))),
  });
  const ideal = at(idealPrefixHits(workload, shape.blockSize, hashBlocks));
  const fleetLru = fleetWorkers === undefined ? null : at(fleetLruHits(workload, shape.blockSize, fleetWorkers * shape.numBlocks, hashBlocks));
  return { ...ideal, fleetLru };
}

/** One run: a fresh router and fresh engines replay the whole workload. */
export function replayOne(workload: Workload, run: ReplayRun, settings: RunSettings, ideal: IdealFigures, onProgress?: (finished: number, total: number) => void): PolicyRun {
  const arrivalSpeedup = run.arrivalSpeedup ?? settings.arrivalSpeedup;
  const result = simulate(workload, {
    workers: settings.workers,
    eventDelayMs: settings.eventDelayMs,
    seed: settings.seed,
    engine: settings.engine,
    tierWeights: settings.tierWeights,
    arrivalSpeedup,
    label: run.label,
    // Fresh per run: policies such as round-robin keep state between decisions.
    selection: policyOf(run.policy),
    router: run.router?.(),
    onProgress,
  });
  return { report: summarize(result, ideal), run: result };
}

export function replay(workload: Workload, options: ReplayOptions): PolicyRun[] {
  const { policies, router, ...rest } = options;
  return replayRuns(
    workload,
    policyList(policies).map((spec) => ({ label: spec.label, policy: spec.label, router })),
    rest,
  );
}

/** Replays the workload once per run, each with a fresh router and fresh engines. */
export function replayRuns(workload: Workload, runs: readonly ReplayRun[], options: ReplayRunOptions): PolicyRun[] {
  const settings = runSettings(options);
  checkWorkload(workload);
  if (runs.length === 0) throw new RangeError('give at least one policy');
  // Every spec is checked before the first (long) run starts.
  for (const r of runs) policyOf(r.policy);
  const ideal = idealFigures(workload, settings.engine);
  const progress = options.onProgress;
  return runs.map((r) => replayOne(workload, r, settings, ideal, progress && ((finished, total) => progress(r.label, finished, total))));
}
