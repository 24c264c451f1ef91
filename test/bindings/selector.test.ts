import { describe, expect, it } from 'vitest';
import { Core } from '../../bindings/core.js';
import { LoadTable } from '../../bindings/load-table.js';
import { EligibilityReason as Reason, type LoadLedger, type WorkerSelector } from '../../bindings/selection-contract.js';
import { Selector } from '../../bindings/selector.js';
import { addFleet, chain, IMPLS, makePair } from './load-table.fixtures.js';

// Upper-tail critical values of the chi-square distribution at p = 0.001, by degrees of freedom.
const CHI2_CRITICAL_P001: Record<number, number> = { 3: 16.266, 9: 27.877 };

function chiSquare(observed: number[], expected: number[]): number {
  return observed.reduce((sum, o, i) => sum + (o - expected[i]!) ** 2 / expected[i]!, 0);
}

/** Picks `draws` times at one temperature over the current eligibility and costs; counts per slot. */
function histogram(selector: WorkerSelector, rows: number, draws: number, temperature: number): number[] {
  const counts = new Array<number>(rows).fill(0);
  for (let i = 0; i < draws; i++) counts[selector.pick(temperature)]!++;
  return counts;
}

/** Gives each worker active decode blocks, prefill complete, so costs differ only by decode load. */
function loadDecode(ledger: LoadLedger, slots: number[], blocks: number[]): void {
  slots.forEach((slot, i) => {
    if (blocks[i]! === 0) return;
    ledger.add(`load-${slot}`, slot, chain(1000 + slot, blocks[i]!), 0, 0);
  });
}

describe.each(IMPLS)('Selector rules (%s)', (impl) => {
  it('the reference worked example: overlaps 2/5/8, decode 10/5/9, raw prefill 10 -> costs 18/10/11, the second wins', () => {
    const { ledger, selector } = makePair(impl);
    const [w1, w2, w3] = addFleet(ledger, 3);
    const prompt = chain(1, 4);
    ledger.add('a', w1!, chain(2, 6), 0, 0); // 6 active, none of the prompt: 6 + 4 = 10
    ledger.add('b', w2!, [...prompt, 99n], 0, 0); // 5 active, all 4 prompt blocks among them: 5
    ledger.add('c', w3!, chain(3, 5), 0, 0); // 5 active, none of the prompt: 9
    ledger.project({ seqHashes: prompt, promptTokens: 160, blockSize: 16, overlaps: { slots: [w1!, w2!, w3!], depths: [2, 5, 8] } });
    expect(Array.from(ledger.projection.potentialDecodeBlocks)).toEqual([10, 5, 9]);
    const selection = selector.select({ cost: { overlapCredit: 1 } });
    expect(Array.from(selector.columns.cost)).toEqual([18, 10, 11]);
    expect(selection).toEqual({ slot: w2, cost: 10, counts: { present: 3, available: 3, allowed: 3, overloaded: 0, eligible: 3 } });
  });

  it('eligibility: absent, unavailable and not-allowed rows are out, with a reason each', () => {
    const { ledger, selector } = makePair(impl);
    const [a, b, c, d] = addFleet(ledger, 4);
    ledger.removeWorker(a!);
    ledger.setAvailable(b!, false);
    const counts = selector.eligibility({ allowedSlots: [b!, d!, 40] });
    expect(Array.from(selector.columns.reason)).toEqual([Reason.absent, Reason.unavailable, Reason.notAllowed, Reason.eligible]);
    expect(Array.from(selector.columns.eligible)).toEqual([0, 0, 0, 1]);
    expect(counts).toEqual({ present: 3, available: 2, allowed: 1, overloaded: 0, eligible: 1 });
    expect(c).toBe(2);
  });

  it('busy: active prefill tokens over the absolute threshold (strictly)', () => {
    const { ledger, selector } = makePair(impl);
    const [a, b] = addFleet(ledger, 2);
    ledger.add('r', a!, [], 500, 0);
    ledger.add('s', b!, [], 400, 0);
    expect(selector.eligibility({ busy: { prefillTokens: 400 } })).toMatchObject({ overloaded: 1, eligible: 1 });
    expect(Array.from(selector.columns.reason)).toEqual([Reason.busyPrefillTokens, Reason.eligible]);
    expect(selector.eligibility({ busy: { prefillTokens: 500 } })).toMatchObject({ overloaded: 0, eligible: 2 });
  });

  it('busy: active prefill tokens over a fraction of max batched tokens, for workers that report one', () => {
    const { ledger, selector } = makePair(impl);
    const [a, b, c] = addFleet(ledger, 3, 100, 1000);
    ledger.setWorker(c!, { totalBlocks: 100, maxBatchedTokens: 0 });
    ledger.add('r', a!, [], 600, 0);
    ledger.add('s', b!, [], 500, 0);
    ledger.add('t', c!, [], 10_000, 0);
    selector.eligibility({ busy: { prefillFraction: 0.5 } });
    expect(Array.from(selector.columns.reason)).toEqual([Reason.busyPrefillFraction, Reason.eligible, Reason.eligible]);
  });

  it('busy: active decode blocks over a fraction of total blocks, for workers that report a capacity', () => {
    const { ledger, selector } = makePair(impl);
    const [a, b, c] = addFleet(ledger, 3, 100, 1000);
    ledger.setWorker(c!, { totalBlocks: 0, maxBatchedTokens: 1000 });
    ledger.add('r', a!, chain(1, 61), 0, 0);
    ledger.add('s', b!, chain(2, 60), 0, 0);
    ledger.add('t', c!, chain(3, 500), 0, 0);
    selector.eligibility({ busy: { decodeFraction: 0.6 } });
    expect(Array.from(selector.columns.reason)).toEqual([Reason.busyDecodeFraction, Reason.eligible, Reason.eligible]);
  });

  it('busy thresholds are OR-ed: any one makes a worker overloaded', () => {
    const { ledger, selector } = makePair(impl);
    const [a, b, c, d] = addFleet(ledger, 4, 100, 1000);
    ledger.add('r', a!, [], 900, 0); // over the absolute threshold only
    ledger.add('s', b!, [], 700, 0); // over the fraction only
    ledger.add('t', c!, chain(1, 80), 0, 0); // over the decode fraction only
    ledger.add('u', d!, chain(2, 10), 100, 0); // under all three
    const busy = { prefillTokens: 800, prefillFraction: 0.6, decodeFraction: 0.75 };
    const counts = selector.eligibility({ busy });
    expect(Array.from(selector.columns.reason)).toEqual([Reason.busyPrefillTokens, Reason.busyPrefillFraction, Reason.busyDecodeFraction, Reason.eligible]);
    expect(counts).toEqual({ present: 4, available: 4, allowed: 4, overloaded: 3, eligible: 1 });
    // each threshold alone catches only its own worker
    expect(selector.eligibility({ busy: { prefillTokens: 800 } }).eligible).toBe(3);
    expect(selector.eligibility({ busy: { prefillFraction: 0.6 } }).eligible).toBe(2); // 900 and 700 are both > 600
    expect(selector.eligibility({ busy: { decodeFraction: 0.75 } }).eligible).toBe(3);
  });

  it('a pinned worker that is busy leaves nothing eligible, and the counts say why', () => {
    const { ledger, selector } = makePair(impl);
    const [a] = addFleet(ledger, 3);
    ledger.add('r', a!, [], 900, 0);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    const selection = selector.select({ allowedSlots: [a!], busy: { prefillTokens: 100 } });
    expect(selection).toEqual({ slot: -1, cost: Infinity, counts: { present: 3, available: 3, allowed: 1, overloaded: 1, eligible: 0 } });
  });

  it('an empty fleet selects nothing', () => {
    const { ledger, selector } = makePair(impl);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    expect(selector.select()).toEqual({ slot: -1, cost: Infinity, counts: { present: 0, available: 0, allowed: 0, overloaded: 0, eligible: 0 } });
  });

  it('cost: scale x max(active prefill blocks + prompt blocks - credit x overlap, 0) + potential decode + weight x requests', () => {
    const { ledger, selector } = makePair(impl);
    const [a, b, c] = addFleet(ledger, 3);
    ledger.add('r1', a!, chain(1, 3), 40, 0); // 2.5 active prefill blocks at bs 16
    ledger.add('r2', a!, chain(2, 1), 0, 0);
    ledger.setAvailable(c!, false);
    // 70 prompt tokens at bs 16: ceil -> 5 prompt blocks; two prompt hashes, none held
    ledger.project({ seqHashes: chain(9, 2), promptTokens: 70, blockSize: 16, overlaps: { slots: [a!, b!], depths: [1, 20] } });
    selector.eligibility();
    selector.score({ cost: { overlapCredit: 0.5, prefillLoadScale: 2, activeRequestWeight: 3 } });
    const cost = selector.columns.cost;
    expect(cost[a!]).toBe(2 * (2.5 + 5 - 0.5 * 1) + (4 + 2) + 3 * 2);
    // the prefill term never goes below zero, however large the credit
    expect(cost[b!]).toBe(2 * 0 + 2 + 0);
    expect(cost[c!]).toBe(Infinity);
  });

  it('cost defaults: credit 1, scale 1, active request weight 0', () => {
    const { ledger, selector } = makePair(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, chain(1, 3), 32, 0);
    ledger.project({ seqHashes: [], promptTokens: 64, blockSize: 16, overlaps: { slots: [a!], depths: [1] } });
    selector.select();
    expect(selector.columns.cost[a!]).toBe(2 + 4 - 1 + 3);
  });

  it('preferred taints multiply the cost by exp(-tanh(sum of weights)), bounded to [e^-1, e^1]', () => {
    const { ledger, selector } = makePair(impl);
    const weights = [0, 0.5, -0.5, 3, -3, 50, -50, 2];
    const slots = addFleet(ledger, weights.length);
    loadDecode(ledger, slots, slots.map(() => 7));
    ledger.project({ seqHashes: [], promptTokens: 48, blockSize: 16 });
    selector.eligibility();
    selector.score({ taintWeights: weights });
    const base = 3 + 7;
    const multiplier = Array.from(selector.columns.cost, (c) => c / base);
    expect(multiplier[0]).toBe(1);
    for (const m of multiplier) {
      expect(m).toBeGreaterThanOrEqual(Math.exp(-1) * (1 - 1e-12));
      expect(m).toBeLessThanOrEqual(Math.E * (1 + 1e-12));
    }
    expect(multiplier[1]!).toBeCloseTo(Math.exp(-Math.tanh(0.5)), 12);
    // a positive weight discounts, and equal negative weight has the reciprocal effect
    expect(multiplier[1]! * multiplier[2]!).toBeCloseTo(1, 12);
    expect(multiplier[5]!).toBeCloseTo(Math.exp(-1), 12);
    expect(multiplier[6]!).toBeCloseTo(Math.E, 12);
    // the most preferred of otherwise equal workers wins
    expect(selector.pick(0)).toBe(slots[5]);
    // no weights, no effect
    selector.score();
    expect(new Set(selector.columns.cost)).toEqual(new Set([base]));
  });

  it('temperature 0 takes the cheapest eligible worker', () => {
    const { ledger, selector } = makePair(impl);
    const slots = addFleet(ledger, 5);
    loadDecode(ledger, slots, [9, 4, 2, 7, 3]);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    expect(selector.select().slot).toBe(slots[2]);
    expect(selector.select({ allowedSlots: [slots[0]!, slots[3]!] }).slot).toBe(slots[3]);
  });

  it('temperature 0 breaks ties uniformly at random (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = makePair(impl, 12345);
    const slots = addFleet(ledger, 12);
    // two cheaper-looking workers are out, so ties run over ten of twelve rows
    ledger.setAvailable(slots[0]!, false);
    loadDecode(ledger, slots, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    selector.eligibility();
    selector.score();
    const draws = 20_000;
    const counts = histogram(selector, 12, draws, 0);
    expect(counts[0]).toBe(0);
    expect(counts[11]).toBe(0);
    const tied = counts.slice(1, 11);
    expect(chiSquare(tied, tied.map(() => draws / 10))).toBeLessThan(CHI2_CRITICAL_P001[9]!);
  });

  it('temperature T > 0 samples p ~ exp(-(c - cmin) / ((cmax - cmin) T)) (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = makePair(impl, 777);
    const slots = addFleet(ledger, 4);
    const decode = [0, 2, 5, 10];
    loadDecode(ledger, slots, decode);
    ledger.project({ seqHashes: [], promptTokens: 0, blockSize: 16 });
    selector.eligibility();
    selector.score();
    expect(Array.from(selector.columns.cost)).toEqual(decode);
    const temperature = 0.5;
    const weights = decode.map((c) => Math.exp(-(c - 0) / ((10 - 0) * temperature)));
    const total = weights.reduce((a, b) => a + b, 0);
    const draws = 20_000;
    const counts = histogram(selector, 4, draws, temperature);
    expect(chiSquare(counts, weights.map((w) => (w / total) * draws))).toBeLessThan(CHI2_CRITICAL_P001[3]!);
  });

  it('temperature T > 0 over equal costs is uniform (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = makePair(impl, 99);
    addFleet(ledger, 4);
    ledger.project({ seqHashes: [], promptTokens: 32, blockSize: 16 });
    selector.eligibility();
    selector.score();
    const draws = 8000;
    const counts = histogram(selector, 4, draws, 1.5);
    expect(chiSquare(counts, [2000, 2000, 2000, 2000])).toBeLessThan(CHI2_CRITICAL_P001[3]!);
  });

  it('a seed fixes every decision; another seed makes others', () => {
    const run = (seed: number) => {
      const { ledger, selector } = makePair(impl, seed);
      addFleet(ledger, 10);
      ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
      return Array.from({ length: 60 }, (_, i) => selector.select({ temperature: i % 2 }).slot);
    };
    expect(run(5)).toEqual(run(5));
    expect(run(5)).not.toEqual(run(6));
  });

  it('a custom filter may clear eligible rows between eligibility and score', () => {
    const { ledger, selector } = makePair(impl);
    const slots = addFleet(ledger, 3);
    loadDecode(ledger, slots, [1, 2, 3]);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    selector.eligibility();
    selector.columns.eligible[slots[0]!] = 0;
    selector.score();
    expect(selector.columns.cost[slots[0]!]).toBe(Infinity);
    expect(selector.pick()).toBe(slots[1]);
  });

  it('scoring needs a projection of the current ledger, and picking needs a score', () => {
    const { ledger, selector } = makePair(impl);
    const [a] = addFleet(ledger, 2);
    selector.eligibility();
    expect(() => selector.score()).toThrow(/ledger.project/);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    ledger.add('r', a!, [], 1, 0);
    expect(() => selector.score()).toThrow(/ledger.project/);
    expect(() => selector.pick()).toThrow(/score\(\)/);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    selector.score();
    selector.eligibility();
    expect(() => selector.pick()).toThrow(/score\(\)/);
  });

  it('rejects bad options with errors naming the field', () => {
    const { ledger, selector } = makePair(impl);
    addFleet(ledger, 2);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    expect(() => selector.select({ busy: { prefillTokens: -1 } })).toThrow(/busy.prefillTokens/);
    expect(() => selector.select({ busy: { prefillFraction: Number.NaN } })).toThrow(/busy.prefillFraction/);
    expect(() => selector.select({ busy: { decodeFraction: 1.5 } })).toThrow(/busy.decodeFraction/);
    expect(() => selector.select({ cost: { overlapCredit: -0.1 } })).toThrow(/cost.overlapCredit/);
    expect(() => selector.select({ cost: { prefillLoadScale: Infinity } })).toThrow(/cost.prefillLoadScale/);
    expect(() => selector.select({ cost: { activeRequestWeight: -2 } })).toThrow(/cost.activeRequestWeight/);
    expect(() => selector.select({ temperature: -1 })).toThrow(/temperature/);
    expect(() => selector.select({ allowedSlots: [0, 1.5] })).toThrow(/allowedSlots\[1\]/);
    expect(() => selector.select({ taintWeights: [0, Number.NaN] })).toThrow(/taintWeights\[1\]/);
    expect(() => selector.select({ taintWeights: [0, 0, 0] })).toThrow(/taintWeights has 3 entries/);
    expect(() => selector.reseed(-3)).toThrow(/seed/);
  });
});

describe('Selector (wasm)', () => {
  it('draws from the same xoshiro128** stream as the twin, bit for bit', () => {
    for (const seed of [0, 1, 42, 0xffffffff]) {
      const wasm = makePair('wasm', seed).selector;
      const twin = makePair('twin', seed).selector;
      const a = Array.from({ length: 500 }, () => wasm.nextRandom());
      const b = Array.from({ length: 500 }, () => twin.nextRandom());
      expect(a).toEqual(b);
      expect(new Set(a).size).toBe(500);
    }
  });

  it('the fused select makes the same softmax draws as the three steps', () => {
    const fused = makePair('wasm', 3);
    const steps = makePair('wasm', 3);
    for (const { ledger } of [fused, steps]) {
      const slots = addFleet(ledger, 6);
      loadDecode(ledger, slots, [0, 1, 1, 4, 6, 9]);
      ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    }
    const viaSelect = Array.from({ length: 300 }, () => fused.selector.select({ temperature: 0.7 }).slot);
    const viaSteps = Array.from({ length: 300 }, () => {
      steps.selector.eligibility();
      steps.selector.score();
      return steps.selector.pick(0.7);
    });
    expect(viaSelect).toEqual(viaSteps);
    expect(new Set(viaSelect).size).toBe(6);
  });

  it('claims the select kernel of its ledger\'s Core', () => {
    const ledger = new LoadTable({ core: new Core() });
    new Selector({ ledger });
    expect(() => new Selector({ ledger })).toThrow(/already holds a select/);
  });
});
