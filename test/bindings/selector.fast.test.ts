import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../bindings/load-table.js';
import { EligibilityReason as Reason, type FastPathConfig, type SelectOptions } from '../../bindings/selection-contract.js';
import { Selector } from '../../bindings/selector.js';
import { addFleet, chain, makePair } from './load-table.fixtures.js';

// Upper-tail critical values of the chi-square distribution at p = 0.001, by degrees of freedom.
const CHI2_CRITICAL_P001: Record<number, number> = { 3: 16.266, 7: 24.322, 14: 36.123, 19: 43.82, 29: 58.301, 39: 72.055 };

function chiSquareUniform(counts: number[]): number {
  const expected = counts.reduce((a, b) => a + b, 0) / counts.length;
  return counts.reduce((sum, o) => sum + (o - expected) ** 2 / expected, 0);
}

function fastPair(seed: number) {
  const ledger = new LoadTable();
  return { ledger, selector: new Selector({ ledger, seed }) };
}

/** Selects `draws` times (all on the fast path); picks per slot. */
function drawFast(selector: Selector, rows: number, draws: number, options: SelectOptions): number[] {
  const counts = new Array<number>(rows).fill(0);
  for (let i = 0; i < draws; i++) {
    const { slot } = selector.select(options);
    expect(selector.lastPath).toBe('fast');
    counts[slot]!++;
  }
  return counts;
}

const CONFIG: FastPathConfig = { blockSize: 16, busy: { decodeFraction: 0.5 } };
const OPTIONS: SelectOptions = { busy: { decodeFraction: 0.5 } };

describe('Selector fast path', () => {
  it('answers temperature-0 decisions with the configured parameters; the full scan answers the rest', () => {
    const { ledger, selector } = fastPair(1);
    const slots = addFleet(ledger, 6);
    ledger.add('r', slots[2]!, chain(1, 4), 40, 0);
    const project = (blockSize = 16) => ledger.project({ seqHashes: chain(1, 2), promptTokens: 50, blockSize, overlaps: { slots: [1], depths: [2] } });
    project();
    selector.select(OPTIONS);
    expect(selector.lastPath).toBe('scan'); // not enabled yet
    selector.enableFastPath(CONFIG);
    const path = (options: SelectOptions) => {
      selector.select(options);
      return selector.lastPath;
    };
    expect(path(OPTIONS)).toBe('fast');
    expect(path({ ...OPTIONS, cost: { overlapCredit: 0.5 } })).toBe('fast'); // the credit is per request
    expect(path({ ...OPTIONS, allowedSlots: [0, 2] })).toBe('fast');
    expect(path({ ...OPTIONS, fullScan: true })).toBe('scan');
    expect(path({ ...OPTIONS, temperature: 0.5 })).toBe('scan');
    expect(path({ ...OPTIONS, taintWeights: [0, 1] })).toBe('scan');
    expect(path({ ...OPTIONS, cost: { prefillLoadScale: 2 } })).toBe('scan');
    expect(path({ ...OPTIONS, cost: { activeRequestWeight: 1 } })).toBe('scan');
    expect(path({ busy: { decodeFraction: 0.6 } })).toBe('scan');
    expect(path({})).toBe('scan');
    project(32);
    expect(path(OPTIONS)).toBe('scan');
    // changing the configuration rebuilds the tree for the new parameters
    selector.enableFastPath({ blockSize: 32, cost: { activeRequestWeight: 1 } });
    expect(path({ cost: { activeRequestWeight: 1 } })).toBe('fast');
  });

  it('the columns of a fast-path select are filled by a full pass when first read, as the scan writes them', () => {
    const fast = fastPair(6);
    const scan = makePair('twin', 6);
    for (const { ledger } of [fast, scan]) {
      const slots = addFleet(ledger, 6);
      ledger.setAvailable(slots[0]!, false);
      ledger.add('r', slots[1]!, chain(1, 3), 40, 0);
      ledger.add('s', slots[2]!, chain(2, 3), 900, 0);
      ledger.project({ seqHashes: chain(1, 4), promptTokens: 64, blockSize: 16, overlaps: { slots: [3], depths: [2] } });
    }
    fast.selector.enableFastPath({ blockSize: 16, busy: { prefillTokens: 500 } });
    const options: SelectOptions = { busy: { prefillTokens: 500 }, allowedSlots: [0, 1, 2, 3, 4], cost: { overlapCredit: 0.5 } };
    const picked = fast.selector.select(options);
    expect(fast.selector.lastPath).toBe('fast');
    const want = scan.selector.select(options);
    expect(picked.cost).toBe(want.cost);
    const columns = fast.selector.columns;
    expect(Array.from(columns.reason)).toEqual(Array.from(scan.selector.columns.reason));
    expect(Array.from(columns.cost)).toEqual(Array.from(scan.selector.columns.cost));
    expect(columns.eligible[picked.slot]).toBe(1);
    // once the ledger has changed they can no longer be computed
    fast.selector.select(options);
    fast.ledger.add('t', 4, [], 1, 0);
    expect(() => fast.selector.columns).toThrow(/fullScan: true/);
    // fullScan writes them as it goes
    fast.ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    fast.selector.select({ ...options, fullScan: true });
    expect(fast.selector.lastPath).toBe('scan');
    fast.ledger.add('u', 5, [], 1, 0);
    expect([fast.selector.columns.eligible[4], fast.selector.columns.reason[5]]).toEqual([1, Reason.notAllowed]);
  });

  it('the worked example: a touched worker cheaper than every untouched one wins, at the scan\'s cost', () => {
    const { ledger, selector } = fastPair(1);
    const [w1, w2, w3, w4] = addFleet(ledger, 4);
    const prompt = chain(1, 4);
    ledger.add('a', w1!, chain(2, 6), 0, 0);
    ledger.add('b', w2!, [...prompt, 99n], 0, 0);
    ledger.add('c', w3!, chain(3, 5), 0, 0);
    ledger.add('d', w4!, chain(4, 3), 0, 0); // untouched: 3 + 4 + 10 = 17
    selector.enableFastPath({ blockSize: 16 });
    ledger.project({ seqHashes: prompt, promptTokens: 160, blockSize: 16, overlaps: { slots: [w1!, w2!, w3!], depths: [2, 5, 8] } });
    const selection = selector.select();
    expect(selector.lastPath).toBe('fast');
    expect(selection).toEqual({ slot: w2, cost: 10, counts: { present: 4, available: 4, allowed: 4, overloaded: 0, eligible: 4 } });
    // without its cached prefix the loaded worker costs more than the untouched one
    ledger.project({ seqHashes: chain(5, 4), promptTokens: 160, blockSize: 16 });
    expect(selector.select()).toMatchObject({ slot: w4, cost: 3 + 4 + 10 });
    expect(selector.lastPath).toBe('fast');
  });

  it('an idle fleet ties everywhere: picks are uniform over all workers (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = fastPair(2024);
    addFleet(ledger, 40);
    selector.enableFastPath(CONFIG);
    ledger.project({ seqHashes: chain(9, 8), promptTokens: 128, blockSize: 16 });
    const counts = drawFast(selector, 40, 20_000, OPTIONS);
    expect(chiSquareUniform(counts)).toBeLessThan(CHI2_CRITICAL_P001[39]!);
  });

  it('ties split between touched and untouched workers are uniform over the union; busy and unavailable ones are never picked', () => {
    const { ledger, selector } = fastPair(77);
    const slots = addFleet(ledger, 12);
    const [a, b, busy, off, dearer, loaded] = slots;
    // request: 3 prompt hashes, 48 tokens (3 blocks) -> an idle untouched worker costs K = 3 + 3 = 6
    const prompt = chain(1, 3);
    ledger.add('a', a!, prompt, 0, 0); // holds the prompt: key 3, cost 3 + 6 - 3 = 6
    ledger.add('b', b!, [], 32, 0); // 2 prefill blocks, overlap 2: key 2, cost 2 + 6 - 2 = 6
    ledger.setWorker(busy!, { totalBlocks: 4, maxBatchedTokens: 8192 });
    ledger.add('busy', busy!, prompt, 0, 0); // would cost 6, but 3 / 4 blocks > 0.5
    ledger.setAvailable(off!, false);
    ledger.add('dearer', dearer!, [], 32, 0); // overlap 1 only: 2 + 6 - 1 = 7
    ledger.add('loaded', loaded!, chain(2, 1), 0, 0); // untouched, key 1: 7
    selector.enableFastPath(CONFIG);
    ledger.project({ seqHashes: prompt, promptTokens: 48, blockSize: 16, overlaps: { slots: [b!, dearer!], depths: [2, 1] } });
    const counts = drawFast(selector, 12, 16_000, OPTIONS);
    for (const never of [busy, off, dearer, loaded]) expect(counts[never!]).toBe(0);
    const tied = slots.filter((s) => ![busy, off, dearer, loaded].includes(s)).map((s) => counts[s]!);
    expect(tied).toHaveLength(8);
    expect(chiSquareUniform(tied)).toBeLessThan(CHI2_CRITICAL_P001[7]!);
    expect(selector.select(OPTIONS)).toMatchObject({ cost: 6, counts: { present: 12, available: 11, allowed: 11, overloaded: 1, eligible: 10 } });
  });

  it('untouched workers with equal keys tie, except the busy ones (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = fastPair(5);
    const slots = addFleet(ledger, 20);
    slots.forEach((slot, i) => {
      if (i < 5) ledger.setWorker(slot, { totalBlocks: 3, maxBatchedTokens: 8192 }); // 2 of 3 blocks: busy
      ledger.add(`r${i}`, slot, chain(100 + i, 2), 0, 0);
    });
    selector.enableFastPath(CONFIG);
    ledger.project({ seqHashes: chain(1, 4), promptTokens: 64, blockSize: 16 });
    const counts = drawFast(selector, 20, 15_000, OPTIONS);
    expect(counts.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
    expect(chiSquareUniform(counts.slice(5))).toBeLessThan(CHI2_CRITICAL_P001[14]!);
  });

  it('a large allow-list: uniform over the allowed tied workers (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = fastPair(8);
    addFleet(ledger, 40);
    selector.enableFastPath(CONFIG);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    const allowedSlots = Array.from({ length: 30 }, (_, i) => i + 10);
    const counts = drawFast(selector, 40, 15_000, { ...OPTIONS, allowedSlots });
    expect(counts.slice(0, 10).every((c) => c === 0)).toBe(true);
    expect(chiSquareUniform(counts.slice(10))).toBeLessThan(CHI2_CRITICAL_P001[29]!);
    expect(selector.select({ ...OPTIONS, allowedSlots }).counts).toEqual({ present: 40, available: 40, allowed: 30, overloaded: 0, eligible: 30 });
  });

  it('a small allow-list is evaluated slot by slot: a repeated slot counts once (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = fastPair(9);
    addFleet(ledger, 60);
    selector.enableFastPath(CONFIG);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    const allowedSlots = [3, 7, 7, 7, 11, 19, 99];
    const counts = drawFast(selector, 60, 8000, { ...OPTIONS, allowedSlots });
    const listed = [3, 7, 11, 19].map((s) => counts[s]!);
    expect(listed.reduce((a, b) => a + b, 0)).toBe(8000);
    expect(chiSquareUniform(listed)).toBeLessThan(CHI2_CRITICAL_P001[3]!);
    expect(selector.select({ ...OPTIONS, allowedSlots }).counts).toEqual({ present: 60, available: 60, allowed: 4, overloaded: 0, eligible: 4 });
  });

  it('an allow-list the tie draws keep missing is evaluated slot by slot (chi-square, fixed seed, p = 0.001)', () => {
    const { ledger, selector } = fastPair(10);
    const slots = addFleet(ledger, 100);
    // the 20 listed workers carry load: the 80 idle ones hold the tree's minimum, none of them allowed
    const allowedSlots = slots.filter((s) => s % 5 === 0);
    for (const slot of allowedSlots) ledger.add(`r${slot}`, slot, chain(slot + 1, 2), 0, 0);
    selector.enableFastPath(CONFIG);
    ledger.project({ seqHashes: [], promptTokens: 16, blockSize: 16 });
    const counts = drawFast(selector, 100, 10_000, { ...OPTIONS, allowedSlots });
    expect(allowedSlots.reduce((sum, s) => sum + counts[s]!, 0)).toBe(10_000);
    expect(chiSquareUniform(allowedSlots.map((s) => counts[s]!))).toBeLessThan(CHI2_CRITICAL_P001[19]!);
  });

  it('no eligible worker: the fast path reports the scan\'s counts', () => {
    for (const allowedSlots of [undefined, [0], [0, 1, 2, 3]]) {
      const fast = fastPair(1);
      const twin = makePair('twin', 1);
      for (const { ledger } of [fast, twin]) {
        const slots = addFleet(ledger, 4, 4);
        ledger.setAvailable(slots[3]!, false);
        slots.slice(0, 3).forEach((slot, i) => ledger.add(`r${i}`, slot, chain(i + 1, 3), 0, 0));
        ledger.project({ seqHashes: chain(1, 2), promptTokens: 32, blockSize: 16 });
      }
      fast.selector.enableFastPath(CONFIG);
      const got = fast.selector.select({ ...OPTIONS, allowedSlots });
      expect(fast.selector.lastPath).toBe('fast');
      expect(got).toEqual(twin.selector.select({ ...OPTIONS, allowedSlots }));
      expect(got.slot).toBe(-1);
    }
  });

  it('keys that rounding makes cost the same fall back to the full scan, which ties them', () => {
    // scale 0.1, weight 0.1, block size 1: 5 tokens and 1 request give key 0.6;
    // 3 tokens and 3 requests give 0.6000000000000001
    const config: FastPathConfig = { blockSize: 1, cost: { prefillLoadScale: 0.1, activeRequestWeight: 0.1 } };
    const options: SelectOptions = { cost: config.cost };
    const { ledger, selector } = fastPair(3);
    const twin = makePair('twin', 3);
    for (const side of [ledger, twin.ledger]) {
      const [x, y] = addFleet(side, 3);
      side.add('x', x!, [], 5, 0);
      for (let i = 0; i < 3; i++) side.add(`y${i}`, y!, [], 1, 0);
      side.add('z', 2, [], 9, 0); // key 1.0: never cheapest
    }
    selector.enableFastPath(config);
    // a small constant keeps the keys apart: the fast path answers, and only x is cheapest
    for (const side of [ledger, twin.ledger]) side.project({ seqHashes: [], promptTokens: 0, blockSize: 1 });
    expect(selector.select(options)).toEqual(twin.selector.select(options));
    expect(selector.lastPath).toBe('fast');
    expect(selector.select(options).slot).toBe(0);
    // at 100 + key both round to 100.6: the scan breaks the tie, in step with the twin
    for (const side of [ledger, twin.ledger]) side.project({ seqHashes: [], promptTokens: 1000, blockSize: 1 });
    const picks = new Set<number>();
    for (let i = 0; i < 40; i++) {
      const got = selector.select(options);
      expect(selector.lastPath).toBe('scan');
      expect(got).toEqual(twin.selector.select(options));
      picks.add(got.slot);
    }
    expect(picks).toEqual(new Set([0, 1]));
  });

  it('decisions allocate nothing; the tree grows with the slots and follows their load', () => {
    const { ledger, selector } = fastPair(4);
    addFleet(ledger, 10);
    selector.enableFastPath(CONFIG);
    const core = ledger.core;
    const decide = (overlapSlots: number[]) => {
      ledger.project({ seqHashes: chain(1, 6), promptTokens: 96, blockSize: 16, overlaps: { slots: overlapSlots, depths: overlapSlots.map(() => 3) } });
      return selector.select({ ...OPTIONS, allowedSlots: overlapSlots.length > 0 ? overlapSlots : undefined });
    };
    decide([1, 2]);
    decide([]);
    const settled = core.liveBytes;
    for (let i = 0; i < 300; i++) decide(i % 2 ? [i % 10, (i * 7) % 10] : []);
    expect(core.liveBytes).toBe(settled);
    // 300 workers: the tree grows (it covers the row capacity) ...
    addFleet(ledger, 300);
    expect(core.liveBytes).toBeGreaterThan(settled);
    // ... and tracks every worker: load all but one, which must then win
    for (let w = 0; w < 300; w++) if (w !== 271) ledger.add(`r${w}`, w, [], 16, 0);
    expect(decide([]).slot).toBe(271);
    expect(selector.lastPath).toBe('fast');
    ledger.free('r5');
    ledger.add('r271', 271, [], 32, 0);
    expect(decide([]).slot).toBe(5);
  });
});
