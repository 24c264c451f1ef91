// Selection policies evaluated in JavaScript (filters, scorers, a picker),
// and classifier rows: both read rows of the eligible workers, built from the
// core's columns after the fused decision's eligibility pass. These policies
// and classifiers declare that they read every eligible worker, so this is
// the one place a decision costs time in the fleet: the built-in kv cost
// never comes here.
import type { DecisionKernel, DecisionRequest } from '../../bindings/decision-contract.js';
import type { EligibilityCounts, LoadLedger, WorkerSelector } from '../../bindings/selection-contract.js';
import { workerLabel } from '../../bindings/workers.js';
import type { SelectionContext, SelectionPolicy } from '../selection/contracts.js';
import { buildRows } from '../worker-rows.js';
import type { WorkerInputMask, WorkerRows } from '../worker-inputs.js';
import type { RoutedRequest } from './types.js';
import type { WorkerSet } from './worker-set.js';

export class Pipeline {
  constructor(
    private readonly policy: SelectionPolicy,
    private readonly inputs: WorkerInputMask,
    private readonly decider: DecisionKernel,
    private readonly ledger: LoadLedger,
    private readonly selector: WorkerSelector,
    private readonly workers: WorkerSet,
    private readonly blockSize: number,
  ) {}

  /** Rows of the declared groups for the workers the decision's eligibility pass allows (busy ones included when it has no thresholds). */
  rows(request: RoutedRequest, decision: DecisionRequest, inputs: WorkerInputMask): WorkerRows {
    this.decider.eligibility(decision);
    return this.build(request, decision, inputs);
  }

  /** Filters, scorers and picker over the eligible workers; the picked slot (-1 when none) and the eligibility counts. */
  run(request: RoutedRequest, decision: DecisionRequest): { slot: number; counts: EligibilityCounts } {
    const policy = this.policy;
    const counts = this.decider.eligibility(decision);
    if (counts.eligible === 0) return { slot: -1, counts };
    let rows = this.build(request, decision, this.inputs);
    const context = this.context(request);
    if (policy.filters.length > 0) {
      const keep = new Uint8Array(rows.count).fill(1);
      for (const f of policy.filters) f.filter(rows, keep, context);
      const eligible = this.selector.columns.eligible;
      for (let i = 0; i < rows.count; i++) if (!keep[i]) eligible[rows.slots[i]!] = 0;
      if (!keep.includes(1)) return { slot: -1, counts };
      rows = this.build(request, decision, this.inputs);
    }
    if (policy.coreCost) return { slot: this.decider.pickEligible(decision), counts };
    const costs = new Float64Array(rows.count);
    for (const s of policy.scorers) {
      s.score(rows, costs, context);
      for (let i = 0; i < costs.length; i++) {
        if (!Number.isFinite(costs[i]!)) throw new Error(`scorer ${s.name} wrote a non-finite cost for ${workerLabel(rows.workers[i]!)}`);
      }
    }
    const row = policy.picker!.pick(rows, costs, context);
    if (!Number.isInteger(row) || row < 0 || row >= rows.count) throw new Error(`picker ${policy.picker!.name} returned row ${row} of ${rows.count}`);
    return { slot: rows.slots[row]!, counts };
  }

  private build(request: RoutedRequest, decision: DecisionRequest, inputs: WorkerInputMask): WorkerRows {
    const groups = decision.constraints.groups;
    return buildRows({
      inputs,
      eligible: this.selector.columns.eligible,
      workers: this.workers.slots,
      ledger: this.ledger.columns,
      projection: this.ledger.projection,
      blockSize: this.blockSize,
      promptTokens: request.promptTokens,
      taintMultiplier: groups ? (slot) => groups.multipliers[this.workers.groupOfSlot(slot)] ?? 1 : undefined,
    });
  }

  private context(request: RoutedRequest): SelectionContext {
    return {
      promptTokens: request.promptTokens,
      blockSize: this.blockSize,
      promptBlocks: Math.ceil(request.promptTokens / this.blockSize),
      sessionId: request.sessionId,
      random: () => this.selector.nextRandom() / 4294967296,
    };
  }
}
