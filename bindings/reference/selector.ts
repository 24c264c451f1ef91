// Pure-TS twin of Selector over a ReferenceLoadTable: always the full scan.
// It implements the core's generator (xoshiro128**, same seeding, the same
// bounded draw) bit for bit and the cost with the same floating-point
// operations in the same order (assembly/cost/kv.ts), so the core's picks at
// temperature 0, ties included, match it exactly, on the fast path too. exp
// and tanh may differ from the core's in the last ulp, so costs with taint
// weights and softmax draws match only to a tolerance; cost multipliers given
// as numbers (score's `multipliers`) match exactly. enableFastPath checks its
// input and changes nothing here.
import {
  busyLimits,
  checkCounts,
  checkSeed,
  checkTaintWeights,
  checkTemperature,
  costWeights,
  EligibilityReason as Reason,
  fastPathArgs,
  notScored,
  staleProjection,
  type CostOptions,
  type EligibilityCounts,
  type EligibilityOptions,
  type FastPathConfig,
  type SelectOptions,
  type SelectionPath,
  type Selection,
  type SelectorColumns,
  type WorkerSelector,
} from '../selection-contract.js';
import type { ReferenceLoadTable } from './load-table.js';

export class Xoshiro128 {
  private s = new Uint32Array(4);

  constructor(seed: number) {
    this.seed(seed);
  }

  seed(seed: number): void {
    const weyl = [0x9e3779b9, 0x3c6ef372, 0xdaa66d2b, 0x78dde6e4];
    for (let i = 0; i < 4; i++) this.s[i] = murmurFinalize((seed + weyl[i]!) >>> 0);
  }

  next(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = (s[1]! << 9) >>> 0;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 11);
    return result;
  }

  unit(): number {
    return this.next() / 4294967296;
  }

  /**
   * Uniform in [0, n) for n >= 1: the high word of a 32 x 32-bit product,
   * redrawing the products whose low word falls in the biased band (Lemire's
   * multiply-and-reject, as assembly/random.ts). n = 1 draws nothing.
   */
  below(n: number): number {
    if (n <= 1) return 0;
    const size = BigInt(n);
    let product = BigInt(this.next()) * size;
    if (Number(product & 0xffffffffn) < n) {
      const threshold = (4294967296 - n) % n;
      while (Number(product & 0xffffffffn) < threshold) product = BigInt(this.next()) * size;
    }
    return Number(product >> 32n);
  }
}

/** score's options here: the contract's, per-slot cost multipliers, and the ttft cost (the fused decision's twin uses them). */
export interface ReferenceCostOptions extends CostOptions {
  /** Per slot, a factor the cost is multiplied by (absent: 1). */
  multipliers?: ArrayLike<number>;
  /** Score by the ttft cost (assembly/cost/ttft.ts) with these weights instead of the kv cost. */
  ttft?: { reuseWeight: number; decodeWeight: number; kvWeight: number };
}

function rotl(x: number, r: number): number {
  return ((x << r) | (x >>> (32 - r))) >>> 0;
}

function murmurFinalize(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

export class ReferenceSelector implements WorkerSelector {
  readonly ledger: ReferenceLoadTable;
  private readonly random: Xoshiro128;
  private eligible = new Uint8Array(0);
  private reason = new Uint8Array(0);
  private cost = new Float64Array(0);
  private scored = false;
  private path: SelectionPath | undefined;

  constructor(options: { ledger: ReferenceLoadTable; seed?: number }) {
    this.ledger = options.ledger;
    const seed = options.seed ?? 0;
    checkSeed(seed);
    this.random = new Xoshiro128(seed);
  }

  get columns(): SelectorColumns {
    this.fitRows();
    return { eligible: this.eligible, reason: this.reason, cost: this.cost };
  }

  get lastPath(): SelectionPath | undefined {
    return this.path;
  }

  enableFastPath(config: FastPathConfig): void {
    fastPathArgs(config);
  }

  reseed(seed: number): void {
    checkSeed(seed);
    this.random.seed(seed);
  }

  nextRandom(): number {
    return this.random.next();
  }

  eligibility(options: EligibilityOptions = {}): EligibilityCounts {
    const [prefillTokens, prefillFraction, decodeFraction] = busyLimits(options.busy);
    if (options.allowedSlots) checkCounts('allowedSlots', options.allowedSlots);
    const allowed = options.allowedSlots ? new Set(Array.from(options.allowedSlots)) : undefined;
    this.fitRows();
    const c = this.ledger.columns;
    const counts = { present: 0, available: 0, allowed: 0, overloaded: 0, eligible: 0 };
    for (let w = 0; w < this.ledger.rows; w++) {
      const present = c.present[w] === 1;
      const available = present && c.available[w] === 1;
      const inList = available && (!allowed || allowed.has(w));
      let reason: number = Reason.eligible;
      if (!present) reason = Reason.absent;
      else if (!available) reason = Reason.unavailable;
      else if (!inList) reason = Reason.notAllowed;
      else if (c.activePrefillTokens[w]! > prefillTokens) reason = Reason.busyPrefillTokens;
      else if (c.maxBatchedTokens[w]! > 0 && c.activePrefillTokens[w]! > prefillFraction * c.maxBatchedTokens[w]!) {
        reason = Reason.busyPrefillFraction;
      } else if (c.totalBlocks[w]! > 0 && c.activeDecodeBlocks[w]! / c.totalBlocks[w]! > decodeFraction) {
        reason = Reason.busyDecodeFraction;
      }
      if (present) counts.present++;
      if (available) counts.available++;
      if (inList) counts.allowed++;
      if (inList && reason !== Reason.eligible) counts.overloaded++;
      if (reason === Reason.eligible) counts.eligible++;
      this.reason[w] = reason;
      this.eligible[w] = reason === Reason.eligible ? 1 : 0;
    }
    this.scored = false;
    return counts;
  }

  score(options: ReferenceCostOptions = {}): void {
    if (options.ttft) return this.scoreTtft(options.ttft, options.multipliers);
    const [credit, scale, weight] = costWeights(options.cost);
    const projected = this.ledger.projected;
    if (!projected) throw staleProjection();
    const taints = options.taintWeights;
    if (taints) checkTaintWeights(taints, this.ledger.rows);
    this.fitRows();
    const c = this.ledger.columns;
    const p = this.ledger.projection;
    const blockSize = projected.blockSize;
    const promptBlocks = Math.ceil(projected.promptTokens / blockSize);
    const held = this.ledger.projectedHeldBlocks;
    const overlap = this.ledger.projectedCredits;
    // scale x max(P / bs + B - credit x O, 0) + (D + S - H) + a x R, evaluated as in
    // assembly/cost-model.ts: key + K - (scale x credit x O + H) unless the prefill term is clamped.
    const constant = scale * promptBlocks + this.ledger.projectedSeqCount;
    for (let w = 0; w < this.ledger.rows; w++) {
      if (!this.eligible[w]) {
        this.cost[w] = Infinity;
        continue;
      }
      const tokens = c.activePrefillTokens[w]!;
      const requests = c.activeRequests[w]!;
      const credited = credit * overlap[w]!;
      let cost: number;
      if (tokens / blockSize + promptBlocks - credited < 0) {
        cost = p.potentialDecodeBlocks[w]! + weight * requests;
      } else {
        const key = scale * (tokens / blockSize) + c.activeDecodeBlocks[w]! + weight * requests;
        cost = key + constant - (scale * credited + held[w]!);
      }
      const taint = taints?.[w] ?? 0;
      if (taint !== 0) cost *= Math.exp(-Math.tanh(taint));
      if (options.multipliers) cost *= options.multipliers[w] ?? 1;
      this.cost[w] = cost;
    }
    this.scored = true;
  }

  /**
   * The ttft cost of every eligible row: (key + K) - r x cached, with
   * key = base / msPerToken + (Q + d x D + k x A) (A: the active KV blocks
   * times the block size), r = 1 + kappa x
   * (fleet prefill / fleet batched tokens), K = r x P and cached =
   * min(max(overlap, held) x bs, P), in the core's order of operations.
   */
  private scoreTtft(weights: { reuseWeight: number; decodeWeight: number; kvWeight: number }, multipliers: ArrayLike<number> | undefined): void {
    const projected = this.ledger.projected;
    if (!projected) throw staleProjection();
    this.fitRows();
    const c = this.ledger.columns;
    const overlap = this.ledger.projectedCredits;
    const held = this.ledger.projectedHeldBlocks;
    const { prefillTokens, batchedTokens } = this.ledger.fleetTotals();
    const reuse = batchedTokens > 0 ? 1 + weights.reuseWeight * (prefillTokens / batchedTokens) : 1;
    const prompt = projected.promptTokens;
    const constant = reuse * prompt;
    for (let w = 0; w < this.ledger.rows; w++) {
      if (!this.eligible[w]) {
        this.cost[w] = Infinity;
        continue;
      }
      const activeTokens = c.activeDecodeBlocks[w]! * projected.blockSize;
      const key = c.speedBaseMs[w]! / c.speedMsPerToken[w]! + (c.activePrefillTokens[w]! + weights.decodeWeight * c.decodingRequests[w]! + weights.kvWeight * activeTokens);
      const cached = Math.min(Math.max(overlap[w]!, held[w]!) * projected.blockSize, prompt);
      let cost = key + constant - reuse * cached;
      if (multipliers) cost *= multipliers[w] ?? 1;
      this.cost[w] = cost;
    }
    this.scored = true;
  }

  pick(temperature = 0): number {
    checkTemperature(temperature);
    if (!this.scored) throw notScored();
    const rows = [...this.eligible.keys()].filter((w) => this.eligible[w]);
    if (rows.length === 0) return -1;
    return temperature > 0 ? this.pickSoftmax(rows, temperature) : this.pickCheapest(rows);
  }

  select(options: SelectOptions = {}): Selection {
    const temperature = options.temperature ?? 0;
    checkTemperature(temperature);
    const counts = this.eligibility(options);
    this.score(options);
    const slot = this.pick(temperature);
    this.path = 'scan';
    return { slot, cost: slot < 0 ? Infinity : this.cost[slot]!, counts };
  }

  /** The r-th of the rows at the minimum cost, in slot order, r uniform. */
  private pickCheapest(rows: number[]): number {
    let low = Infinity;
    for (const w of rows) low = Math.min(low, this.cost[w]!);
    const cheapest = rows.filter((w) => this.cost[w] === low);
    return cheapest[this.random.below(cheapest.length)]!;
  }

  private pickSoftmax(rows: number[], temperature: number): number {
    let low = Infinity;
    let high = -Infinity;
    for (const w of rows) {
      low = Math.min(low, this.cost[w]!);
      high = Math.max(high, this.cost[w]!);
    }
    const range = high - low;
    const weights = rows.map((w) => (range > 0 ? Math.exp(-((this.cost[w]! - low) / range / temperature)) : 1));
    let total = 0;
    for (const weight of weights) total += weight;
    const target = this.random.unit() * total;
    let acc = 0;
    for (let i = 0; i < rows.length; i++) {
      acc += weights[i]!;
      if (target < acc) return rows[i]!;
    }
    return rows[rows.length - 1]!;
  }

  private fitRows(): void {
    const rows = this.ledger.rows;
    if (this.eligible.length === rows) return;
    const grow = <T extends Uint8Array | Float64Array>(old: T, make: (n: number) => T): T => {
      const fresh = make(rows);
      fresh.set(old.subarray(0, rows));
      return fresh;
    };
    this.eligible = grow(this.eligible, (n) => new Uint8Array(n));
    this.reason = grow(this.reason, (n) => new Uint8Array(n));
    this.cost = grow(this.cost, (n) => new Float64Array(n));
  }
}
