// Worker inputs: the per-worker data a selection component or a request
// classifier may read, in groups each component declares. Only declared groups
// are built, once per decision, for the eligible workers; the same builder
// serves selection and classification, so a group means the same in both.
import type { WorkerKey } from '../bindings/workers.js';

export const WorkerInputs = {
  NONE: 0,
  /** overlapBlocks, cachedTokens */
  CACHE: 1 << 0,
  /** available, prefillTokens, decodeBlocks, activeRequests (projected for this request) */
  LOAD: 1 << 1,
  /** taintMultiplier */
  PREFERRED_TAINT: 1 << 2,
  /** occupancy: the router's own count of requests in flight per worker */
  OCCUPANCY: 1 << 5,
} as const;

export type WorkerInputMask = number;

export const ALL_INPUT_GROUPS = WorkerInputs.CACHE | WorkerInputs.LOAD | WorkerInputs.PREFERRED_TAINT | WorkerInputs.OCCUPANCY;

export function describeInputs(mask: WorkerInputMask): string[] {
  const names: string[] = [];
  for (const [name, bit] of Object.entries(WorkerInputs)) if (bit && mask & bit) names.push(name);
  return names;
}

/**
 * Columnar rows for the eligible workers of one decision: row i describes
 * workers[i]. A group's columns are present only when it was declared.
 * Rows are a snapshot for the call they were built for; never keep them.
 */
export interface WorkerRows {
  readonly count: number;
  readonly workers: readonly WorkerKey[];
  /** Core slot of each row (for components that index core columns). */
  readonly slots: Uint32Array;
  readonly overlapBlocks?: Float64Array;
  readonly cachedTokens?: Float64Array;
  readonly available?: Uint8Array;
  readonly prefillTokens?: Float64Array;
  readonly decodeBlocks?: Float64Array;
  readonly activeRequests?: Float64Array;
  readonly taintMultiplier?: Float64Array;
  readonly occupancy?: Float64Array;
}

export const NO_ROWS: WorkerRows = Object.freeze({ count: 0, workers: [], slots: new Uint32Array(0) });
