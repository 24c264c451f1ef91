// Named replay scenarios: a generated workload, the runs to compare on it
// (each a selection policy with or without a request classifier) and the
// engine shape that makes the point. `kvrouter replay --scenario NAME` runs
// one; each run is summarised by the usual report plus the few figures the
// scenario is read by. docs/scenarios.md has the measured tables.
import { createClassifier } from '../../router/plugins/classifiers.js';
import type { RoutedRequest } from '../../router/model-fleet.js';
import { replayRuns, type PolicyRun, type ReplayRunOptions } from './replay.js';
import { AGENTS_SCENARIO } from './scenarios-agents.js';
import { COLD_POOL_SCENARIO } from './scenarios-cold-pool.js';
import type { FleetEngineShape } from './simulate.js';
import type { Workload } from './workload.js';

/** A request classifier as router configs name it (`request_classifier: {type, params}`). */
export interface ClassifierSpec {
  type: string;
  params: Record<string, number | boolean | string>;
}

export interface ScenarioRun {
  /** Name the run is reported under. */
  label: string;
  /** Selection policy spec (as `--policy` takes it). */
  policy: string;
  /** null: the default admission (no classifier, no gate). */
  classifier: ClassifierSpec | null;
}

/** The figures a scenario is read by, from one run; null when there is nothing to measure. */
export type ScenarioFigures = Record<string, number | null>;

export interface Scenario {
  name: string;
  workload: Workload;
  runs: readonly ScenarioRun[];
  /** The engine shape the scenario needs (the rest are the engine defaults). */
  engine: Partial<FleetEngineShape>;
  /** Every parameter the scenario chose, for reports. */
  settings: Record<string, string | number>;
  figures(run: PolicyRun): ScenarioFigures;
}

/** What a caller may choose about a scenario; each scenario takes only the options it names. */
export interface ScenarioOptions {
  workers: number;
  seed: number;
  /** Length of the workload in simulated seconds (cold-pool). */
  durationS?: number;
  /** Time between cold prompts (cold-pool). */
  coldIntervalMs?: number;
  /** Mean gap between warm session starts (cold-pool); sets the warm load. */
  warmGapMs?: number;
  /** Agent programs to run (agents). */
  programs?: number;
}

/** The options a scenario may take (workers and seed apply to every one). */
export const SCENARIO_OPTIONS = ['durationS', 'coldIntervalMs', 'warmGapMs', 'programs'] as const;
export type ScenarioOption = (typeof SCENARIO_OPTIONS)[number];

export interface ScenarioDefinition {
  /** One line: what the scenario shows. */
  summary: string;
  /** The optional settings it takes. */
  options: readonly ScenarioOption[];
  build(options: ScenarioOptions): Scenario;
}

export const SCENARIOS: Readonly<Record<string, ScenarioDefinition>> = Object.freeze({
  'cold-pool': COLD_POOL_SCENARIO,
  agents: AGENTS_SCENARIO,
});

/** Builds a named scenario; an unknown name, or an option the scenario does not take, is a RangeError naming it. */
export function buildScenario(name: string, options: ScenarioOptions): Scenario {
  const definition = Object.hasOwn(SCENARIOS, name) ? SCENARIOS[name] : undefined;
  if (!definition) throw new RangeError(`unknown scenario "${name}" (known: ${Object.keys(SCENARIOS).join(', ')})`);
  for (const key of SCENARIO_OPTIONS) {
    if (options[key] !== undefined && !definition.options.includes(key)) {
      throw new RangeError(`scenario ${name} does not take ${key} (it takes: ${definition.options.join(', ') || 'nothing'})`);
    }
  }
  return definition.build(options);
}

export interface ScenarioResult extends PolicyRun {
  scenario: string;
  spec: ScenarioRun;
  figures: ScenarioFigures;
}

/**
 * Replays the scenario once per run. `options.engine` overrides the
 * scenario's engine shape field by field (for sweeps from the command line).
 */
export function runScenario(scenario: Scenario, options: ReplayRunOptions): ScenarioResult[] {
  const runs = scenario.runs.map((spec) => ({
    label: spec.label,
    policy: spec.policy,
    router: spec.classifier ? routerWith(spec.classifier) : undefined,
  }));
  const engine = { ...scenario.engine, ...definedOnly(options.engine ?? {}) };
  return replayRuns(scenario.workload, runs, { ...options, engine }).map((run, i) => ({
    ...run,
    scenario: scenario.name,
    spec: scenario.runs[i]!,
    figures: scenario.figures(run),
  }));
}

/** The `--json` line of one run: who it was, the scenario's figures, then the usual report fields. */
export function scenarioJson(result: ScenarioResult): Record<string, unknown> {
  const { policy: _label, ...report } = result.report;
  return {
    scenario: result.scenario,
    run: result.spec.label,
    policy: result.spec.policy,
    classifier: result.spec.classifier,
    figures: result.figures,
    ...report,
  };
}

function routerWith(spec: ClassifierSpec) {
  // A fresh classifier per run: it keeps the ledger of the fleet it serves.
  return () => ({ classifier: createClassifier<RoutedRequest>(spec.type, spec.params) });
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The figures of every run side by side: one row per figure, one column per run. */
export function figureTable(results: readonly ScenarioResult[]): { head: string[]; rows: string[][] } {
  const names = results.length > 0 ? Object.keys(results[0]!.figures) : [];
  return {
    head: ['figure', ...results.map((r) => r.spec.label)],
    rows: names.map((name) => [name, ...results.map((r) => String(r.figures[name] ?? '-'))]),
  };
}
