// Replays one workload once per routing policy, each time with a fresh router
// and fresh engines, and summarises every run. What the CLI, the benchmark and
// the tests call.
import { createSelectionPolicy } from '../../router/plugins/selection/index.js';
import type { SelectionPolicy } from '../../router/selection/contracts.js';
import { resolveEngineShape } from '../mocker/engine-options.js';
import { wasmChainedHashes } from './engine-hasher.js';
import { idealPrefixReuse } from './metrics.js';
import { summarize, type PolicyReport } from './report.js';
import { checkReplayOptions, simulate, type FleetEngineShape, type ReplayRouterOptions, type SimulationResult } from './simulate.js';
import { checkWorkload, type Workload } from './workload.js';

/**
 * Default delay between an engine publishing KV events and the router applying
 * them: a vLLM publisher sends at the end of each step and a router on the same
 * network decodes them within a few milliseconds.
 */
export const DEFAULT_EVENT_DELAY_MS = 5;

export interface ReplayOptions {
  /** Policy specs: a name, optionally with parameters, e.g. "kv:overlap_credit=2,temperature=0.1". */
  policies: readonly string[];
  workers: number;
  engine?: Partial<FleetEngineShape>;
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

export interface PolicySpec {
  name: string;
  params: Record<string, number | boolean | string>;
}

/** "name" or "name:key=value,key=value"; numbers and true/false are typed, anything else is a string. */
export function parsePolicySpec(spec: string): PolicySpec {
  const colon = spec.indexOf(':');
  const name = (colon < 0 ? spec : spec.slice(0, colon)).trim();
  if (name === '') throw new RangeError(`policy "${spec}" has no name`);
  const params: PolicySpec['params'] = {};
  if (colon >= 0) {
    for (const pair of spec.slice(colon + 1).split(',')) {
      const eq = pair.indexOf('=');
      const key = pair.slice(0, Math.max(0, eq)).trim();
      if (eq < 0 || key === '') throw new RangeError(`policy "${spec}": expected key=value, got "${pair}"`);
      const text = pair.slice(eq + 1).trim();
      params[key] = text === 'true' ? true : text === 'false' ? false : text !== '' && Number.isFinite(Number(text)) ? Number(text) : text;
    }
  }
  return { name, params };
}

function policyOf(spec: string): SelectionPolicy {
  const { name, params } = parsePolicySpec(spec);
  return createSelectionPolicy(name, params);
}

/** One run of a comparison: a selection policy with its own admission settings. */
export interface ReplayRun {
  /** Name the run is reported under. */
  label: string;
  /** Policy spec, as for ReplayOptions.policies. */
  policy: string;
  /** Admission settings, made fresh for the run (a classifier keeps state). */
  router?: () => ReplayRouterOptions;
}

export type ReplayRunOptions = Omit<ReplayOptions, 'policies' | 'router'>;

export function replay(workload: Workload, options: ReplayOptions): PolicyRun[] {
  const { policies, router, ...rest } = options;
  return replayRuns(
    workload,
    policies.map((spec) => ({ label: spec, policy: spec, router })),
    rest,
  );
}

/** Replays the workload once per run, each with a fresh router and fresh engines. */
export function replayRuns(workload: Workload, runs: readonly ReplayRun[], options: ReplayRunOptions): PolicyRun[] {
  const common = {
    workers: options.workers,
    eventDelayMs: options.eventDelayMs ?? DEFAULT_EVENT_DELAY_MS,
    arrivalSpeedup: options.arrivalSpeedup ?? 1,
    seed: options.seed ?? 0,
  };
  checkReplayOptions(common);
  checkWorkload(workload);
  if (runs.length === 0) throw new RangeError('give at least one policy');
  // Every spec is checked before the first (long) run starts.
  for (const r of runs) policyOf(r.policy);
  const shape = resolveEngineShape({ ...options.engine });
  const ideal = idealPrefixReuse(workload, shape.blockSize, wasmChainedHashes());
  return runs.map((r) => {
    const run = simulate(workload, {
      ...common,
      label: r.label,
      // Fresh per run: policies such as round-robin keep state between decisions.
      selection: policyOf(r.policy),
      router: r.router?.(),
      engine: options.engine,
      onProgress: options.onProgress && ((finished, total) => options.onProgress!(r.label, finished, total)),
    });
    return { report: summarize(run, ideal), run };
  });
}
