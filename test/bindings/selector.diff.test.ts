import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SelectOptions, WorkerSelector } from '../../bindings/selection-contract.js';
import { applyOp, fleetOps, lifecycle, makePair, SMALL, snapshot } from './load-table.fixtures.js';

const WORKERS = SMALL.workers;
const { opArb, projectionArb } = lifecycle(SMALL);

const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

const selectOptionsArb: fc.Arbitrary<SelectOptions> = fc.record({
  allowedSlots: optional(fc.array(fc.nat({ max: WORKERS + 1 }), { maxLength: WORKERS })),
  busy: fc.record(
    {
      prefillTokens: optional(fc.oneof(fc.nat({ max: 400 }), fc.double({ min: 0, max: 400, noNaN: true }))),
      // round fractions hit the strict-inequality edge (load exactly at the threshold)
      prefillFraction: optional(fc.oneof(fc.constantFrom(0, 0.25, 0.5, 1), fc.double({ min: 0, max: 2, noNaN: true }))),
      decodeFraction: optional(fc.oneof(fc.constantFrom(0, 0.25, 0.5, 1), fc.double({ min: 0, max: 1, noNaN: true }))),
    },
    { requiredKeys: [] },
  ),
  cost: fc.record(
    {
      // small integers make equal costs (ties) common; doubles exercise the arithmetic
      overlapCredit: fc.oneof(fc.nat({ max: 2 }), fc.double({ min: 0, max: 2, noNaN: true })),
      prefillLoadScale: fc.oneof(fc.nat({ max: 2 }), fc.double({ min: 0, max: 3, noNaN: true })),
      activeRequestWeight: fc.oneof(fc.nat({ max: 2 }), fc.double({ min: 0, max: 2, noNaN: true })),
    },
    { requiredKeys: [] },
  ),
});

// Every scenario starts from a full fleet, so most decisions have several candidates and ties.
const fleet = fleetOps(SMALL);

const scenarioArb = fc.record({
  ops: fc.array(opArb, { maxLength: 40 }).map((ops) => [...fleet, ...ops]),
  request: projectionArb,
  options: selectOptionsArb,
  seed: fc.nat({ max: 0xffffffff }),
});

function columnsOf(selector: WorkerSelector) {
  const c = selector.columns;
  return { eligible: Array.from(c.eligible), reason: Array.from(c.reason), cost: Array.from(c.cost) };
}

describe('Selector vs its twin', () => {
  it('agree exactly at temperature 0: eligibility, counts, every cost and every pick, ties included', () => {
    fc.assert(
      fc.property(scenarioArb, ({ ops, request, options, seed }) => {
        // the core's fused select, the core's three steps, and the twin
        const fused = makePair('wasm', seed);
        const steps = makePair('wasm', seed);
        const twin = makePair('twin', seed);
        for (const side of [fused, steps, twin]) {
          const clock = { now: 0 };
          for (const op of ops) applyOp(side.ledger, op, clock);
          side.ledger.project(request);
        }
        expect(snapshot(fused.ledger)).toEqual(snapshot(twin.ledger));
        // the tree is on, but fullScan forces the scan the twin mirrors draw for draw
        fused.selector.enableFastPath({ blockSize: request.blockSize, cost: options.cost, busy: options.busy });
        const expected = twin.selector.select(options);
        expect(fused.selector.select({ ...options, fullScan: true })).toEqual(expected);
        expect(fused.selector.lastPath).toBe('scan');
        const counts = steps.selector.eligibility(options);
        steps.selector.score(options);
        expect({ slot: steps.selector.pick(0), counts }).toEqual({ slot: expected.slot, counts: expected.counts });
        expect(columnsOf(fused.selector)).toEqual(columnsOf(twin.selector));
        expect(columnsOf(steps.selector)).toEqual(columnsOf(twin.selector));
        // the same generator stream keeps later tie-breaks in step
        const picks = (s: WorkerSelector) => Array.from({ length: 8 }, () => s.pick(0));
        const twinPicks = picks(twin.selector);
        expect(picks(fused.selector)).toEqual(twinPicks);
        expect(picks(steps.selector)).toEqual(twinPicks);
      }),
      { numRuns: 200 },
    );
  });

  it('agree on costs with preferred-taint weights to 1e-12 (exp and tanh may differ in the last ulp)', () => {
    const taintsArb = fc.array(fc.double({ min: -5, max: 5, noNaN: true }), { maxLength: WORKERS });
    fc.assert(
      fc.property(scenarioArb, taintsArb, ({ ops, request, options }, taints) => {
        const wasm = makePair('wasm');
        const twin = makePair('twin');
        for (const side of [wasm, twin]) {
          const clock = { now: 0 };
          for (const op of ops) applyOp(side.ledger, op, clock);
          side.ledger.project(request);
          side.selector.eligibility(options);
        }
        const weights = taints.slice(0, wasm.ledger.rows);
        wasm.selector.score({ ...options, taintWeights: weights });
        twin.selector.score({ ...options, taintWeights: weights });
        const a = columnsOf(wasm.selector);
        const b = columnsOf(twin.selector);
        expect(a.eligible).toEqual(b.eligible);
        a.cost.forEach((cost, w) => {
          if (cost === Infinity) expect(b.cost[w]).toBe(Infinity);
          else expect(Math.abs(cost - b.cost[w]!)).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(cost)));
        });
      }),
      { numRuns: 150 },
    );
  });
});
