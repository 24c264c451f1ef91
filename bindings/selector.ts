// Worker selection over the wasm core (assembly/select.ts, select-fast.ts):
// eligibility, the default cost and the picker, over the rows of a LoadTable in
// the same Core. After enableFastPath, select() answers temperature-0 decisions
// with the model fleet's parameters from the workers the request touches and the
// ledger's trees, without the full scan, and picks the worker the scan would.
// Decisions are reproducible: the core's generator is seeded here.
import type { CoreExports } from './core.js';
import type { LoadTable } from './load-table.js';
import {
  busyLimits,
  checkCounts,
  checkSeed,
  checkTaintWeights,
  checkTemperature,
  columnsGone,
  costWeights,
  fastPathArgs,
  notScored,
  staleProjection,
  type CostOptions,
  type EligibilityCounts,
  type EligibilityOptions,
  type FastPathConfig,
  type SelectOptions,
  type Selection,
  type SelectionPath,
  type SelectorColumns,
  type WorkerSelector,
} from './selection-contract.js';

export interface SelectExports {
  selectReserve(): void;
  selectColumn(id: number): number;
  selectCountsPtr(): number;
  selectReserveAllowed(count: number): void;
  selectAllowedPtr(): number;
  selectLastCost(): number;
  selectEligibility(allowedCount: number, prefillTokens: number, prefillFraction: number, decodeFraction: number): number;
  selectCost(overlapCredit: number, prefillLoadScale: number, activeRequestWeight: number, multipliers: number): void;
  selectPick(temperature: number): number;
  selectDecide(
    allowedCount: number,
    prefillTokens: number,
    prefillFraction: number,
    decodeFraction: number,
    overlapCredit: number,
    prefillLoadScale: number,
    activeRequestWeight: number,
    useTaint: number,
    temperature: number,
    forceScan: number,
  ): number;
  selectLastPath(): number;
  selectSeed(seed: number): void;
  selectNextRandom(): number;
}

/** Column ids of assembly/select.ts. */
const Col = { Eligible: 0, Reason: 1, Cost: 2, Taint: 4 } as const;
/** selectLastPath() values. */
const PATH_FAST = 1;
/** Where selectCost takes cost multipliers from (assembly/constraints.ts). */
export const Multipliers = { none: 0, taint: 1, group: 2 } as const;

export class Selector implements WorkerSelector {
  readonly ledger: LoadTable;
  private readonly ex: SelectExports & CoreExports;
  private scored = false;
  private path: SelectionPath | undefined;
  // The last fast-path select's [allowedCount, busy limits x 3, cost weights x 3],
  // while its columns are still to be filled (by the scan, when first read).
  private readonly fastArgs = new Float64Array(7);
  private unfilled = false;
  private viewsKey = '';
  private cols!: SelectorColumns;

  /** `seed` (a u32, default 0) fixes every tie-break and softmax draw. */
  constructor(options: { ledger: LoadTable; seed?: number }) {
    this.ledger = options.ledger;
    this.ledger.core.claim('select');
    this.ex = this.ledger.core.kernel<SelectExports>();
    this.reseed(options.seed ?? 0);
  }

  /** After a fast-path select() the scan fills them when first read (O(rows)). */
  get columns(): SelectorColumns {
    if (this.unfilled) this.fillColumns();
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

  get lastPath(): SelectionPath | undefined {
    return this.path;
  }

  enableFastPath(config: FastPathConfig): void {
    const [scale, weight, blockSize, ...limits] = fastPathArgs(config);
    this.ledger.configureCost({ kind: 0, scale, weight, third: 0, blockSize });
    this.ledger.openLimits(limits);
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
    const allowedCount = this.stageAllowed(options.allowedSlots);
    this.ex.selectEligibility(allowedCount, prefillTokens, prefillFraction, decodeFraction);
    this.scored = false;
    this.path = undefined;
    this.unfilled = false;
    return this.counts();
  }

  score(options: CostOptions = {}): void {
    const [credit, scale, weight] = costWeights(options.cost);
    if (!this.ledger.projected) throw staleProjection();
    if (this.unfilled) this.fillColumns();
    const useTaint = this.stageTaints(options.taintWeights);
    this.ex.selectCost(credit, scale, weight, useTaint ? Multipliers.taint : Multipliers.none);
    this.scored = true;
  }

  pick(temperature = 0): number {
    checkTemperature(temperature);
    if (this.unfilled) this.fillColumns();
    if (!this.scored) throw notScored();
    return this.ex.selectPick(temperature);
  }

  /**
   * The fast path where it applies (see FastPathConfig), else the three steps
   * fused into one pass in the core, with the same result as calling them in turn.
   */
  select(options: SelectOptions = {}): Selection {
    const temperature = options.temperature ?? 0;
    checkTemperature(temperature);
    const [prefillTokens, prefillFraction, decodeFraction] = busyLimits(options.busy);
    const [credit, scale, weight] = costWeights(options.cost);
    if (!this.ledger.projected) throw staleProjection();
    const allowedCount = this.stageAllowed(options.allowedSlots);
    const useTaint = this.stageTaints(options.taintWeights);
    const forceScan = options.fullScan ? 1 : 0;
    const slot = this.ex.selectDecide(allowedCount, prefillTokens, prefillFraction, decodeFraction, credit, scale, weight, useTaint, temperature, forceScan);
    this.path = this.ex.selectLastPath() === PATH_FAST ? 'fast' : 'scan';
    this.scored = this.path === 'scan';
    this.unfilled = this.path === 'fast';
    if (this.unfilled) {
      const args = this.fastArgs;
      args[0] = allowedCount;
      args[1] = prefillTokens;
      args[2] = prefillFraction;
      args[3] = decodeFraction;
      args[4] = credit;
      args[5] = scale;
      args[6] = weight;
    }
    return { slot, cost: this.ex.selectLastCost(), counts: this.counts() };
  }

  /** Eligibility and cost of every row for the last fast-path select, as its scan would have written them. */
  private fillColumns(): void {
    if (!this.ledger.projected) throw columnsGone();
    const [allowedCount, prefillTokens, prefillFraction, decodeFraction, credit, scale, weight] = this.fastArgs;
    this.ex.selectEligibility(allowedCount!, prefillTokens!, prefillFraction!, decodeFraction!);
    this.ex.selectCost(credit!, scale!, weight!, Multipliers.none);
    this.unfilled = false;
    this.scored = true;
  }

  private counts(): EligibilityCounts {
    const c = this.ledger.core.u32(this.ex.selectCountsPtr(), 5);
    return { present: c[0]!, available: c[1]!, allowed: c[2]!, overloaded: c[3]!, eligible: c[4]! };
  }

  /** Copies the allow-list into the core; its length, or -1 when there is none. */
  private stageAllowed(slots: ArrayLike<number> | undefined): number {
    if (!slots) return -1;
    checkCounts('allowedSlots', slots);
    this.ex.selectReserveAllowed(slots.length);
    if (slots.length > 0) this.ledger.core.u32(this.ex.selectAllowedPtr(), slots.length).set(slots);
    return slots.length;
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
