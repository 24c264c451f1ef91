// Worker selection over the wasm core (assembly/select.ts): eligibility, the
// default cost and the picker, over the rows of a LoadTable in the same Core.
// Decisions are reproducible: the core's generator is seeded here.
import type { CoreExports } from './core.js';
import type { LoadTable } from './load-table.js';
import {
  busyLimits,
  checkCounts,
  checkSeed,
  checkTaintWeights,
  checkTemperature,
  costWeights,
  notScored,
  staleProjection,
  type CostOptions,
  type EligibilityCounts,
  type EligibilityOptions,
  type SelectOptions,
  type Selection,
  type SelectorColumns,
  type WorkerSelector,
} from './selection-contract.js';

export interface SelectExports {
  selectReserve(): void;
  selectColumn(id: number): number;
  selectCountsPtr(): number;
  selectEligibility(useAllowed: number, prefillTokens: number, prefillFraction: number, decodeFraction: number): number;
  selectCost(overlapCredit: number, prefillLoadScale: number, activeRequestWeight: number, useTaint: number): void;
  selectPick(temperature: number): number;
  selectRun(
    useAllowed: number,
    prefillTokens: number,
    prefillFraction: number,
    decodeFraction: number,
    overlapCredit: number,
    prefillLoadScale: number,
    activeRequestWeight: number,
    useTaint: number,
    temperature: number,
  ): number;
  selectSeed(seed: number): void;
  selectNextRandom(): number;
}

/** Column ids of assembly/select.ts. */
const Col = { Eligible: 0, Reason: 1, Cost: 2, Allowed: 3, Taint: 4 } as const;

export class Selector implements WorkerSelector {
  readonly ledger: LoadTable;
  private readonly ex: SelectExports & CoreExports;
  private scored = false;
  private viewsKey = '';
  private cols!: SelectorColumns;

  /** `seed` (a u32, default 0) fixes every tie-break and softmax draw. */
  constructor(options: { ledger: LoadTable; seed?: number }) {
    this.ledger = options.ledger;
    this.ledger.core.claim('select');
    this.ex = this.ledger.core.kernel<SelectExports>();
    this.reseed(options.seed ?? 0);
  }

  get columns(): SelectorColumns {
    this.ex.selectReserve();
    const rows = this.ledger.rows;
    const key = `${this.ledger.core.generation}:${rows}`;
    if (key !== this.viewsKey) {
      this.viewsKey = key;
      const core = this.ledger.core;
      this.cols = {
        eligible: core.u8(this.ex.selectColumn(Col.Eligible), rows),
        reason: core.u8(this.ex.selectColumn(Col.Reason), rows),
        cost: core.f64(this.ex.selectColumn(Col.Cost), rows),
      };
    }
    return this.cols;
  }

  reseed(seed: number): void {
    checkSeed(seed);
    this.ex.selectSeed(seed);
  }

  nextRandom(): number {
    return this.ex.selectNextRandom() >>> 0;
  }

  eligibility(options: EligibilityOptions = {}): EligibilityCounts {
    const [prefillTokens, prefillFraction, decodeFraction] = busyLimits(options.busy);
    const useAllowed = this.stageAllowed(options.allowedSlots);
    this.ex.selectEligibility(useAllowed, prefillTokens, prefillFraction, decodeFraction);
    this.scored = false;
    return this.counts();
  }

  score(options: CostOptions = {}): void {
    const [credit, scale, weight] = costWeights(options.cost);
    if (!this.ledger.projected) throw staleProjection();
    const useTaint = this.stageTaints(options.taintWeights);
    this.ex.selectCost(credit, scale, weight, useTaint);
    this.scored = true;
  }

  pick(temperature = 0): number {
    checkTemperature(temperature);
    if (!this.scored) throw notScored();
    return this.ex.selectPick(temperature);
  }

  /** The three steps fused into one pass in the core; the same result as calling them in turn. */
  select(options: SelectOptions = {}): Selection {
    const temperature = options.temperature ?? 0;
    checkTemperature(temperature);
    const [prefillTokens, prefillFraction, decodeFraction] = busyLimits(options.busy);
    const [credit, scale, weight] = costWeights(options.cost);
    if (!this.ledger.projected) throw staleProjection();
    const useAllowed = this.stageAllowed(options.allowedSlots);
    const useTaint = this.stageTaints(options.taintWeights);
    const slot = this.ex.selectRun(useAllowed, prefillTokens, prefillFraction, decodeFraction, credit, scale, weight, useTaint, temperature);
    this.scored = true;
    return { slot, cost: slot < 0 ? Infinity : this.columns.cost[slot]!, counts: this.counts() };
  }

  private counts(): EligibilityCounts {
    const c = this.ledger.core.u32(this.ex.selectCountsPtr(), 5);
    return { present: c[0]!, available: c[1]!, allowed: c[2]!, overloaded: c[3]!, eligible: c[4]! };
  }

  /** Writes the allow-list into the core's ALLOWED column; 1 when there is one. */
  private stageAllowed(slots: ArrayLike<number> | undefined): number {
    if (!slots) return 0;
    checkCounts('allowedSlots', slots);
    this.ex.selectReserve();
    const rows = this.ledger.rows;
    const mask = this.ledger.core.u8(this.ex.selectColumn(Col.Allowed), rows);
    mask.fill(0);
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      if (slot < rows) mask[slot] = 1;
    }
    return 1;
  }

  /** Writes the taint weights into the core's TAINT column; 1 when there are some. */
  private stageTaints(weights: ArrayLike<number> | undefined): number {
    if (!weights) return 0;
    checkTaintWeights(weights, this.ledger.rows);
    this.ex.selectReserve();
    const column = this.ledger.core.f64(this.ex.selectColumn(Col.Taint), this.ledger.rows);
    column.fill(0);
    column.set(weights);
    return 1;
  }
}
