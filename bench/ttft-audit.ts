// The ttft estimate against the simulated engine's actual time to first token,
// request by request: what the router predicted on the worker it chose (from
// /router/explain's figures at arrival, before the request books), and what the
// engine did while the request waited (every step on that worker from its
// arrival to its first token, split into the timing model's parts). Prints,
// for all requests and for the slowest 1%, where the actual time went and
// how far the prediction was off in each part. A measuring tool: not on any
// product path.
//   node dist/bench/ttft-audit.js (trace FILE | workload SPEC) WORKERS LOAD [POLICY]
import { prefillMs } from '../sim/mocker/timing.js';
import type { StepReport } from '../sim/mocker/engine-options.js';
import { policyOf } from '../sim/replay/policy-spec.js';
import { simulate } from '../sim/replay/simulate.js';
import { idealPrefixHits } from '../sim/replay/metrics.js';
import { wasmChainedHashes } from '../sim/replay/engine-hasher.js';
import { prefillFloorMs } from '../sim/replay/ttft-floor.js';
import { firstStepAfter, waitBreakdown, type WaitBreakdown } from '../sim/replay/ttft-audit.js';
import { loadWorkload, type WorkloadSource } from '../sim/replay/workload-source.js';

const [kind, input, workersArg, loadArg, policyArg] = process.argv.slice(2);
const source: WorkloadSource =
  kind === 'trace' ? { kind: 'trace', path: input!, traceBlockSize: 512 } : { kind: 'generated', spec: input!, seed: 0, traceBlockSize: 512 };
const workers = Number(workersArg);
const load = Number(loadArg);
const workload = loadWorkload(source);

interface Prediction {
  /** Predicted ms on each worker (explain's predictedTtftMs), and the router's cached tokens there. */
  ms: number[];
  cached: number[];
}
const predictions: Prediction[] = [];
const steps: StepReport[][] = Array.from({ length: workers }, () => []);

const result = simulate(workload, {
  label: 'audit',
  selection: policyOf(policyArg ?? 'ttft'),
  workers,
  eventDelayMs: 5,
  arrivalSpeedup: load,
  seed: 0,
  audit: {
    arrival(index, route, fields, tokens) {
      const e = route.explain(fields, tokens);
      predictions[index] = {
        ms: e.workers.map((w) => w.predictedTtftMs ?? NaN),
        cached: e.workers.map((w) => w.cachedTokens),
      };
    },
    step(worker, step) {
      steps[worker]!.push(step);
    },
  },
});

// Per request, in arrival order on each worker: its wait, step by step.
interface Row extends WaitBreakdown {
  actual: number;
  predicted: number;
  ownUncached: number;
  routerUncached: number;
  /** Prefill tokens the worker computed while the request waited, its own excluded. */
  aheadTokens: number;
  prompt: number;
  /** The floors: its own uncached tokens prefilled alone, and the ideal reuse's. */
  ownFloor: number;
  idealFloor: number;
}
const rows: Row[] = [];
const ideal = idealPrefixHits(workload, 64, wasmChainedHashes());
const cursor = steps.map(() => 0);
const order = result.records.map((_, i) => i).sort((a, b) => result.records[a]!.arrivalMs - result.records[b]!.arrivalMs);
for (const i of order) {
  const r = result.records[i]!;
  if (r.firstTokenMs === null || r.worker < 0) continue;
  const p = predictions[i]!;
  const list = steps[r.worker]!;
  const from = (cursor[r.worker] = firstStepAfter(list, cursor[r.worker]!, r.arrivalMs));
  const wait = waitBreakdown(list, from, r.arrivalMs, r.firstTokenMs);
  const ownUncached = r.promptTokens - r.cachedTokens;
  rows.push({
    ...wait,
    actual: r.firstTokenMs - r.arrivalMs,
    predicted: p.ms[r.worker]!,
    ownUncached,
    routerUncached: r.promptTokens - p.cached[r.worker]!,
    aheadTokens: Math.max(0, wait.prefillTokens - ownUncached),
    prompt: r.promptTokens,
    ownFloor: prefillFloorMs(Math.max(1, ownUncached), 8192),
    idealFloor: prefillFloorMs(Math.max(1, r.promptTokens - ideal[i]!), 8192),
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
function summary(name: string, set: Row[]) {
  const f = (g: (r: Row) => number) => mean(set.map(g)).toFixed(1);
  console.log(
    `${name} n=${set.length} actual ${f((r) => r.actual)} predicted ${f((r) => r.predicted)} | error ${f((r) => r.actual - r.predicted)} ms` +
      ` | steps ${f((r) => r.steps)}: in-flight ${f((r) => r.inFlightMs)} fixed ${f((r) => r.fixedMs)} linear ${f((r) => r.linearMs)} quad ${f((r) => r.quadraticMs)} decode ${f((r) => r.decodeMs)} ms` +
      ` | floors own ${f((r) => r.ownFloor)} ideal ${f((r) => r.idealFloor)}` +
      ` | tokens: own ${f((r) => r.ownUncached)} (router ${f((r) => r.routerUncached)}) ahead ${f((r) => r.aheadTokens)} prompt ${f((r) => r.prompt)}`,
  );
}
const byActual = [...rows].sort((a, b) => b.actual - a.actual);
summary('all      ', rows);
summary('p90-p99  ', byActual.slice(Math.ceil(rows.length * 0.01), Math.ceil(rows.length * 0.1)));
summary('top 1%   ', byActual.slice(0, Math.ceil(rows.length * 0.01)));
summary('p98.5-99.5', byActual.slice(Math.floor(rows.length * 0.005), Math.ceil(rows.length * 0.015)));
// The tail as waiting: requests whose actual is over 1.5x their own prefill alone.
const waited = rows.filter((r) => r.ownUncached > 0 && r.actual > 1.5 * (prefillMs(Math.min(8192, r.ownUncached)) * Math.ceil(r.ownUncached / 8192)) && r.actual > 200);
summary('waited>1.5x', waited);
const underBy = [...rows].sort((a, b) => b.actual - b.predicted - (a.actual - a.predicted));
summary('most under', underBy.slice(0, Math.ceil(rows.length * 0.01)));
summary('cache miss', rows.filter((r) => r.ownUncached > r.routerUncached + 512));
// What the p99 would be with no waiting at all (each request's own uncached tokens prefilled alone), and at the ideal reuse.
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(0.99 * xs.length) - 1]!.toFixed(0);
console.log(`p99 actual ${p99(rows.map((r) => r.actual))} own-floor ${p99(rows.map((r) => r.ownFloor))} ideal-floor ${p99(rows.map((r) => r.idealFloor))}; reuse ${(1 - rows.reduce((a, r) => a + r.ownUncached, 0) / rows.reduce((a, r) => a + r.prompt, 0)).toFixed(3)}`);
