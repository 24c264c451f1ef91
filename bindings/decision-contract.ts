// The contract of the fused decision (bindings/decider.ts over the wasm core,
// bindings/reference/decider.ts over the twins): one call per decision that
// finds a prompt's cached prefixes, projects it onto the workers it touches,
// picks a worker under the request's constraints and books it. Constraints
// arrive as slot sets and per-taint-group tables the caller keeps up to date
// (router/model-fleet/), never as per-worker arrays built per request.
import type { MatchResult } from './prefix-index-api.js';
import { checkFinite, costWeights, type BusyThresholds, type EligibilityCounts, type SelectionPath } from './selection-contract.js';

/** Finds a prompt's matches outside the decision's core; epoch() changes whenever they may have. */
export interface HostMatcher {
  find(local: BigUint64Array): MatchResult;
  epoch(): number;
  /**
   * Finds the matches and stages them in the decision's core compactly (the
   * index answers' runs and pairs, assembly/prefix-match.ts) rather than a
   * pair per worker; returns how many pairs and runs it staged.
   */
  stage?(local: BigUint64Array, into: AnswerStage): { pairs: number; runs: number };
}

/** Room in the decision's core for a compact answer (bindings/decider.ts). */
export interface AnswerStage {
  /**
   * Room for `pairs` pairs and `runs` run records with `words` u32 of member
   * blocks after them: `pairs` holds the u32 slots, then the u32 depths;
   * `runs` the records, then the blocks, whose core address is `runsAddress`.
   * Views valid until the next call on the core.
   */
  reserve(pairs: number, runs: number, words: number): { pairs: Uint32Array; runs: Uint32Array; runsAddress: number };
}

/** A prompt's local and chained sequence hashes. */
export interface PromptHashes {
  readonly local: BigUint64Array;
  readonly sequence: BigUint64Array;
}

/** Per taint group (index = group id, as LoadLedger.setGroup numbers them). */
export interface GroupTable {
  /** 1 where the group's workers carry every required taint. */
  readonly allowed: Uint8Array;
  /** The cost multiplier of the group's preferred taints (1 for none). */
  readonly multipliers: Float64Array;
}

export interface DecisionConstraints {
  /** The only slots the request may use (a pin, the caller's allowed workers); null: every slot. */
  readonly slots: Uint32Array | null;
  /** Slots it must not use (workers that already failed it); null: none. */
  readonly excluded: Uint32Array | null;
  /** Which taint groups it may use and at what cost multiplier; null: all, multiplier 1. */
  readonly groups: GroupTable | null;
}

export const NO_CONSTRAINTS: DecisionConstraints = Object.freeze({ slots: null, excluded: null, groups: null });

/** Cost kinds of the core (assembly/cost/kind.ts). */
export const CostKind = { kv: 0, ttft: 1 } as const;

/** The kv cost (assembly/cost/kv.ts). */
export interface KvDecisionCost {
  readonly kind: typeof CostKind.kv;
  readonly overlapCredit: number;
  readonly prefillLoadScale: number;
  readonly activeRequestWeight: number;
  /** 0 takes the cheapest (ties uniformly); T > 0 samples a softmax over normalised costs. */
  readonly temperature: number;
}

/** The ttft cost (assembly/cost/ttft.ts): predicted time to first token, with the workers' speeds from the ledger. */
export interface TtftDecisionCost {
  readonly kind: typeof CostKind.ttft;
  /** kappa: how much more an uncached token weighs per engine step of the fleet's queued prefill. */
  readonly reuseWeight: number;
  /** Tokens of queued prefill one decoding request counts as. */
  readonly decodeWeight: number;
  /** Tokens of queued prefill one token of KV held by the worker's active requests counts as. */
  readonly kvWeight: number;
  readonly temperature: number;
}

/** The cost a decision minimises and its picker's temperature (checked once per object). */
export type DecisionCost = KvDecisionCost | TtftDecisionCost;

/**
 * A cost's weights as the core takes them (its decision block and cost
 * configuration): [overlap credit, first weight, second weight, third weight]
 * (kv has no third: 0). Throws on a weight out of range.
 */
export function coreWeights(cost: DecisionCost): [credit: number, first: number, second: number, third: number] {
  if (cost.kind === CostKind.ttft) {
    checkFinite('cost.reuseWeight', cost.reuseWeight);
    checkFinite('cost.decodeWeight', cost.decodeWeight);
    checkFinite('cost.kvWeight', cost.kvWeight);
    return [1, cost.reuseWeight, cost.decodeWeight, cost.kvWeight];
  }
  if (cost.kind !== CostKind.kv) throw new RangeError(`cost.kind must be one of ${Object.values(CostKind).join(', ')}, got ${String((cost as { kind: unknown }).kind)}`);
  return [...costWeights(cost), 0];
}

export interface DecisionRequest {
  readonly prompt: PromptHashes;
  readonly promptTokens: number;
  /**
   * Busy thresholds of the request's class; null: never busy. Read once per
   * object: changed thresholds come as a new object.
   */
  readonly busy: BusyThresholds | null;
  readonly constraints: DecisionConstraints;
  readonly cost: DecisionCost;
  /** Books the request on the picked worker under this id, at this time. */
  readonly book?: { readonly requestId: string; readonly now: number } | null;
  /** Runs the full scan, which fills the selector's columns (explain reads them). */
  readonly fullScan?: boolean;
}

export interface Decision {
  /** The picked slot, -1 when no worker is eligible. */
  readonly slot: number;
  /** Its cost (+Infinity when none). */
  readonly cost: number;
  /** Its cached prefix depth, in blocks. */
  readonly overlapBlocks: number;
  /**
   * The prefix the cost takes as cached there, in blocks, and a booking books
   * as such: the overlap (its credit, a fraction of its depth, where
   * offloaded tiers hold some); for the ttft cost, at least the prompt blocks
   * the worker's active requests hold (assembly/cost/kind.ts).
   */
  readonly cachedBlocks: number;
  readonly counts: EligibilityCounts;
  readonly path: SelectionPath;
  /** The booking recorded the prompt in the index as routed there (a worker without KV events). */
  readonly routed: boolean;
}

export interface DecisionKernel {
  readonly blockSize: number;
  /** Hashes a prompt's tokens (u32s, validated by the caller) and finds its cached prefixes. */
  prepare(tokens: ArrayLike<number>, seed: bigint): PromptHashes;
  /** The deepest cached prefix of the prompt, in blocks, on a worker the allow-list and groups allow. */
  bestDepth(prompt: PromptHashes, constraints: DecisionConstraints): number;
  decide(request: DecisionRequest): Decision;
  /**
   * The eligibility pass alone, for a caller that filters and scores itself:
   * the selector's columns and the ledger's projection describe the request
   * afterwards.
   */
  eligibility(request: DecisionRequest): EligibilityCounts;
  /** After eligibility (and the caller's filtering of ELIGIBLE): the request's cost and pick over the eligible rows. */
  pickEligible(request: DecisionRequest): number;
  /** Whether a booking on this worker records its blocks as routed (it publishes no KV events). */
  setRouted(slot: number, routed: boolean): void;
  /**
   * Keeps the fast path ready for decisions with this cost and these busy
   * thresholds (a decision opens its own otherwise, O(rows) the first time).
   */
  openView(cost: DecisionCost, busy: BusyThresholds | null): void;
  /**
   * Workers available and not busy under `busy`: what an unconstrained
   * decision with these thresholds counts eligible. From the fast path's
   * running count where the ledger keeps one (O(1)), by one pass otherwise.
   */
  headroom(busy: BusyThresholds): number;
  /** Whether the worker at `slot` is available and not busy under `busy` (O(1) where headroom is). */
  standing(busy: BusyThresholds, slot: number): boolean;
  /**
   * Finds matches with `matcher` instead of the index (null: the index again),
   * e.g. over several storage tiers, whose matches carry credits.
   */
  useMatcher(matcher: HostMatcher | null): void;
}
