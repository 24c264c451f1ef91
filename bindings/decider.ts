// The fused decision over the wasm core (assembly/decide.ts): one core call
// per decision, with the prompt's hashes and matches left in core memory by
// prepare and read there by the decision, its constraints staged as short
// slot lists and per-group tables, and its outputs read from the core's
// decision block. It shares one Core with the BlockHasher, PrefixIndex,
// LoadTable and Selector of a model fleet.
//
// prepare copies the prompt's tokens in once and both hash lists out once
// (one allocation), and remembers that they and the prompt's matches are in
// core memory; a later decision on the same prompt reads them there while no
// other call overwrote them (Core.epoch), else stages them again from the
// copy.
import type { HashExports } from './block-hasher.js';
import type { BlockHasher } from './block-hasher.js';
import type { Core, CoreExports } from './core.js';
import {
  NO_CONSTRAINTS,
  type AnswerStage,
  type HostMatcher,
  coreWeights,
  type Decision,
  type DecisionConstraints,
  type DecisionCost,
  type DecisionKernel,
  type DecisionRequest,
  type PromptHashes,
} from './decision-contract.js';
import type { LoadTable } from './load-table.js';
import { busyLimits, checkCount, checkFinite, checkTemperature, duplicateRequest, type BusyThresholds, type EligibilityCounts } from './selection-contract.js';
import { HashSlab } from './hash-slab.js';
import { Multipliers, type Selector } from './selector.js';

interface DecideExports {
  decideBlock(): number;
  decidePrepare(tokenCount: number, blockSize: number, seed: bigint): number;
  decideMatch(): number;
  decideReserveMatches(count: number): number;
  decideUseMatches(count: number, credited: number): void;
  decideReserveRuns(runs: number, words: number): number;
  decideUseRuns(runs: number): void;
  decideBestDepth(): number;
  decideRun(): number;
  selectReserveAllowed(count: number): void;
  selectAllowedPtr(): number;
  selectReserveExcluded(count: number): void;
  selectExcludedPtr(): number;
  selectReserveGroups(count: number): void;
  selectGroupAllowedPtr(): number;
  selectGroupMultiplierPtr(): number;
  selectCountsPtr(): number;
  selectCostKind(kind: number, overlapCredit: number, first: number, second: number, third: number, multipliers: number): void;
  selectPick(temperature: number): number;
  ledgerSetRouted(slot: number, routed: number): number;
}

// The decision block (assembly/decide.ts), as f64 and u32 indexes.
const F = { promptTokens: 0, credit: 1, temperature: 2, now: 3, prefillTokens: 4, prefillFraction: 5, decodeFraction: 6, scale: 7, weight: 8, cost: 9, cachedBlocks: 20, third: 21 } as const;
const U = {
  blockSize: 20,
  kind: 21,
  flags: 22,
  localPtr: 23,
  seqPtr: 24,
  blocks: 25,
  listCount: 26,
  excludedCount: 27,
  groupCount: 28,
  matches: 29,
  slot: 30,
  overlap: 31,
  handle: 32,
  path: 33,
  bestDepth: 34,
  routed: 35,
  partial: 36,
} as const;
const FLAG_FIND = 1;
const FLAG_BOOK = 2;
const FLAG_SCAN = 4;
const FLAG_ELIGIBILITY = 8;
const PATH_FAST = 1;
const NONE = -1;
const NEVER_BUSY: readonly [number, number, number] = Object.freeze([Infinity, Infinity, Infinity]);

/** The decision block and the counts, as views (made again when memory grows). */
interface BlockViews {
  f64: Float64Array;
  u32: Uint32Array;
  counts: Uint32Array;
}

/**
 * A view of one of the core's staging buffers, kept while the buffer stays
 * put (made again when it moved, grew past the view, or memory grew and
 * detached it): a typed array over core memory costs as much as the copy.
 */
class Staged<T extends Uint8Array | Uint32Array | Float64Array> {
  private ptr = -1;
  private view: T | null = null;

  constructor(private readonly make: (ptr: number, length: number) => T) {}

  /** Copies values to the buffer at ptr (room for them reserved). */
  write(ptr: number, values: ArrayLike<number>): void {
    if (values.length === 0) return;
    let view = this.view;
    if (!view || ptr !== this.ptr || view.length < values.length) {
      view = this.make(ptr, values.length);
      this.view = view;
      this.ptr = ptr;
    }
    view.set(values);
  }
}

export type { HostMatcher };

/** Where a prompt's hashes and matches are in core memory, and since which writes. */
interface Residency {
  local: BigUint64Array | null;
  epoch: number;
}

export class Decider implements DecisionKernel {
  readonly blockSize: number;
  private readonly core: Core;
  private readonly ex: DecideExports & HashExports & CoreExports;
  private readonly ledger: LoadTable;
  private readonly selector: Selector;
  private readonly block: number;
  private blockViews: BlockViews = { f64: new Float64Array(0), u32: new Uint32Array(0), counts: new Uint32Array(0) };
  private readonly hashes: Residency = { local: null, epoch: -1 };
  private readonly slab = new HashSlab();
  // The constraints' staging buffers in the core.
  private readonly staged = {
    allowed: new Staged((ptr, n) => this.core.u32(ptr, n)),
    excluded: new Staged((ptr, n) => this.core.u32(ptr, n)),
    groupAllowed: new Staged((ptr, n) => this.core.u8(ptr, n)),
    groupMultipliers: new Staged((ptr, n) => this.core.f64(ptr, n)),
  };
  // Views of the hasher's input and output, while their buffers do not move.
  private readonly input: { ptr: number; tokens: number; view: Uint32Array } = { ptr: 0, tokens: 0, view: new Uint32Array(0) };
  private readonly output: { ptr: number; view: BigUint64Array } = { ptr: 0, view: new BigUint64Array(0) };
  // The last cost and busy thresholds seen, checked and converted once per object.
  private checkedCost: DecisionCost | null = null;
  private weights: readonly [number, number, number, number] = [1, 1, 0, 0];
  /** The cost the ledger's keys were last configured for by this Decider. */
  private keyedFor: DecisionCost | null = null;
  private readonly limitsOf = new WeakMap<BusyThresholds, readonly [number, number, number]>();
  private readonly matches: Residency & { count: number } = { local: null, epoch: -1, count: 0 };
  // The index's own matcher (an index sharded over other cores), and the one
  // in use: that one, or one set by useMatcher (storage tiers), or none (the
  // index in this core finds them).
  private readonly indexMatcher: HostMatcher | null;
  private matcher: HostMatcher | null;
  // Where a matcher stages a compact answer: the core's host matches and host runs.
  private readonly answerStage: AnswerStage = {
    reserve: (pairs, runs, words) => {
      const pairsPtr = this.ex.decideReserveMatches(pairs) >>> 0;
      const runsPtr = this.ex.decideReserveRuns(runs, words) >>> 0;
      return { pairs: this.core.u32(pairsPtr, 2 * pairs), runs: this.core.u32(runsPtr, 8 * runs + words), runsAddress: runsPtr };
    },
  };

  /**
   * The hasher, ledger and selector of one Core. Its PrefixIndex lives there
   * too and is searched in the core, unless `matcher` finds the matches (an
   * index sharded over several cores): they are then staged for each decision.
   */
  constructor(options: { hasher: BlockHasher; ledger: LoadTable; selector: Selector; blockSize: number; matcher?: HostMatcher }) {
    checkCount('blockSize', options.blockSize);
    if (options.blockSize === 0) throw new RangeError('blockSize must be at least 1');
    this.core = options.ledger.core;
    if (options.hasher.core !== this.core || options.selector.ledger !== options.ledger) throw new Error('a Decider needs the hasher, ledger and selector of one Core');
    this.core.claim('decide');
    this.blockSize = options.blockSize;
    this.ledger = options.ledger;
    this.selector = options.selector;
    this.ex = this.core.kernel<DecideExports & HashExports>();
    this.block = this.ex.decideBlock() >>> 0;
    this.indexMatcher = options.matcher ?? null;
    this.matcher = this.indexMatcher;
  }

  useMatcher(matcher: HostMatcher | null): void {
    this.matcher = matcher ?? this.indexMatcher;
    // Matches staged by the last matcher describe nothing now.
    this.matches.local = null;
  }

  prepare(tokens: ArrayLike<number>, seed: bigint): PromptHashes {
    this.tokenInput(tokens.length).set(tokens);
    const blocks = this.ex.decidePrepare(tokens.length, this.blockSize, seed) >>> 0;
    const lists = this.slab.pair(blocks);
    if (blocks > 0) lists.both.set(this.hashOutput(2 * blocks).subarray(0, 2 * blocks));
    const prompt = { local: lists.first, sequence: lists.second };
    this.hashes.local = prompt.local;
    this.hashes.epoch = this.core.wrote('hashes');
    if (this.matcher) {
      this.core.wrote('matches');
      this.stageHostMatches(prompt);
    } else {
      this.matches.local = prompt.local;
      this.matches.epoch = this.core.wrote('matches');
      this.matches.count = this.views().u32[U.matches]!;
    }
    return prompt;
  }

  bestDepth(prompt: PromptHashes, constraints: DecisionConstraints): number {
    this.stagePrompt(prompt);
    if (this.matcher) {
      if (!this.matchesHeld(prompt)) this.stageHostMatches(prompt);
    } else if (!this.matchesHeld(prompt)) {
      this.ex.decideMatch();
      this.noteMatches(prompt);
    }
    this.stageConstraints({ ...constraints, excluded: null });
    this.ex.decideBestDepth();
    return this.views().u32[U.bestDepth]!;
  }

  decide(request: DecisionRequest): Decision {
    const book = request.book ?? null;
    if (book) {
      if (this.ledger.has(book.requestId)) throw duplicateRequest(book.requestId);
      checkFinite('now', book.now);
    }
    let flags = this.stageRequest(request, true);
    if (book) flags |= FLAG_BOOK;
    if (request.fullScan) flags |= FLAG_SCAN;
    const { f64, u32 } = this.views();
    f64[F.now] = book ? book.now : 0;
    u32[U.flags] = flags;
    this.ex.decideRun();
    return this.finish(request, book?.requestId ?? null);
  }

  eligibility(request: DecisionRequest): EligibilityCounts {
    const flags = this.stageRequest(request, false) | FLAG_ELIGIBILITY;
    this.views().u32[U.flags] = flags;
    this.ex.decideRun();
    this.afterRun(request);
    return this.readCounts();
  }

  pickEligible(request: DecisionRequest): number {
    const [credit, first, second, third] = this.weightsOf(request.cost);
    this.ex.selectCostKind(request.cost.kind, credit, first, second, third, request.constraints.groups ? Multipliers.group : Multipliers.none);
    return this.ex.selectPick(request.cost.temperature);
  }

  setRouted(slot: number, routed: boolean): void {
    // An index outside this core records routed prompts itself (the host books them there).
    this.ledger.setRouted(slot, routed && !this.indexMatcher);
  }

  openView(cost: DecisionCost, busy: BusyThresholds | null): void {
    this.keyFor(cost);
    this.ledger.openLimits(this.limits(busy));
  }

  headroom(busy: BusyThresholds): number {
    // A ledger without a configured cost keeps no views: count by a pass.
    return this.ledger.members(this.limits(busy)) ?? this.selector.eligibility({ busy }).eligible;
  }

  standing(busy: BusyThresholds, slot: number): boolean {
    return this.ledger.holds(this.limits(busy), slot) ?? this.selector.eligibility({ busy, allowedSlots: [slot] }).eligible > 0;
  }

  /** The ledger keeps its keys under this cost (configured again only when the cost object changes). */
  private keyFor(cost: DecisionCost): void {
    if (cost === this.keyedFor) return;
    const [, scale, weight, third] = this.weightsOf(cost);
    this.ledger.configureCost({ kind: cost.kind, scale, weight, third, blockSize: this.blockSize });
    this.keyedFor = cost;
  }

  /** The cost's weights as the core takes them, checked once per cost object. */
  private weightsOf(cost: DecisionCost): readonly [number, number, number, number] {
    if (cost !== this.checkedCost) {
      checkTemperature(cost.temperature);
      this.weights = coreWeights(cost);
      this.checkedCost = cost;
    }
    return this.weights;
  }

  /**
   * The hasher's input as u32 tokens, room for at least n: a view kept while
   * the buffer stays put (other bindings may reserve it larger and move it).
   */
  private tokenInput(n: number): Uint32Array {
    const input = this.input;
    const ptr = this.ex.hashReserveInput(4 * n) >>> 0;
    if (ptr !== input.ptr || n > input.tokens || input.view.length === 0) {
      input.ptr = ptr;
      input.tokens = n;
      input.view = this.core.u32(ptr, n);
    }
    return input.view;
  }

  /** The hasher's output (local, then sequence hashes), at least `count` u64 (a view kept while the buffer stays put). */
  private hashOutput(count: number): BigUint64Array {
    const output = this.output;
    const ptr = this.ex.hashLocalPtr() >>> 0;
    if (ptr !== output.ptr || output.view.length < count) {
      output.ptr = ptr;
      output.view = this.core.u64(ptr, count);
    }
    return output.view;
  }

  /**
   * Fills the block for a decision on the request; returns its flags so far.
   * A decision that may take the fast path keeps the ledger's keys and a view
   * ready for its cost and thresholds.
   */
  private stageRequest(request: DecisionRequest, fastPath: boolean): number {
    const { cost, prompt } = request;
    checkCount('promptTokens', request.promptTokens);
    const [credit, scale, weight, third] = this.weightsOf(cost);
    const limits = this.limits(request.busy);
    if (fastPath) {
      this.keyFor(cost);
      this.ledger.openLimits(limits);
    }
    this.stagePrompt(prompt);
    let flags = 0;
    if (!this.matchesHeld(prompt)) {
      if (this.matcher) this.stageHostMatches(prompt);
      else flags |= FLAG_FIND;
    }
    this.stageConstraints(request.constraints ?? NO_CONSTRAINTS);
    const { f64, u32 } = this.views();
    f64[F.promptTokens] = request.promptTokens;
    f64[F.credit] = credit;
    f64[F.temperature] = cost.temperature;
    f64[F.prefillTokens] = limits[0];
    f64[F.prefillFraction] = limits[1];
    f64[F.decodeFraction] = limits[2];
    f64[F.scale] = scale;
    f64[F.weight] = weight;
    f64[F.third] = third;
    u32[U.blockSize] = this.blockSize;
    u32[U.kind] = cost.kind;
    u32[U.matches] = this.matches.count;
    return flags;
  }

  /**
   * Busy thresholds as the core takes them, checked once per object: callers
   * give a class's thresholds a new object when they change them.
   */
  private limits(busy: BusyThresholds | null): readonly [number, number, number] {
    if (!busy) return NEVER_BUSY;
    let limits = this.limitsOf.get(busy);
    if (!limits) {
      limits = busyLimits(busy);
      this.limitsOf.set(busy, limits);
    }
    return limits;
  }

  /** The prompt's hashes in core memory: where prepare left them, or copied in again. */
  private stagePrompt(prompt: PromptHashes): void {
    const blocks = prompt.local.length;
    if (prompt.sequence.length !== blocks) throw new RangeError(`the prompt has ${blocks} local hashes but ${prompt.sequence.length} sequence hashes`);
    if (this.hashes.local !== prompt.local || this.hashes.epoch !== this.core.epoch('hashes')) {
      const ptr = this.ex.hashReserveBlocks(blocks) >>> 0;
      const view = this.core.u64(ptr, 2 * blocks);
      view.set(prompt.local);
      view.set(prompt.sequence, blocks);
      this.hashes.local = prompt.local;
      this.hashes.epoch = this.core.wrote('hashes');
      const { u32 } = this.views();
      u32[U.localPtr] = ptr;
      u32[U.seqPtr] = ptr + 8 * blocks;
      u32[U.blocks] = blocks;
    }
  }

  private matchesHeld(prompt: PromptHashes): boolean {
    return this.matches.local === prompt.local && this.matches.epoch === (this.matcher ? this.matcher.epoch() : this.core.epoch('matches'));
  }

  /** The matcher's matches for the prompt, staged in the core for the decisions that follow. */
  private stageHostMatches(prompt: PromptHashes): void {
    if (this.matcher!.stage) {
      const { pairs, runs } = this.matcher!.stage(prompt.local, this.answerStage);
      this.ex.decideUseMatches(pairs, 0);
      this.ex.decideUseRuns(runs);
      this.matches.local = prompt.local;
      this.matches.epoch = this.matcher!.epoch();
      this.matches.count = pairs;
      return;
    }
    const found = this.matcher!.find(prompt.local);
    const ptr = this.ex.decideReserveMatches(found.count) >>> 0;
    const credits = found.credits;
    if (found.count > 0) {
      this.core.u32(ptr, found.count).set(found.slots.subarray(0, found.count));
      this.core.u32(ptr + 4 * found.count, found.count).set(found.depths.subarray(0, found.count));
      if (credits) this.core.f64(ptr + 8 * found.count, found.count).set(credits.subarray(0, found.count));
    }
    this.ex.decideUseMatches(found.count, credits ? 1 : 0);
    this.matches.local = prompt.local;
    this.matches.epoch = this.matcher!.epoch();
    this.matches.count = found.count;
  }

  private noteMatches(prompt: PromptHashes): void {
    this.matches.local = prompt.local;
    this.matches.epoch = this.core.wrote('matches');
    this.matches.count = this.views().u32[U.matches]!;
  }

  private stageConstraints(constraints: DecisionConstraints): void {
    const { slots, excluded, groups } = constraints;
    const ex = this.ex;
    let list = NONE;
    let exclusions = 0;
    let groupCount = NONE;
    if (slots) {
      ex.selectReserveAllowed(slots.length);
      this.staged.allowed.write(ex.selectAllowedPtr() >>> 0, slots);
      list = slots.length;
    }
    if (excluded) {
      ex.selectReserveExcluded(excluded.length);
      this.staged.excluded.write(ex.selectExcludedPtr() >>> 0, excluded);
      exclusions = excluded.length;
    }
    if (groups) {
      const n = groups.allowed.length;
      if (groups.multipliers.length !== n) throw new RangeError(`the group table has ${n} allowed flags but ${groups.multipliers.length} multipliers`);
      ex.selectReserveGroups(n);
      this.staged.groupAllowed.write(ex.selectGroupAllowedPtr() >>> 0, groups.allowed);
      this.staged.groupMultipliers.write(ex.selectGroupMultiplierPtr() >>> 0, groups.multipliers);
      groupCount = n;
    }
    const { u32 } = this.views();
    u32[U.listCount] = list;
    u32[U.excludedCount] = exclusions;
    u32[U.groupCount] = groupCount;
  }

  /** After a decideRun: the projection (when whole) and the matches it left. */
  private afterRun(request: DecisionRequest): void {
    if (this.views().u32[U.partial] === 0) this.ledger.markProjected(request.promptTokens, this.blockSize);
    else this.ledger.forgetProjection();
    if (this.views().u32[U.flags]! & FLAG_FIND) this.noteMatches(request.prompt);
  }

  private finish(request: DecisionRequest, requestId: string | null): Decision {
    this.afterRun(request);
    const { f64, u32 } = this.views();
    const slot = u32[U.slot]! | 0;
    // 2: the core had no memory to record it and cleared the worker's entries; the index changed either way.
    const routed = u32[U.routed]! !== 0;
    if (requestId !== null && slot >= 0) this.ledger.adopt(requestId, u32[U.handle]!);
    if (routed) this.core.wrote('matches');
    return {
      slot,
      cost: f64[F.cost]!,
      overlapBlocks: slot >= 0 ? u32[U.overlap]! : 0,
      cachedBlocks: slot >= 0 ? f64[F.cachedBlocks]! : 0,
      counts: this.readCounts(),
      path: u32[U.path] === PATH_FAST ? 'fast' : 'scan',
      routed,
    };
  }

  private readCounts(): EligibilityCounts {
    const c = this.views().counts;
    return { present: c[0]!, available: c[1]!, allowed: c[2]!, overloaded: c[3]!, eligible: c[4]! };
  }

  /**
   * The block's views, made again only once memory grew: growing detaches
   * every view of the old buffer, which then reads as length 0 (cheaper to
   * check than the memory's buffer on every call).
   */
  private views(): BlockViews {
    if (this.blockViews.u32.length === 0) {
      this.blockViews = {
        f64: this.core.f64(this.block, 22),
        u32: this.core.u32(this.block, 40),
        counts: this.core.u32(this.ex.selectCountsPtr() >>> 0, 5),
      };
    }
    return this.blockViews;
  }
}
