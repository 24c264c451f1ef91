// Long prompts in the ledger: thousands of sequence hashes per request, as a
// long multi-turn chat books on each turn. The hash registry grows by
// thousands at once, keeps the hashes of ended requests (cold) for the next
// turn, and drops them all in one pass once more than COLD_LIMIT (65,536) pile
// up; the twin, which has no tables, is the oracle.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../bindings/load-table.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { addFleet, projectionSnapshot, snapshot } from './load-table.fixtures.js';

/** assembly/active-seqs.ts's COLD_LIMIT. */
const COLD_LIMIT = 1 << 16;

/** A conversation's hashes through turn `turn`: each turn adds `perTurn` blocks to the same chain. */
function turnHashes(conversation: number, turn: number, perTurn: number): bigint[] {
  return Array.from({ length: (turn + 1) * perTurn }, (_, i) => (BigInt(conversation) << 32n) | BigInt(i + 1));
}

type Op = { kind: 'add'; conversation: number; turn: number; worker: number } | { kind: 'free'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('add' as const), conversation: fc.nat(3), turn: fc.nat(12), worker: fc.nat(1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }) },
);

/**
 * Plays ops on the ledger and its twin, checking every column after each;
 * `project`: each booking also projects the conversation's next turn on both.
 * Returns the ledger, the requests still booked, and the most hashes active at once.
 */
function play(ops: readonly Op[], perTurn: number, project: boolean): { wasm: LoadTable; live: string[]; most: number } {
  const wasm = new LoadTable();
  const twin = new ReferenceLoadTable();
  const slots = [addFleet(wasm, 2, 1_000_000), addFleet(twin, 2, 1_000_000)];
  const live: string[] = [];
  let next = 0;
  let most = 0;
  for (const op of ops) {
    if (op.kind === 'add') {
      const id = `r${next++}`;
      const hashes = turnHashes(op.conversation, op.turn, perTurn);
      wasm.add(id, slots[0]![op.worker]!, hashes, 10, 0);
      twin.add(id, slots[1]![op.worker]!, hashes, 10, 0);
      live.push(id);
      if (project) {
        // The prompt of the conversation's next turn, over what is held now (cold hashes are not held).
        const probe = { seqHashes: turnHashes(op.conversation, op.turn + 1, perTurn), promptTokens: 64 * perTurn, blockSize: 16 };
        wasm.project(probe);
        twin.project(probe);
        expect(projectionSnapshot(wasm)).toEqual(projectionSnapshot(twin));
      }
    } else if (live.length > 0) {
      // pick -1: the request booked last
      const [id] = live.splice(op.pick < 0 ? live.length - 1 : op.pick % live.length, 1);
      expect(wasm.free(id!)).toBe(twin.free(id!));
    }
    expect(snapshot(wasm)).toEqual(snapshot(twin));
    expect(wasm.activeHashes).toBe(twin.activeHashes);
    most = Math.max(most, wasm.activeHashes);
  }
  return { wasm, live, most };
}

/** Many conversations: their hashes outnumber the cold limit within a run. */
const wideOpArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('add' as const), conversation: fc.nat(40), turn: fc.nat(2), worker: fc.nat(1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat() }) },
);

describe('LoadTable with long prompts', () => {
  it('agrees with its twin while requests of thousands of hashes are booked and freed, overlapping, on two workers', () => {
    let most = 0;
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 5, maxLength: 40 }), fc.integer({ min: 200, max: 700 }), (ops, perTurn) => {
        const { wasm, live, most: held } = play(ops, perTurn, false);
        most = Math.max(most, held);
        for (const id of live) wasm.free(id);
        expect(wasm.activeHashes).toBe(0);
      }),
      { numRuns: 25 },
    );
    // the runs did hold thousands of hashes at once
    expect(most).toBeGreaterThan(2000);
  });

  it('agrees with its twin across the drop of cold hashes, with requests still booked, projections included', () => {
    // Between two random stretches, 24 conversations of one turn are booked and
    // freed: their 24 x perTurn (at least 67,200 > COLD_LIMIT) cold hashes make the ledger drop
    // the cold ones while the first stretch's requests still hold theirs.
    const flood: Op[] = Array.from({ length: 24 }, (_, i) => [
      { kind: 'add' as const, conversation: 100 + i, turn: 0, worker: i % 2 },
      { kind: 'free' as const, pick: -1 },
    ]).flat();
    fc.assert(
      fc.property(fc.array(wideOpArb, { minLength: 8, maxLength: 16 }), fc.array(wideOpArb, { minLength: 8, maxLength: 16 }), fc.integer({ min: 2800, max: 4000 }), (before, after, perTurn) => {
        play([...before, ...flood, ...after], perTurn, true);
      }),
      { numRuns: 8 },
    );
  });

  it('gives the hash table back once more than COLD_LIMIT hashes of ended requests are kept, and takes no more on later passes', () => {
    const ledger = new LoadTable();
    const [a, b] = addFleet(ledger, 2, 1_000_000);
    const peaks: number[] = [];
    let biggestDrop = 0;
    for (let pass = 0; pass < 3; pass++) {
      let peak = 0;
      // 24 conversations of 3 turns of 1,000 blocks: 72,000 distinct hashes a pass.
      for (let c = 0; c < 24; c++) {
        for (let turn = 0; turn < 3; turn++) {
          ledger.add(`p${pass}c${c}t${turn}a`, a!, turnHashes(2 * c, turn, 1000), 10, 0);
          ledger.add(`p${pass}c${c}t${turn}b`, b!, turnHashes(2 * c + 1, turn, 1000), 10, 0);
          peak = Math.max(peak, ledger.core.liveBytes);
          for (const side of ['a', 'b']) {
            const before = ledger.core.liveBytes;
            ledger.free(`p${pass}c${c}t${turn}${side}`);
            biggestDrop = Math.max(biggestDrop, before - ledger.core.liveBytes);
          }
        }
      }
      expect(ledger.activeHashes).toBe(0);
      peaks.push(peak);
    }
    // The drop frees a table with an entry for each of more than COLD_LIMIT cold hashes (16 bytes each).
    expect(biggestDrop).toBeGreaterThanOrEqual(COLD_LIMIT * 16);
    // What the first pass grew to bounds the later ones: cold hashes do not pile up.
    expect(peaks[1]).toBeLessThanOrEqual(peaks[0]!);
    expect(peaks[2]).toBeLessThanOrEqual(peaks[0]!);
  });

  it('books the next turn of a conversation over its cold hashes exactly as over fresh ones', () => {
    const wasm = new LoadTable();
    const twin = new ReferenceLoadTable();
    const slots = [addFleet(wasm, 2, 1_000_000), addFleet(twin, 2, 1_000_000)];
    for (let turn = 0; turn < 6; turn++) {
      // Each turn on the other worker: the cold hashes of the last turn get a holder they never had.
      const worker = turn % 2;
      for (const [ledger, s] of [[wasm, slots[0]!], [twin, slots[1]!]] as const) {
        ledger.add(`t${turn}`, s[worker]!, turnHashes(7, turn, 900), 10, 0);
        if (turn % 3 === 2) ledger.add(`t${turn}x`, s[1 - worker]!, turnHashes(7, turn - 1, 900), 10, 0);
      }
      expect(snapshot(wasm)).toEqual(snapshot(twin));
      expect(wasm.activeHashes).toBe(twin.activeHashes);
      const probe = { seqHashes: turnHashes(7, turn + 1, 900), promptTokens: 16 * 900 * (turn + 2), blockSize: 16 };
      wasm.project(probe);
      twin.project(probe);
      expect(projectionSnapshot(wasm)).toEqual(projectionSnapshot(twin));
      for (const ledger of [wasm, twin]) {
        ledger.free(`t${turn}`);
        ledger.free(`t${turn}x`);
      }
      expect(snapshot(wasm)).toEqual(snapshot(twin));
      expect(wasm.activeHashes).toBe(0);
    }
  });

  it.each([
    ['given back', false],
    ['given back and taken by other hashes', true],
  ])('books a turn over the ids of the request freed last only while they still name its hashes (%s)', (_, other) => {
    const wasm = new LoadTable();
    const twin = new ReferenceLoadTable();
    const slots = [addFleet(wasm, 2, 1_000_000), addFleet(twin, 2, 1_000_000)];
    const pairs = [[wasm, slots[0]!], [twin, slots[1]!]] as const;
    // More than COLD_LIMIT hashes in one request: its free turns them all cold and drops them, ids and all.
    const first = turnHashes(7, 0, COLD_LIMIT + 500);
    for (const [ledger, s] of pairs) {
      ledger.add('x', s[0]!, first, 10, 0);
      ledger.free('x');
      // As many new hashes: they take every dropped id.
      if (other) ledger.add('y', s[1]!, turnHashes(8, 0, COLD_LIMIT + 500), 10, 0);
    }
    expect(wasm.activeHashes).toBe(twin.activeHashes);
    // The conversation's next turn: the same leading hashes as the request freed last.
    const next = turnHashes(7, 1, COLD_LIMIT + 500).slice(0, COLD_LIMIT + 900);
    for (const [ledger, s] of pairs) ledger.add('z', s[0]!, next, 10, 0);
    expect(snapshot(wasm)).toEqual(snapshot(twin));
    expect(wasm.activeHashes).toBe(twin.activeHashes);
    const probe = { seqHashes: next, promptTokens: 16 * next.length, blockSize: 16 };
    wasm.project(probe);
    twin.project(probe);
    expect(projectionSnapshot(wasm)).toEqual(projectionSnapshot(twin));
    for (const [ledger] of pairs) {
      ledger.free('z');
      ledger.free('y');
    }
    expect(snapshot(wasm)).toEqual(snapshot(twin));
    expect(wasm.activeHashes).toBe(0);
  });
});
