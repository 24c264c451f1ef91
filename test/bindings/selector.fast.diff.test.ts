import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FastPathConfig, ProjectionRequest, SelectOptions } from '../../bindings/selection-contract.js';
import { applyOp, fleetOps, LARGE, type LedgerOp, lifecycle, type LifecycleScale, makePair, SMALL } from './load-table.fixtures.js';

// The fast path against the twin's full scan: the same minimum cost (exact f64
// compare), the same counts, and the same pick: both draw the r-th of the
// workers at the minimum in slot order from the same generator, so the
// streams stay in step decision after decision.

const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
// Small integers make ties (within touched, within untouched and across the two)
// common; doubles exercise rounding, where the fast path must notice merged keys.
const weightArb = (max: number) => fc.oneof(fc.nat({ max }), fc.double({ min: 0, max, noNaN: true }));

const configArb: fc.Arbitrary<FastPathConfig> = fc.record({
  blockSize: fc.integer({ min: 1, max: 32 }),
  cost: fc.record({ prefillLoadScale: weightArb(3), activeRequestWeight: weightArb(2) }, { requiredKeys: [] }),
  busy: fc.record(
    {
      prefillTokens: optional(fc.oneof(fc.nat({ max: 400 }), fc.double({ min: 0, max: 400, noNaN: true }))),
      prefillFraction: optional(fc.oneof(fc.constantFrom(0, 0.25, 0.5, 1), fc.double({ min: 0, max: 2, noNaN: true }))),
      decodeFraction: optional(fc.oneof(fc.constantFrom(0, 0.25, 0.5, 1), fc.double({ min: 0, max: 1, noNaN: true }))),
    },
    { requiredKeys: [] },
  ),
});

interface Decision {
  request: ProjectionRequest;
  /** Use the configured block size (else the request's own: the full scan). */
  configuredBlockSize: boolean;
  overlapCredit: number;
  allowedSlots: number[] | undefined;
  /** Ops applied after the decision, so the tree is kept up to date between decisions. */
  then: LedgerOp[];
}

function scenarioArb(scale: LifecycleScale, maxOps: number) {
  const { opArb, projectionArb } = lifecycle(scale);
  const decisionArb: fc.Arbitrary<Decision> = fc.record({
    request: projectionArb,
    configuredBlockSize: fc.nat({ max: 4 }).map((n) => n > 0),
    overlapCredit: weightArb(2),
    allowedSlots: optional(fc.array(fc.nat({ max: scale.workers + 1 }), { maxLength: scale.workers + 2 })),
    then: fc.array(opArb, { maxLength: 6 }),
  });
  return fc.record({
    config: configArb,
    // Enabled before the ops, the tree follows every change; after, it is built from the rows.
    enableFirst: fc.boolean(),
    fleet: fc.boolean(),
    ops: fc.array(opArb, { maxLength: maxOps }),
    decisions: fc.array(decisionArb, { minLength: 1, maxLength: 4 }),
    seed: fc.nat({ max: 0xffffffff }),
  });
}

describe.each([
  ['small', SMALL, 40, 250],
  ['large', LARGE, 150, 120],
] as const)('Selector fast path vs the twin (%s fleets)', (_, scale, maxOps, runs) => {
  it('same pick, minimum cost and counts as the full scan, ties included, through random lifecycles', () => {
    const paths = { fast: 0, scan: 0 };
    fc.assert(
      fc.property(scenarioArb(scale, maxOps), ({ config, enableFirst, fleet, ops, decisions, seed }) => {
        const wasm = makePair('wasm', seed);
        const twin = makePair('twin', seed);
        const clocks = [{ now: 0 }, { now: 0 }];
        const sides = [wasm, twin] as const;
        const all = fleet ? [...fleetOps(scale), ...ops] : ops;
        if (enableFirst) wasm.selector.enableFastPath(config);
        sides.forEach((side, i) => all.forEach((op) => applyOp(side.ledger, op, clocks[i]!)));
        if (!enableFirst) wasm.selector.enableFastPath(config);
        for (const decision of decisions) {
          const request = decision.configuredBlockSize ? { ...decision.request, blockSize: config.blockSize } : decision.request;
          const options: SelectOptions = {
            busy: config.busy,
            cost: { ...config.cost, overlapCredit: decision.overlapCredit },
            allowedSlots: decision.allowedSlots,
          };
          for (const side of sides) side.ledger.project(request);
          const got = wasm.selector.select(options);
          const want = twin.selector.select(options);
          paths[wasm.selector.lastPath!]++;
          expect(got.counts).toEqual(want.counts);
          expect(got.cost).toBe(want.cost);
          expect(got.slot).toBe(want.slot);
          sides.forEach((side, i) => decision.then.forEach((op) => applyOp(side.ledger, op, clocks[i]!)));
        }
      }),
      { numRuns: runs },
    );
    // the comparison is about the fast path: most decisions must have taken it
    expect(paths.fast).toBeGreaterThan(paths.scan);
  });
});
