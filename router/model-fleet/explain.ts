// The explain endpoint's view of a decision: the worker a request would go to
// and every worker's breakdown (eligibility and why not, overlap, projected
// load, cost), from one full scan that books nothing. It reports every worker,
// so it costs time in the fleet; it is not on the request path.
import type { BusyThresholds, LoadLedger, WorkerSelector } from '../../bindings/selection-contract.js';
import { workerLabel } from '../../bindings/workers.js';
import { eligibilityReasonName } from '../worker-rows.js';
import type { Constraints } from './constraints.js';
import { creditedBlocks, type TierDepths, type TierWeights } from './tiers.js';
import type { Decisions } from './decisions.js';
import { predictTtftMs, type Speeds } from './speeds.js';
import type { Explanation, RoutedRequest, WorkerExplanation } from './types.js';
import type { WorkerSet } from './worker-set.js';

export function explainDecision(
  request: RoutedRequest,
  busy: BusyThresholds | null,
  parts: {
    model: string;
    policy: string;
    blockSize: number;
    decisions: Decisions;
    constraints: Constraints;
    workers: WorkerSet;
    ledger: LoadLedger;
    selector: WorkerSelector;
    tierDepths: (local: BigUint64Array) => Map<number, TierDepths> | null;
    weights: TierWeights;
    speeds: Speeds;
  },
): Explanation {
  const { decisions, workers, ledger, selector, blockSize } = parts;
  // Read before the decision: it may leave the index's match views stale.
  const tiers = parts.tierDepths(request.localHashes);
  const choice = decisions.select(request, parts.constraints.of(request, request.allowedWorkers, []), busy, false, true);
  const error = choice.slot < 0 ? decisions.errorFor(request, choice.counts) : null;
  const cols = ledger.columns;
  const proj = ledger.projection;
  const sel = selector.columns;
  const list: WorkerExplanation[] = [];
  for (const [slot, key] of workers.slots.entries()) {
    const reason = sel.reason[slot]!;
    const overlap = proj.overlapBlocks[slot]!;
    const byTier = tiers ? (tiers.get(slot) ?? { gpu: 0, cpu: 0, disk: 0 }) : { gpu: overlap, cpu: 0, disk: 0 };
    const cachedTokens = Math.min(overlap * blockSize, request.promptTokens);
    const speed = parts.speeds.learned(slot) ?? null;
    const queued = decisions.queuedTokens(slot);
    list.push({
      worker: workerLabel(key),
      eligible: sel.eligible[slot] === 1,
      filtered: sel.eligible[slot] === 1 ? null : eligibilityReasonName(reason, workers.get(key.id)?.draining ?? false),
      overlapBlocks: overlap,
      overlapByTier: byTier,
      creditedBlocks: tiers ? creditedBlocks(byTier, parts.weights) : overlap,
      cachedTokens,
      prefillTokens: proj.potentialPrefillTokens[slot]!,
      decodeBlocks: proj.potentialDecodeBlocks[slot]!,
      activeRequests: cols.activeRequests[slot]!,
      cost: Number.isFinite(sel.cost[slot]!) ? sel.cost[slot]! : null,
      speed,
      predictedTtftMs: speed && predictTtftMs(speed, queued, request.promptTokens - cachedTokens),
    });
  }
  return {
    model: parts.model,
    policy: parts.policy,
    promptTokens: request.promptTokens,
    promptBlocks: Math.ceil(request.promptTokens / blockSize),
    chosen: choice.slot >= 0 ? workerLabel(workers.slots.keyOf(choice.slot)) : null,
    error: error ? { code: error.code, message: error.message } : null,
    workers: list,
  };
}
