// Hit rates weighted by tokens and by requests, and recent-sample percentiles.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HitAccounting, ratesOf } from '../../server/diagnostics/hit-rates.js';
import { RecentSamples } from '../../server/diagnostics/recent.js';

describe('HitAccounting', () => {
  it('weighs by tokens (cached / prompt summed) and by requests (mean cached fraction), per source', () => {
    const h = new HitAccounting();
    h.record('m', 'w0', 'predicted', 100, 50);
    h.record('m', 'w0', 'predicted', 10, 10);
    h.record('m', 'w0', 'reported', 100, 0);
    expect(ratesOf(h.of('m', 'w0').predicted)).toEqual({ token: 60 / 110, request: 0.75 });
    expect(ratesOf(h.of('m', 'w0').reported)).toEqual({ token: 0, request: 0 });
    expect(ratesOf(h.of('m', 'w1').reported)).toEqual({ token: null, request: null });
  });

  it('sums workers for the model, caps cached at the prompt, and forgets a dropped worker', () => {
    const h = new HitAccounting();
    h.record('m', 'w0', 'reported', 10, 20);
    h.record('m', 'w1', 'reported', 30, 0);
    expect(h.ofModel('m').reported).toEqual({ requests: 2, promptTokens: 40, cachedTokens: 10, fractionSum: 1 });
    h.drop('m', 'w0');
    expect(h.ofModel('m').reported.requests).toBe(1);
  });
});

describe('RecentSamples', () => {
  it('gives the nearest-rank percentiles of the samples inside the window', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(10_000), fc.double({ min: 0, max: 100, noNaN: true })), { minLength: 1, maxLength: 300 }), (raw) => {
        const samples = [...raw].sort((a, b) => a[0] - b[0]);
        const r = new RecentSamples(1000, 1_000_000);
        for (const [t, v] of samples) r.add(t, v);
        const now = samples[samples.length - 1]![0];
        const inside = samples.filter(([t]) => t >= now - 1000).map(([, v]) => v).sort((a, b) => a - b);
        const at = (q: number) => inside[Math.min(inside.length - 1, Math.floor(q * inside.length))];
        expect(r.percentiles(now)).toEqual({ count: inside.length, p50: at(0.5), p90: at(0.9), p99: at(0.99) });
        expect(r.countSince(now, 100)).toBe(samples.filter(([t]) => t >= now - 100).length);
      }),
    );
  });

  it('keeps at most maxSamples, the newest', () => {
    const r = new RecentSamples(1_000_000, 3);
    for (let i = 0; i < 10; i++) r.add(i, i);
    expect(r.percentiles(10)).toEqual({ count: 3, p50: 8, p90: 9, p99: 9 });
  });
});
