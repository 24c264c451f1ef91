// The worker-selection pipeline's seams: filters drop rows, scorers add costs,
// one picker chooses a row. Each component declares the worker-input groups it
// reads; only declared groups are built, once per decision, for the eligible
// workers. A core cost (CoreCost) runs fused in the wasm core instead.
import type { SpeedPrior } from '../model-fleet/speeds.js';
import type { CostWeights } from '../../bindings/selection-contract.js';
import type { WorkerInputMask, WorkerRows } from '../worker-inputs.js';

export interface SelectionContext {
  readonly promptTokens: number;
  readonly blockSize: number;
  /** ceil(prompt tokens / block size). */
  readonly promptBlocks: number;
  /** The session the request belongs to, if any. */
  readonly sessionId: string | null;
  /** Uniform in [0, 1) from the model fleet's seeded generator (decisions are reproducible). */
  random(): number;
}

export interface WorkerFilter {
  readonly name: string;
  readonly inputs: WorkerInputMask;
  /** Clears keep[i] for rows that must not be picked. */
  filter(rows: WorkerRows, keep: Uint8Array, context: SelectionContext): void;
}

export interface WorkerScorer {
  readonly name: string;
  readonly inputs: WorkerInputMask;
  /** Adds a finite cost (lower is better) to costs[i] for every row. */
  score(rows: WorkerRows, costs: Float64Array, context: SelectionContext): void;
}

export interface WorkerPicker {
  readonly name: string;
  readonly inputs: WorkerInputMask;
  /** Returns a row index in [0, rows.count); costs are the scorers' sums (zeros without scorers). */
  pick(rows: WorkerRows, costs: Float64Array, context: SelectionContext): number;
}

/**
 * A cost evaluated in the wasm core, with its picker: the core's fast path
 * scores only the workers a request touches and finds the rest in its trees.
 * `kind` names the core's cost (assembly/cost/kind.ts); its weights follow.
 */
export type CoreCost = KvCoreCost | TtftCoreCost;

/** The kv cost (assembly/cost/kv.ts). */
export interface KvCoreCost extends Required<CostWeights> {
  kind: 'kv';
  temperature: number;
}

/** The ttft cost (assembly/cost/ttft.ts): predicted time to first token from the workers' learned speeds. */
export interface TtftCoreCost {
  kind: 'ttft';
  /** How much more an uncached token weighs per engine step of the fleet's queued prefill. */
  reuseWeight: number;
  /** Tokens of queued prefill one decoding request counts as. */
  decodeWeight: number;
  /** Tokens of queued prefill one token of KV held by the worker's active requests counts as. */
  kvWeight: number;
  /**
   * Whether a worker's queued prefill counts only what is left of it: the
   * blocks its KV events showed computed come off its oldest booking in
   * prefill, down to one engine step of it until its first token
   * (router/model-fleet/prefill-progress.ts). False: a booking counts its
   * whole uncached prompt until its first token, as the kv cost does.
   */
  prefillProgress: boolean;
  temperature: number;
}

export interface SelectionPolicy {
  readonly name: string;
  readonly filters: readonly WorkerFilter[];
  readonly scorers: readonly WorkerScorer[];
  /** The JS picker; absent when the core cost picks. */
  readonly picker?: WorkerPicker;
  /** Present when the default cost (in the core) scores and picks. */
  readonly coreCost?: CoreCost;
  /** What a worker's prefill speed is taken to be until the router has learned it (router/model-fleet/speeds.ts). */
  readonly speedPrior?: SpeedPrior;
}

/** The union of every group a policy's components declared. */
export function policyInputs(policy: SelectionPolicy): WorkerInputMask {
  let mask = policy.picker?.inputs ?? 0;
  for (const f of policy.filters) mask |= f.inputs;
  for (const s of policy.scorers) mask |= s.inputs;
  return mask;
}
