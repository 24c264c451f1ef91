import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../bindings/load-table.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { applyOp, ledgerOpArb, type LedgerOp, REQUESTS, snapshot, WORKERS } from './load-table.fixtures.js';

function drain(ledger: LoadTable | ReferenceLoadTable): void {
  for (let r = 0; r <= REQUESTS; r++) ledger.free(`r${r}`);
  for (let w = 0; w < WORKERS; w++) {
    const slot = ledger.workers.slotOf(`w${w}`);
    if (slot !== undefined) ledger.removeWorker(slot);
  }
}

describe('LoadTable vs its twin', () => {
  it('agree on every result and every column through random request lifecycles', () => {
    fc.assert(
      fc.property(fc.array(ledgerOpArb, { minLength: 1, maxLength: 60 }), (ops: LedgerOp[]) => {
        const wasm = new LoadTable();
        const twin = new ReferenceLoadTable();
        const clocks = [{ now: 0 }, { now: 0 }];
        for (const op of ops) {
          const seen = applyOp(wasm, op, clocks[0]!);
          expect(seen, op.kind).toEqual(applyOp(twin, op, clocks[1]!));
          expect(snapshot(wasm)).toEqual(snapshot(twin));
          expect(wasm.activeHashes).toBe(twin.activeHashes);
          expect(wasm.projected).toEqual(twin.projected);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('gives back every byte a lifecycle took once its requests and workers are gone', () => {
    fc.assert(
      fc.property(fc.array(ledgerOpArb, { minLength: 1, maxLength: 60 }), (ops: LedgerOp[]) => {
        const ledger = new LoadTable();
        // The first pass sizes the tables and pools; the second must reuse them.
        const bytes: number[] = [];
        for (let pass = 0; pass < 2; pass++) {
          const clock = { now: 0 };
          for (const op of ops) applyOp(ledger, op, clock);
          drain(ledger);
          expect(ledger.liveRequests).toBe(0);
          expect(ledger.activeHashes).toBe(0);
          const c = ledger.columns;
          expect([...c.activePrefillTokens, ...c.activeDecodeBlocks, ...c.activeRequests].every((v) => v === 0)).toBe(true);
          bytes.push(ledger.core.liveBytes);
        }
        expect(bytes[1]).toBe(bytes[0]);
      }),
      { numRuns: 60 },
    );
  });
});
