import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Core } from '../../bindings/core.js';
import { ReferenceRendezvous, rendezvousScore } from '../../bindings/reference/rendezvous.js';
import { Rendezvous } from '../../bindings/rendezvous.js';
import type { RendezvousHasher } from '../../bindings/selection-contract.js';

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const idsArb = fc.uniqueArray(u64, { maxLength: 40 });
const IMPLS: [string, () => RendezvousHasher][] = [
  ['wasm', () => new Rendezvous()],
  ['twin', () => new ReferenceRendezvous()],
];

describe.each(IMPLS)('Rendezvous rules (%s)', (_, make) => {
  const hrw = make();

  it('returns the k highest-scoring ids, best first, ties by the smaller id', () => {
    const ids = [5n, 17n, 0n, (1n << 64n) - 1n, 12345678901234567890n, 42n];
    const key = 0xdeadbeefn;
    const byScore = [...ids].sort((a, b) => {
      const d = rendezvousScore(b, key) - rendezvousScore(a, key);
      return d > 0n ? 1 : d < 0n ? -1 : a < b ? -1 : 1;
    });
    expect(hrw.topKIds(ids, key, 4)).toEqual(byScore.slice(0, 4));
    expect(hrw.topK(ids, key, 4).map((i) => ids[i])).toEqual(byScore.slice(0, 4));
  });

  it('clamps k to the set and handles empty input', () => {
    expect(hrw.topK([1n, 2n, 3n], 7n, 10)).toHaveLength(3);
    expect(hrw.topK([1n, 2n, 3n], 7n, 0)).toEqual([]);
    expect(hrw.topK([], 7n, 3)).toEqual([]);
    expect(hrw.topK(new BigUint64Array([9n, 8n]), 7n, 1)).toHaveLength(1);
  });

  it('is stable under reordering of the input', () => {
    fc.assert(
      fc.property(idsArb, u64, fc.nat({ max: 45 }), fc.nat(), (ids, key, k, salt) => {
        const shuffled = [...ids].sort((a, b) => Number(((a ^ BigInt(salt)) % 1009n) - ((b ^ BigInt(salt)) % 1009n)));
        expect(hrw.topKIds(shuffled, key, k)).toEqual(hrw.topKIds(ids, key, k));
      }),
      { numRuns: 100 },
    );
  });

  it('a worker leaving changes only the places it held', () => {
    fc.assert(
      fc.property(idsArb.filter((ids) => ids.length > 0), u64, fc.nat({ max: 45 }), fc.nat(), (ids, key, k, pick) => {
        const gone = ids[pick % ids.length]!;
        const before = hrw.topKIds(ids, key, k);
        const after = hrw.topKIds(ids.filter((id) => id !== gone), key, k);
        const kept = before.filter((id) => id !== gone);
        // everyone else keeps their membership and order; at most one newcomer fills the gap
        expect(after.slice(0, kept.length)).toEqual(kept);
        expect(after.length - kept.length).toBe(before.includes(gone) && ids.length > k ? 1 : 0);
      }),
      { numRuns: 100 },
    );
  });

  it('spreads keys evenly: each of 8 workers wins about 1/8 of keys (chi-square, p = 0.001)', () => {
    const ids = Array.from({ length: 8 }, (_, i) => BigInt(i + 1));
    const wins = new Array<number>(8).fill(0);
    const keys = 8000;
    for (let key = 0n; key < BigInt(keys); key++) wins[hrw.topK(ids, key, 1)[0]!]!++;
    const chi2 = wins.reduce((s, w) => s + (w - keys / 8) ** 2 / (keys / 8), 0);
    expect(chi2).toBeLessThan(24.322); // 7 degrees of freedom
  });

  it('rejects bad input with errors naming the field', () => {
    expect(() => hrw.topK([1n, 2n, 1n], 0n, 1)).toThrow(/ids must be distinct/);
    expect(() => hrw.topK([1n, -2n], 0n, 1)).toThrow(/ids\[1\]/);
    expect(() => hrw.topK([1 as unknown as bigint], 0n, 1)).toThrow(/ids\[0\]/);
    expect(() => hrw.topK([1n], 1n << 64n, 1)).toThrow(/key/);
    expect(() => hrw.topK([1n], 0n, 1.5)).toThrow(/\bk\b/);
    expect(() => hrw.topK([1n], 0n, -1)).toThrow(/\bk\b/);
  });
});

describe('Rendezvous vs its twin', () => {
  it('agree on every top-k', () => {
    const wasm = new Rendezvous();
    const twin = new ReferenceRendezvous();
    fc.assert(
      fc.property(idsArb, u64, fc.nat({ max: 45 }), (ids, key, k) => {
        expect(wasm.topK(ids, key, k)).toEqual(twin.topK(ids, key, k));
      }),
      { numRuns: 300 },
    );
  });

  it('agree on large sets with k a third of them', () => {
    const wasm = new Rendezvous();
    const twin = new ReferenceRendezvous();
    const ids = Array.from({ length: 3000 }, (_, i) => (BigInt(i) * 0x9e3779b97f4a7c15n) & ((1n << 64n) - 1n));
    expect(wasm.topK(ids, 99n, 1000)).toEqual(twin.topK(ids, 99n, 1000));
  });

  it('claims the hrw kernel of its Core', () => {
    const core = new Core();
    new Rendezvous({ core });
    expect(() => new Rendezvous({ core })).toThrow(/already holds a hrw/);
  });
});
