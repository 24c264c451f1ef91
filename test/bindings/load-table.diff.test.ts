import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../bindings/load-table.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { applyOp, fleetOps, LARGE, type LedgerOp, lifecycle, type LifecycleScale, SMALL, snapshot } from './load-table.fixtures.js';

// Frees every request and removes every worker, releasing its slot too, so a
// second pass hands out the same slots as the first and grows the rows alike.
function drain(ledger: LoadTable | ReferenceLoadTable, scale: LifecycleScale): void {
  for (let r = 0; r <= scale.requests; r++) ledger.free(`r${r}`);
  for (let w = 0; w < scale.workers; w++) {
    const slot = ledger.workers.slotOf(`w${w}`);
    if (slot === undefined) continue;
    ledger.removeWorker(slot);
    ledger.workers.release(`w${w}`);
  }
}

describe.each([
  ['small', SMALL, 150, 1, 60],
  ['large', LARGE, 40, 100, 250],
] as const)('LoadTable vs its twin (%s fleets)', (_, scale, runs, minOps, maxOps) => {
  const { opArb } = lifecycle(scale);
  // Half the cases start from a full fleet, so most ops land on live workers.
  const opsArb = fc
    .tuple(fc.boolean(), fc.array(opArb, { minLength: minOps, maxLength: maxOps }))
    .map(([fleet, ops]) => (fleet ? [...fleetOps(scale), ...ops] : ops));

  it('agree on every result and every column through random request lifecycles', () => {
    let mostHashes = 0;
    fc.assert(
      fc.property(opsArb, (ops: LedgerOp[]) => {
        const wasm = new LoadTable();
        const twin = new ReferenceLoadTable();
        const clocks = [{ now: 0 }, { now: 0 }];
        for (const op of ops) {
          const seen = applyOp(wasm, op, clocks[0]!);
          expect(seen, op.kind).toEqual(applyOp(twin, op, clocks[1]!));
          expect(snapshot(wasm)).toEqual(snapshot(twin));
          expect(wasm.activeHashes).toBe(twin.activeHashes);
          mostHashes = Math.max(mostHashes, wasm.activeHashes);
          expect(wasm.projected).toEqual(twin.projected);
        }
      }),
      { numRuns: runs },
    );
    // the scale does what it says: at the large one the hash registry outgrows its first table (16 entries)
    expect(mostHashes).toBeGreaterThan(scale === LARGE ? 64 : 4);
  });

  it('gives back every byte a lifecycle took once its requests and workers are gone', () => {
    fc.assert(
      fc.property(opsArb, (ops: LedgerOp[]) => {
        const ledger = new LoadTable();
        // The first pass sizes the tables and pools; the second must reuse them.
        const bytes: number[] = [];
        for (let pass = 0; pass < 2; pass++) {
          const clock = { now: 0 };
          for (const op of ops) applyOp(ledger, op, clock);
          drain(ledger, scale);
          expect(ledger.liveRequests).toBe(0);
          expect(ledger.activeHashes).toBe(0);
          const c = ledger.columns;
          expect([...c.activePrefillTokens, ...c.activeDecodeBlocks, ...c.activeRequests].every((v) => v === 0)).toBe(true);
          bytes.push(ledger.core.liveBytes);
        }
        expect(bytes[1]).toBe(bytes[0]);
      }),
      { numRuns: Math.ceil(runs / 2) },
    );
  });
});
