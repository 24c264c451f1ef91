// The request path's own histograms and counters expose exactly what
// prom-client's Histogram and Counter expose for the same updates: the
// /metrics text of one registry equals the other's.
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CounterFamily, HistogramFamily } from '../../server/request-instruments.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const model = fc.constantFrom('mock-model', 'm"2', 'm\\3', 'line\nbreak');

describe('request instruments', () => {
  it('a histogram family renders as a prom-client histogram with the same observations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(model, fc.oneof(fc.double({ min: 0, max: 10, noNaN: true }), fc.constantFrom(...BUCKETS))), { maxLength: 60 }), async (observations) => {
        const ours = new Registry();
        const theirs = new Registry();
        const family = new HistogramFamily('kvrouter_t_seconds', 'a timing', 'model', BUCKETS, ours);
        const reference = new Histogram({ name: 'kvrouter_t_seconds', help: 'a timing', labelNames: ['model'], buckets: BUCKETS, registers: [theirs] });
        for (const [m, v] of observations) {
          family.child(m).observe(v);
          reference.labels(m).observe(v);
        }
        expect(await ours.metrics()).toBe(await theirs.metrics());
      }),
      { numRuns: 200 },
    );
  });

  it('a counter family renders as a prom-client counter with the same increments', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(model, fc.constantFrom('', 'w0', 'w1#2'), fc.constantFrom('200', '503'), fc.nat(5)), { maxLength: 60 }), async (increments) => {
        const ours = new Registry();
        const theirs = new Registry();
        const family = new CounterFamily('kvrouter_n_total', 'a count', ['model', 'worker', 'code'], ours);
        const reference = new Counter({ name: 'kvrouter_n_total', help: 'a count', labelNames: ['model', 'worker', 'code'], registers: [theirs] });
        for (const [m, w, c, by] of increments) {
          family.child(m, w, c).inc(by);
          reference.labels(m, w, c).inc(by);
        }
        expect(await ours.metrics()).toBe(await theirs.metrics());
      }),
      { numRuns: 200 },
    );
  });
});
