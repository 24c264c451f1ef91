// Builds the compact worker rows a selection component or a classifier reads:
// one row per eligible worker, with only the declared groups filled, from the
// core's per-slot columns. Selection and classification share this builder, so
// a group means the same in both.
import { EligibilityReason, type LedgerColumns, type ProjectionColumns } from '../bindings/selection-contract.js';
import type { WorkerKey, WorkerSlots } from '../bindings/workers.js';
import { WorkerInputs, type WorkerInputMask, type WorkerRows } from './worker-inputs.js';

export interface RowSources {
  inputs: WorkerInputMask;
  /** Per slot, 1 for the workers to include. */
  eligible: Uint8Array;
  workers: WorkerSlots;
  ledger: LedgerColumns;
  projection: ProjectionColumns;
  blockSize: number;
  promptTokens: number;
  /** The cost multiplier of a slot's preferred taints; absent: 1 everywhere. */
  taintMultiplier: ((slot: number) => number) | undefined;
}

export function buildRows(src: RowSources): WorkerRows {
  const slots: number[] = [];
  for (let slot = 0; slot < src.eligible.length; slot++) if (src.eligible[slot] === 1 && src.workers.has(slot)) slots.push(slot);
  const n = slots.length;
  const workers: WorkerKey[] = slots.map((s) => src.workers.keyOf(s));
  const rows: { -readonly [K in keyof WorkerRows]: WorkerRows[K] } = { count: n, workers, slots: Uint32Array.from(slots) };
  const column = (f: (slot: number) => number) => Float64Array.from(slots, f);
  if (src.inputs & WorkerInputs.CACHE) {
    rows.overlapBlocks = column((s) => src.projection.overlapBlocks[s]!);
    rows.cachedTokens = column((s) => Math.min(src.projection.overlapBlocks[s]! * src.blockSize, src.promptTokens));
  }
  if (src.inputs & WorkerInputs.LOAD) {
    rows.available = Uint8Array.from(slots, (s) => src.ledger.available[s]!);
    rows.prefillTokens = column((s) => src.projection.potentialPrefillTokens[s]!);
    rows.decodeBlocks = column((s) => src.projection.potentialDecodeBlocks[s]!);
    rows.activeRequests = column((s) => src.ledger.activeRequests[s]!);
  }
  if (src.inputs & WorkerInputs.PREFERRED_TAINT) {
    const multiplier = src.taintMultiplier;
    rows.taintMultiplier = column((s) => (multiplier ? multiplier(s) : 1));
  }
  if (src.inputs & WorkerInputs.OCCUPANCY) {
    rows.occupancy = column((s) => src.ledger.activeRequests[s]!);
  }
  return rows;
}

const REASONS: Record<number, string> = {
  [EligibilityReason.absent]: 'no such worker',
  [EligibilityReason.unavailable]: 'unavailable',
  [EligibilityReason.notAllowed]: 'not allowed for this request (allowed set, pin, required taints or earlier failure)',
  [EligibilityReason.busyPrefillTokens]: 'busy: active prefill tokens over the threshold',
  [EligibilityReason.busyPrefillFraction]: 'busy: active prefill tokens over the fraction of max batched tokens',
  [EligibilityReason.busyDecodeFraction]: 'busy: KV cache use over the decode threshold',
};

/** Why a worker was filtered, in words for the explain endpoint. */
export function eligibilityReasonName(reason: number, draining: boolean): string {
  if (reason === EligibilityReason.unavailable && draining) return 'draining';
  return REASONS[reason] ?? 'filtered by the selection policy';
}
