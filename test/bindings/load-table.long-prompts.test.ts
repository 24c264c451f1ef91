// Long prompts in the ledger: thousands of sequence hashes per request, as a
// long multi-turn chat books on each turn. The hash registry then grows by
// thousands at once (one reservation per request) and empties by thousands
// (straight to a smaller table); the twin, which has no tables, is the oracle.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../bindings/load-table.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { addFleet, snapshot } from './load-table.fixtures.js';

/** A conversation's hashes through turn `turn`: each turn adds `perTurn` blocks to the same chain. */
function turnHashes(conversation: number, turn: number, perTurn: number): bigint[] {
  return Array.from({ length: (turn + 1) * perTurn }, (_, i) => (BigInt(conversation) << 32n) | BigInt(i + 1));
}

type Op = { kind: 'add'; conversation: number; turn: number; worker: number } | { kind: 'free'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('add' as const), conversation: fc.nat(3), turn: fc.nat(12), worker: fc.nat(1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }) },
);

describe('LoadTable with long prompts', () => {
  it('agrees with its twin while requests of thousands of hashes are booked and freed, overlapping, on two workers', () => {
    let most = 0;
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 5, maxLength: 40 }), fc.integer({ min: 200, max: 700 }), (ops, perTurn) => {
        const wasm = new LoadTable();
        const twin = new ReferenceLoadTable();
        const slots = [addFleet(wasm, 2, 1_000_000), addFleet(twin, 2, 1_000_000)];
        const live: string[] = [];
        let next = 0;
        for (const op of ops) {
          if (op.kind === 'add') {
            const id = `r${next++}`;
            const hashes = turnHashes(op.conversation, op.turn, perTurn);
            wasm.add(id, slots[0]![op.worker]!, hashes, 10, 0);
            twin.add(id, slots[1]![op.worker]!, hashes, 10, 0);
            live.push(id);
          } else if (live.length > 0) {
            const [id] = live.splice(op.pick % live.length, 1);
            expect(wasm.free(id!)).toBe(twin.free(id!));
          }
          expect(snapshot(wasm)).toEqual(snapshot(twin));
          expect(wasm.activeHashes).toBe(twin.activeHashes);
          most = Math.max(most, wasm.activeHashes);
        }
        for (const id of live) wasm.free(id);
        expect(wasm.activeHashes).toBe(0);
      }),
      { numRuns: 25 },
    );
    // the runs did hold thousands of hashes at once
    expect(most).toBeGreaterThan(2000);
  });

  it('gives the hash table back once the long requests end, and takes no more on a second pass of the same turns', () => {
    const ledger = new LoadTable();
    const [a, b] = addFleet(ledger, 2, 1_000_000);
    const drained: number[] = [];
    let peak = 0;
    for (let pass = 0; pass < 2; pass++) {
      for (let turn = 0; turn < 8; turn++) {
        ledger.add(`p${pass}t${turn}a`, a!, turnHashes(1, turn, 640), 10, 0);
        ledger.add(`p${pass}t${turn}b`, b!, turnHashes(2, turn, 640), 10, 0);
        peak = Math.max(peak, ledger.core.liveBytes);
        ledger.free(`p${pass}t${turn}a`);
        ledger.free(`p${pass}t${turn}b`);
      }
      expect(ledger.activeHashes).toBe(0);
      drained.push(ledger.core.liveBytes);
    }
    // 10,240 hashes held at the peak take a table of at least that many 16-byte entries.
    expect(peak - drained[0]!).toBeGreaterThanOrEqual(10_240 * 16);
    expect(drained[1]).toBe(drained[0]);
  });
});
