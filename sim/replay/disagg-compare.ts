// Aggregated against disaggregated: one workload through two fleets of the
// same size, every worker running whole requests in the first, a split of
// prefill and decode workers in the second, on the same engines, router
// policy and seed. What `kvrouter replay --prefill-workers N` prints.
import type { KvTransferShape } from '../mocker/kv-handoff.js';
import { policyOf } from './policy-spec.js';
import { idealFigures, runSettings, type ReplayRunOptions } from './replay.js';
import { summarize, type PolicyReport } from './report.js';
import { simulate } from './simulate.js';
import { checkWorkload, type Workload } from './workload.js';

export interface DisaggComparison extends ReplayRunOptions {
  prefillWorkers: number;
  minRemotePrefillTokens: number;
  transfer?: Partial<KvTransferShape>;
  /** Selection policy spec of both runs (default kv). */
  policy?: string;
}

/** The aggregated run's report, then the disaggregated run's. */
export function compareDisaggregation(workload: Workload, options: DisaggComparison): [PolicyReport, PolicyReport] {
  const settings = runSettings(options);
  checkWorkload(workload);
  const ideal = idealFigures(workload, settings.engine);
  const policy = options.policy ?? 'kv';
  const decodeWorkers = settings.workers - options.prefillWorkers;
  const run = (label: string, disaggregated: boolean) =>
    summarize(
      simulate(workload, {
        ...settings,
        label,
        selection: policyOf(policy),
        disaggregation: disaggregated ? { prefillWorkers: options.prefillWorkers, minRemotePrefillTokens: options.minRemotePrefillTokens, transfer: options.transfer } : undefined,
        onProgress: options.onProgress && ((done, total) => options.onProgress!(label, done, total)),
      }),
      ideal,
    );
  return [run(`aggregated ${settings.workers}`, false), run(`disaggregated ${options.prefillWorkers}P+${decodeWorkers}D`, true)];
}
