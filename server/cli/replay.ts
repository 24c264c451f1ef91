// `kvrouter replay`: replays a Mooncake trace (or a generated workload) in
// virtual time through the real router and N simulated engines, once per
// --policy and arrival speed-up, and compares the policies: a table for
// people, --json (one line per run, and per policy its capacity at the TTFT
// SLO when the speed-up is a list) for machines, --report for a
// self-contained HTML page. `--scenario NAME` replays a named scenario
// instead: its own workload, runs (policy and classifier each) and engine
// shape, with its key figures.
import { writeFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { PluginConfigError } from '../../router/plugins/params.js';
import { SELECTION_POLICIES } from '../../router/selection/policies/index.js';
import { ENGINE_DEFAULTS, resolveEngineShape, type EngineShape } from '../../sim/mocker/engine-options.js';
import { GENERATORS } from '../../sim/replay/generators.js';
import { renderHtmlReport, type HtmlReportInput } from '../../sim/replay/html-report.js';
import { MOONCAKE_BLOCK_SIZE, TraceError, writeMooncakeTrace } from '../../sim/replay/mooncake.js';
import { PARAM_SEPARATOR, policyList } from '../../sim/replay/policy-spec.js';
import { ProgressBar } from '../../sim/replay/progress.js';
import { DEFAULT_EVENT_DELAY_MS, idealFigures, runSettings } from '../../sim/replay/replay.js';
import { compareDisaggregation } from '../../sim/replay/disagg-compare.js';
import { TRANSFER_DEFAULTS } from '../../sim/mocker/kv-handoff.js';
import { DISAGG_DEFAULTS } from '../config/disaggregation.js';
import { defaultJobs, RunPool, serialRunner } from '../../sim/replay/run-pool.js';
import { buildScenario, figureTable, runScenario, SCENARIOS, scenarioJson, type ScenarioOption, type ScenarioOptions } from '../../sim/replay/scenarios.js';
import type { FleetEngineShape } from '../../sim/replay/simulate.js';
import { checkLoads, DEFAULT_CAPACITY_PRECISION, DEFAULT_SLO_TTFT_MS, sweep, type Slo } from '../../sim/replay/sweep.js';
import { formatComparison, formatRows, formatSweep } from '../../sim/replay/table.js';
import { checkWorkload } from '../../sim/replay/workload.js';
import { loadWorkload, WorkloadSourceError, type WorkloadSource } from '../../sim/replay/workload-source.js';
import { BAD_INPUT, count, integer, listOf, positive, real } from './options.js';

export interface ReplayCommandOptions {
  trace?: string;
  workload?: string;
  scenario?: string;
  durationS?: number;
  coldIntervalMs?: number;
  warmGapMs?: number;
  programs?: number;
  workers: number;
  policy: string[];
  blockSize: number;
  traceBlockSize: number;
  arrivalSpeedup: number[];
  sloTtftMs: number;
  capacityPrecision: number;
  jobs: number;
  writeTrace?: string;
  engineSpeedup: number;
  eventDelayMs: number;
  numBlocks: number;
  maxBatchedTokens: number;
  maxNumSeqs: number;
  seed: number;
  limit?: number;
  json?: boolean;
  report?: string;
  /** Compare an aggregated fleet with one of this many prefill workers (the rest decode). */
  prefillWorkers?: number;
  minRemotePrefillTokens?: number;
  kvBytesPerToken?: number;
  kvBandwidth?: number;
  offloadBlocks?: number;
  offloadLoadMsPerToken?: number;
  cpuTierWeight?: number;
}

/** Thrown for input the user can fix; reported without a stack trace. */
class BadInput extends Error {}

const seed = integer(0);
const millis = real(0, Infinity, 'a number of ms >= 0');
const ratio = real(0.001, 1, 'a number between 0.001 and 1');
const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];
/** One speed-up, or a comma-separated list of them (a sweep). */
const speedups = listOf(positive, 'a number > 0, or a comma-separated list of them');

/** The scenario settings, by the flag that sets each. */
const SCENARIO_FLAGS: Readonly<Record<ScenarioOption, string>> = {
  durationS: '--duration-s',
  coldIntervalMs: '--cold-interval-ms',
  warmGapMs: '--warm-gap-ms',
  programs: '--programs',
};

/** Engine flags and the shape field each sets. */
const ENGINE_FLAGS: Readonly<Record<string, keyof FleetEngineShape>> = {
  numBlocks: 'numBlocks',
  blockSize: 'blockSize',
  maxBatchedTokens: 'maxBatchedTokens',
  maxNumSeqs: 'maxNumSeqs',
  engineSpeedup: 'speedup',
  offloadBlocks: 'offloadBlocks',
  offloadLoadMsPerToken: 'offloadLoadMsPerToken',
};

/** Whether the user typed the flag (rather than taking its default). */
export type Explicit = (key: keyof ReplayCommandOptions) => boolean;

/** A scenario replay as the flags ask for it. */
export interface ScenarioFlags {
  name: string;
  options: ScenarioOptions;
  /** Engine fields typed on the command line: they override the scenario's shape. */
  engine: Partial<FleetEngineShape>;
}

function workloadSource(o: ReplayCommandOptions): WorkloadSource {
  const common = { traceBlockSize: o.traceBlockSize, limit: o.limit };
  return o.trace !== undefined ? { kind: 'trace', path: o.trace, ...common } : { kind: 'generated', spec: o.workload!, seed: o.seed, ...common };
}

async function run(o: ReplayCommandOptions, explicit: Explicit): Promise<void> {
  const scenario = scenarioFlags(o, explicit);
  if (scenario) replayScenario(o, scenario);
  else await replayPolicies(o, explicit);
}

/**
 * Checks the input flags: exactly one input, and scenario flags only with a
 * scenario that takes them. Returns the scenario replay they ask for, or
 * null for a trace or workload replay.
 */
export function scenarioFlags(o: ReplayCommandOptions, explicit: Explicit): ScenarioFlags | null {
  const inputs = [o.trace, o.workload, o.scenario].filter((v) => v !== undefined).length;
  if (inputs !== 1) throw new BadInput('give exactly one of --trace FILE, --workload NAME or --scenario NAME');
  const given = (Object.keys(SCENARIO_FLAGS) as ScenarioOption[]).filter((key) => o[key] !== undefined);
  const name = o.scenario;
  if (name === undefined) {
    if (given.length > 0) throw new BadInput(`${SCENARIO_FLAGS[given[0]!]} needs --scenario NAME`);
    return null;
  }
  const definition = Object.hasOwn(SCENARIOS, name) ? SCENARIOS[name] : undefined;
  if (!definition) throw new BadInput(`unknown --scenario "${name}" (known: ${Object.keys(SCENARIOS).join(', ')})`);
  if (o.policy.length > 0) throw new BadInput('--policy does not apply to --scenario: a scenario names the runs it compares');
  if (o.arrivalSpeedup.length !== 1) throw new BadInput('--arrival-speedup takes one value with --scenario');
  if (o.writeTrace !== undefined) throw new BadInput('--write-trace does not apply to --scenario');
  if (o.limit !== undefined) throw new BadInput(`--limit does not apply to --scenario (make it smaller with ${definition.options.map((k) => SCENARIO_FLAGS[k]).join(' or ')})`);
  const foreign = given.find((key) => !definition.options.includes(key));
  if (foreign) throw new BadInput(`${SCENARIO_FLAGS[foreign]} does not apply to --scenario ${name}`);
  const engine: Partial<FleetEngineShape> = {};
  for (const [flag, field] of Object.entries(ENGINE_FLAGS)) {
    if (explicit(flag as keyof ReplayCommandOptions)) engine[field] = o[flag as keyof ReplayCommandOptions] as number;
  }
  const options: ScenarioOptions = { workers: o.workers, seed: o.seed };
  for (const key of given) options[key] = o[key];
  return { name, options, engine };
}

async function replayPolicies(o: ReplayCommandOptions, explicit: Explicit): Promise<void> {
  const policies = policyList(o.policy.length > 0 ? o.policy : ['ttft']);
  const source = workloadSource(o);
  const workload = loadWorkload(source);
  if (o.writeTrace !== undefined) return writeTrace(o.writeTrace, writeMooncakeTrace(workload), workload.requests.length);
  checkWorkload(workload);
  const loads = checkLoads(o.arrivalSpeedup);
  // A list of loads sweeps, and a sweep finds the capacity; so does naming an SLO.
  const slo: Slo | null = loads.length > 1 || explicit('sloTtftMs') || explicit('capacityPrecision') ? { ttftP90Ms: o.sloTtftMs, precision: o.capacityPrecision } : null;
  const engine = {
    numBlocks: o.numBlocks,
    blockSize: o.blockSize,
    maxBatchedTokens: o.maxBatchedTokens,
    maxNumSeqs: o.maxNumSeqs,
    speedup: o.engineSpeedup,
    offloadBlocks: o.offloadBlocks,
    offloadLoadMsPerToken: o.offloadLoadMsPerToken,
  };
  if (o.prefillWorkers !== undefined) return replayDisaggregation(o, workload, engine, policies.map((p) => p.label), loads, slo);
  const tierWeights = o.cpuTierWeight === undefined ? undefined : { cpu: o.cpuTierWeight };
  const settings = runSettings({ workers: o.workers, engine, tierWeights, eventDelayMs: o.eventDelayMs, seed: o.seed });
  const ideal = idealFigures(workload, engine, o.workers);
  const progress = new ProgressBar(process.stderr);
  const onProgress = (label: string, done: number, total: number) => progress.update(label, done, total);
  // Worker threads pay off only when there is more than one run.
  const several = policies.length * loads.length > 1 || slo !== null;
  const pool = o.jobs > 1 && several ? new RunPool(o.jobs, { source, settings, ideal }, onProgress) : null;
  let result;
  try {
    result = await sweep(policies.map((p) => ({ label: p.label, policy: p.label })), loads, slo, pool?.run ?? serialRunner(workload, settings, ideal, onProgress));
  } finally {
    await pool?.close();
  }
  progress.clear();
  const all = result.runs.flatMap((p) => p.loads);
  const sweeping = slo !== null;
  if (o.json) {
    const lines = [...all.map((r) => ({ kind: 'run', ...r.report })), ...result.capacities.map((c) => ({ kind: 'capacity', ...c }))];
    process.stdout.write(lines.map((l) => JSON.stringify(l) + '\n').join(''));
  } else {
    const head = `${workload.name}: ${workload.requests.length} requests, ${o.workers} workers`;
    process.stdout.write(`${head}\n\n${sweeping ? formatSweep(result) : formatComparison(all.map((r) => r.report))}\n`);
  }
  if (o.report !== undefined) {
    const common = commonSettings(o, resolveEngineShape(engine));
    writeReport(o.report, {
      title: `kvrouter replay: ${workload.name}`,
      settings: { workload: `${workload.name} (${workload.requests.length} requests)`, ...common },
      runs: sweeping ? [] : all,
      sweep: sweeping ? result : undefined,
    });
  }
}

/** --prefill-workers: the workload through an aggregated fleet and a disaggregated one of the same size. */
function replayDisaggregation(o: ReplayCommandOptions, workload: ReturnType<typeof loadWorkload>, engine: Partial<FleetEngineShape>, policies: string[], loads: number[], slo: Slo | null): void {
  if (policies.length !== 1) throw new BadInput('--prefill-workers compares two fleets under one --policy');
  if (loads.length !== 1 || slo !== null) throw new BadInput('--prefill-workers takes one --arrival-speedup and no SLO');
  if (o.report !== undefined) throw new BadInput('--report does not apply to --prefill-workers');
  if (o.prefillWorkers! >= o.workers) throw new BadInput(`--prefill-workers ${o.prefillWorkers} leaves none of the ${o.workers} --workers to decode`);
  const progress = new ProgressBar(process.stderr);
  const reports = compareDisaggregation(workload, {
    workers: o.workers,
    prefillWorkers: o.prefillWorkers!,
    minRemotePrefillTokens: o.minRemotePrefillTokens ?? DISAGG_DEFAULTS.minRemotePrefillTokens,
    transfer: { kvBytesPerToken: o.kvBytesPerToken, kvBandwidth: o.kvBandwidth },
    policy: policies[0],
    engine,
    eventDelayMs: o.eventDelayMs,
    arrivalSpeedup: loads[0],
    seed: o.seed,
    onProgress: (label, done, total) => progress.update(label, done, total),
  });
  progress.clear();
  if (o.json) process.stdout.write(reports.map((r) => JSON.stringify({ kind: 'run', ...r }) + '\n').join(''));
  else process.stdout.write(`${workload.name}: ${workload.requests.length} requests, ${o.workers} workers\n\n${formatComparison(reports)}\n`);
}

function writeTrace(path: string, text: string, requests: number): void {
  try {
    writeFileSync(path, text);
  } catch (error) {
    throw new BadInput(`cannot write --write-trace ${path}: ${(error as Error).message}`);
  }
  process.stderr.write(`kvrouter replay: wrote ${requests} requests to ${path}\n`);
}

function replayScenario(o: ReplayCommandOptions, flags: ScenarioFlags): void {
  const { name, engine: overrides } = flags;
  const scenario = buildScenario(name, flags.options);
  const progress = new ProgressBar(process.stderr);
  const results = runScenario(scenario, {
    workers: o.workers,
    engine: overrides,
    eventDelayMs: o.eventDelayMs,
    arrivalSpeedup: o.arrivalSpeedup[0],
    seed: o.seed,
    onProgress: (label, done, total) => progress.update(label, done, total),
  });
  progress.clear();
  const figures = figureTable(results);
  const settings = { ...scenario.settings, ...commonSettings(o, resolveEngineShape({ ...scenario.engine, ...overrides })) };
  if (o.json) process.stdout.write(results.map((r) => JSON.stringify(scenarioJson(r)) + '\n').join(''));
  else {
    const head = `scenario ${name}: ${SCENARIOS[name]!.summary}\n${scenario.workload.requests.length} requests`;
    const lines = Object.entries(settings).map(([k, v]) => `  ${k}: ${v}`);
    process.stdout.write([head, ...lines, '', formatRows(figures.head, figures.rows), '', formatComparison(results.map((r) => r.report)), ''].join('\n'));
  }
  if (o.report !== undefined) writeReport(o.report, { title: `kvrouter replay --scenario ${name}`, settings, runs: results, figures });
}

function commonSettings(o: ReplayCommandOptions, shape: EngineShape): Record<string, string | number> {
  return {
    workers: o.workers,
    engine: `${shape.numBlocks} blocks x ${shape.blockSize} tokens, budget ${shape.maxBatchedTokens} tokens, ${shape.maxNumSeqs} seqs, speedup ${shape.speedup}`,
    'arrival speedup': o.arrivalSpeedup.join(', '),
    'KV event delay': `${o.eventDelayMs} ms`,
    seed: o.seed,
  };
}

function writeReport(path: string, input: HtmlReportInput): void {
  try {
    writeFileSync(path, renderHtmlReport(input));
  } catch (error) {
    throw new BadInput(`cannot write --report ${path}: ${(error as Error).message}`);
  }
  process.stderr.write(`kvrouter replay: wrote ${path}\n`);
}

export function registerReplay(program: Command): void {
  const d = ENGINE_DEFAULTS;
  program
    .command('replay')
    .description('replay a Mooncake trace in virtual time through the router and simulated engines, once per --policy and arrival speed-up, and compare')
    .option('--trace <file>', 'Mooncake JSONL trace (timestamp or delay, input_length, output_length, hash_ids, session_id)')
    .option('--workload <specs>', `a generated workload instead of a trace: ${Object.keys(GENERATORS).join(', ')}; options as name${PARAM_SEPARATOR}key=value${PARAM_SEPARATOR}..., several joined with +`)
    .option('--scenario <name>', `a named scenario instead (its own workload, runs and engine shape): ${Object.keys(SCENARIOS).join(', ')}`)
    .option('--duration-s <s>', 'scenario cold-pool: simulated seconds of workload', positive)
    .option('--cold-interval-ms <ms>', 'scenario cold-pool: time between cold prompts', positive)
    .option('--warm-gap-ms <ms>', 'scenario cold-pool: mean gap between warm session starts (default 8000 / workers)', positive)
    .option('--programs <n>', 'scenario agents: agent programs to run', count)
    .option('--workers <n>', 'simulated engine workers', count, 8)
    .option('--policy <specs>', `selection policy, repeatable or comma-separated (${Object.keys(SELECTION_POLICIES).join(', ')}, all); parameters as name${PARAM_SEPARATOR}key=value${PARAM_SEPARATOR}key=value; without it: ttft`, collect, [])
    .option('--block-size <n>', 'KV block size of the engines and the router', count, d.blockSize)
    .option('--trace-block-size <n>', 'tokens each trace hash id stands for', count, MOONCAKE_BLOCK_SIZE)
    .addOption(
      new Option('--arrival-speedup <x>', "divide arrival times and session pauses by x; a comma-separated list sweeps the loads and finds each policy's capacity")
        .argParser(speedups)
        .default([1], '1'),
    )
    .option('--slo-ttft-ms <ms>', 'the TTFT p90 target the capacity is found at', positive, DEFAULT_SLO_TTFT_MS)
    .option('--capacity-precision <r>', 'bisect the capacity until the bracket is within this fraction', ratio, DEFAULT_CAPACITY_PRECISION)
    .option('--jobs <n>', 'replay up to n runs at once, on worker threads', count, defaultJobs())
    .option('--write-trace <file>', 'write the workload as a Mooncake JSONL trace and exit (replay it later with --trace)')
    .option('--engine-speedup <x>', 'divide every modelled engine step time by x', positive, d.speedup)
    .option('--event-delay-ms <ms>', 'delay between an engine publishing KV events and the router applying them', millis, DEFAULT_EVENT_DELAY_MS)
    .option('--num-blocks <n>', 'KV cache blocks per engine', count, d.numBlocks)
    .option('--max-batched-tokens <n>', 'token budget of one engine step', count, d.maxBatchedTokens)
    .option('--max-num-seqs <n>', 'most requests running at once per engine', count, d.maxNumSeqs)
    .option('--offload-blocks <n>', 'blocks of each engine\'s host-memory offload tier, which it loads prefixes back from (0: none)', integer(0), d.offloadBlocks)
    .option('--offload-load-ms-per-token <ms>', 'time to load one token\'s KV from the offload tier to the GPU', millis, d.offloadLoadMsPerToken)
    .option('--cpu-tier-weight <w>', "what the router credits a block in a worker's CPU tier (tier_weights.cpu; default 0.75)", real(0, 1, 'a number in [0, 1]'))
    .option('--seed <n>', "seed of the router's random choices (and of generated workloads)", seed, 0)
    .option('--limit <n>', 'replay only the first n requests', count)
    .option('--json', 'print one JSON object per run (then per policy its capacity, when sweeping), one per line')
    .option('--report <file>', 'write a self-contained HTML report comparing the policies')
    .option('--prefill-workers <n>', 'compare the --workers fleet running whole requests with the same fleet split into n prefill workers and the rest decode', count)
    .option('--min-remote-prefill-tokens <n>', 'with --prefill-workers: uncached prompt tokens at or above which a request splits', seed, DISAGG_DEFAULTS.minRemotePrefillTokens)
    .option('--kv-bytes-per-token <n>', 'with --prefill-workers: KV bytes per token sent from prefill to decode', count, TRANSFER_DEFAULTS.kvBytesPerToken)
    .option('--kv-bandwidth <bytes/s>', 'with --prefill-workers: bytes per second between a prefill and a decode worker', positive, TRANSFER_DEFAULTS.kvBandwidth)
    .action(async function (this: Command, options: ReplayCommandOptions) {
      try {
        await run(options, (key) => this.getOptionValueSource(key) === 'cli');
      } catch (error) {
        const bad = [BadInput, TraceError, WorkloadSourceError, PluginConfigError, RangeError, TypeError];
        if (bad.some((kind) => error instanceof kind)) {
          this.error(`error: ${(error as Error).message}`, { exitCode: BAD_INPUT, code: 'kvrouter.badInput' });
        }
        throw error;
      }
    });
}
