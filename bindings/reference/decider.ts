// Pure-TS twin of Decider: the fused decision as the plain composition of the
// twins, every step recomputed from scratch: find the prompt's matches in the
// index, project it onto the ledger, turn the constraints into the list of
// allowed slots and the per-slot cost multipliers, run the full scan, book.
import { CostKind, coreWeights, type Decision, type DecisionConstraints, type DecisionKernel, type DecisionRequest, type HostMatcher, type PromptHashes } from '../decision-contract.js';
import type { MatchResult } from '../prefix-index-api.js';
import { checkCount, duplicateRequest, type BusyThresholds, type EligibilityCounts } from '../selection-contract.js';
import type { BlockHasher } from './block-hasher.js';
import type { ReferenceLoadTable } from './load-table.js';
import type { ReferencePrefixIndex } from './prefix-index.js';
import type { ReferenceSelector } from './selector.js';

export class ReferenceDecider implements DecisionKernel {
  readonly blockSize: number;
  private readonly hasher: BlockHasher;
  private readonly index: ReferencePrefixIndex;
  private readonly ledger: ReferenceLoadTable;
  private readonly selector: ReferenceSelector;
  private readonly routed = new Set<number>();
  private matcher: HostMatcher | null = null;

  constructor(options: { hasher: BlockHasher; index: ReferencePrefixIndex; ledger: ReferenceLoadTable; selector: ReferenceSelector; blockSize: number }) {
    checkCount('blockSize', options.blockSize);
    this.blockSize = options.blockSize;
    this.hasher = options.hasher;
    this.index = options.index;
    this.ledger = options.ledger;
    this.selector = options.selector;
  }

  prepare(tokens: ArrayLike<number>, seed: bigint): PromptHashes {
    const local = this.hasher.localHashes(tokens, this.blockSize, seed);
    return { local, sequence: this.hasher.sequenceHashes(local, seed) };
  }

  bestDepth(prompt: PromptHashes, constraints: DecisionConstraints): number {
    const matches = this.find(prompt.local);
    const ok = (slot: number) => (!constraints.slots || constraints.slots.includes(slot)) && this.groupAllowed(slot, constraints);
    let best = 0;
    for (let i = 0; i < matches.count; i++) if (ok(matches.slots[i]!)) best = Math.max(best, matches.depths[i]!);
    return best;
  }

  decide(request: DecisionRequest): Decision {
    const book = request.book ?? null;
    if (book && this.ledger.has(book.requestId)) throw duplicateRequest(book.requestId);
    const counts = this.eligibility(request);
    const slot = this.pickEligible(request);
    let routed = false;
    // The ttft cost takes the prefix the worker's active requests hold as cached too (assembly/cost/kind.ts);
    // a prefix is taken as cached at its credit.
    const overlap = slot >= 0 ? this.ledger.projection.overlapBlocks[slot]! : 0;
    const credited = slot >= 0 ? this.ledger.projectedCredits[slot]! : 0;
    const cachedBlocks = slot >= 0 && request.cost.kind === CostKind.ttft ? Math.max(credited, this.ledger.projectedHeldBlocks[slot]!) : credited;
    if (slot >= 0 && book) {
      const cached = Math.floor(Math.min(cachedBlocks * this.blockSize, request.promptTokens));
      this.ledger.add(book.requestId, slot, request.prompt.sequence, request.promptTokens - cached, book.now);
      if (this.routed.has(slot) && request.prompt.local.length > 0) {
        this.index.insertRouted(this.ledger.workers.keyOf(slot), request.prompt.local, book.now);
        routed = true;
      }
    }
    return {
      slot,
      cost: slot >= 0 ? this.selector.columns.cost[slot]! : Infinity,
      overlapBlocks: overlap,
      cachedBlocks,
      counts,
      path: 'scan',
      routed,
    };
  }

  eligibility(request: DecisionRequest): EligibilityCounts {
    const overlaps = this.find(request.prompt.local);
    const projection = { seqHashes: request.prompt.sequence, promptTokens: request.promptTokens, blockSize: this.blockSize, overlaps };
    if (overlaps.credits) this.ledger.projectCredited(projection, overlaps.credits);
    else this.ledger.project(projection);
    return this.selector.eligibility({ busy: request.busy ?? undefined, allowedSlots: this.allowedSlots(request.constraints) });
  }

  pickEligible(request: DecisionRequest): number {
    const cost = request.cost;
    coreWeights(cost);
    const groups = request.constraints.groups;
    const multipliers = groups ? Array.from({ length: this.ledger.rows }, (_, slot) => groups.multipliers[this.ledger.groupOf(slot)] ?? 1) : undefined;
    if (cost.kind === CostKind.ttft) this.selector.score({ ttft: cost, multipliers });
    else this.selector.score({ cost, multipliers });
    return this.selector.pick(cost.temperature);
  }

  setRouted(slot: number, routed: boolean): void {
    if (routed) this.routed.add(slot);
    else this.routed.delete(slot);
  }

  /** The twin always scans: nothing to keep ready. */
  openView(): void {}

  headroom(busy: BusyThresholds): number {
    return this.selector.eligibility({ busy }).eligible;
  }

  standing(busy: BusyThresholds, slot: number): boolean {
    return this.selector.eligibility({ busy, allowedSlots: [slot] }).eligible > 0;
  }

  useMatcher(matcher: HostMatcher | null): void {
    this.matcher = matcher;
  }

  private find(local: BigUint64Array): MatchResult {
    return this.matcher ? this.matcher.find(local) : this.index.findMatches(local);
  }

  /** The slots the constraints allow (undefined: every slot): listed, in an allowed group, not excluded. */
  private allowedSlots(constraints: DecisionConstraints): number[] | undefined {
    if (!constraints.slots && !constraints.excluded && !constraints.groups) return undefined;
    const excluded = new Set(constraints.excluded ?? []);
    const candidates = constraints.slots ? [...new Set(constraints.slots)] : Array.from({ length: this.ledger.rows }, (_, slot) => slot);
    return candidates.filter((slot) => !excluded.has(slot) && this.groupAllowed(slot, constraints));
  }

  private groupAllowed(slot: number, constraints: DecisionConstraints): boolean {
    const groups = constraints.groups;
    return !groups || groups.allowed[this.ledger.groupOf(slot)] === 1;
  }
}
