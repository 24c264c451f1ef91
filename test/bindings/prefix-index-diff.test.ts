// Differential property tests: the wasm PrefixIndex against its pure-TS twin
// on random event streams, and dump round trips.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyIndexEvents } from '../../bindings/prefix-index-dump.js';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { applyOp, brokenRule, makeIndex, matchesOf, opArbitrary, queriesFor, type IndexKind, type StreamShape } from './prefix-index.fixtures.js';

const OPTIONS = { ttlMs: 100, maxRoutedBlocks: 10, pruneTargetRatio: 0.6 };

// 12 workers, 8 block values, fan-out and popular-path events: nodes get past
// 8 members and 4 children, so both lookup regimes of the wasm tree (scan and
// table) and the switches between them run.
const EVENTS: StreamShape = { trunks: 3, workerIds: 6, ranks: 2, values: 8, maxPath: 6, routed: false, crowd: 14 };
const MIXED: StreamShape = { ...EVENTS, routed: true };
// 60 workers crowding a few paths: nodes with dozens of members whose child
// keeps a handful, the case findMatches handles by copying and taking back.
const CROWD: StreamShape = { trunks: 2, workerIds: 30, ranks: 2, values: 4, maxPath: 5, routed: false, crowd: 60 };

function counters(index: PrefixIndexApi) {
  const { liveBytes: _, indexBytes: __, ...rest } = index.stats();
  return rest;
}

function expectSameMatches(a: PrefixIndexApi, b: PrefixIndexApi, queries: number[][]): void {
  for (const q of queries) {
    expect(matchesOf(a, q), `query ${q}`).toEqual(matchesOf(b, q));
    expect(matchesOf(a, q, true), `query ${q}, earlyExit`).toEqual(matchesOf(b, q, true));
  }
}

function streamAgrees(shape: StreamShape, numRuns: number): void {
  fc.assert(
    fc.property(fc.array(opArbitrary(shape), { minLength: 10, maxLength: 40 }), (ops) => {
      const wasm = makeIndex('wasm', OPTIONS);
      const twin = makeIndex('twin', OPTIONS);
      const wasmClock = { now: 0 };
      const twinClock = { now: 0 };
      const touched: number[][] = [];
      for (const op of ops) {
        touched.push(...applyOp(wasm, op, wasmClock));
        applyOp(twin, op, twinClock);
        expect(brokenRule(wasm)).toBe(0);
        expect(counters(wasm)).toEqual(counters(twin));
        expectSameMatches(wasm, twin, queriesFor(touched.slice(-4), shape.values));
      }
    }),
    { numRuns },
  );
}

describe('PrefixIndex against its twin', () => {
  it('agrees after every event of random streams: duplicates, rebinds, unknown parents and removals, middle removals, cleared, removeWorker', () => {
    streamAgrees(EVENTS, 90);
  });

  it('agrees with routed inserts, expiry and pruning mixed in', () => {
    streamAgrees(MIXED, 90);
  });

  it('agrees when dozens of workers share a path and a few go deeper', () => {
    streamAgrees(CROWD, 30);
  });
});

describe('dump', () => {
  const kinds: IndexKind[] = ['wasm', 'twin'];

  it.each(kinds)('rebuilds an equal %s index when applied to an empty one, routed blocks included', (kind) => {
    fc.assert(
      fc.property(fc.array(opArbitrary(MIXED), { minLength: 10, maxLength: 40 }), (ops) => {
        const original = makeIndex(kind, OPTIONS);
        const clock = { now: 0 };
        const touched = ops.flatMap((op) => applyOp(original, op, clock));
        const rebuilt = makeIndex(kind, OPTIONS);
        applyIndexEvents(rebuilt, original.dump());
        expect(rebuilt.stats().nodes).toBe(original.stats().nodes);
        expect(rebuilt.stats().blocks).toBe(original.stats().blocks);
        expectSameMatches(original, rebuilt, queriesFor(touched, MIXED.values));
      }),
      { numRuns: 80 },
    );
  });

  it('keeps external ids and reference counts: later events act the same on the rebuilt index', () => {
    fc.assert(
      fc.property(fc.array(opArbitrary(EVENTS), { minLength: 10, maxLength: 30 }), fc.array(opArbitrary(EVENTS), { maxLength: 20 }), (before, after) => {
        const original = makeIndex('wasm', OPTIONS);
        const clock = { now: 0 };
        const touched = before.flatMap((op) => applyOp(original, op, clock));
        const rebuilt = makeIndex('twin', OPTIONS);
        applyIndexEvents(rebuilt, original.dump());
        for (const op of after) {
          touched.push(...applyOp(original, op, clock));
          applyOp(rebuilt, op, clock);
          expect(rebuilt.stats().nodes).toBe(original.stats().nodes);
          expect(rebuilt.stats().blocks).toBe(original.stats().blocks);
        }
        expectSameMatches(original, rebuilt, queriesFor(touched, EVENTS.values));
      }),
      { numRuns: 80 },
    );
  });
});
