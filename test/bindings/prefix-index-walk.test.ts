// How findMatches finds the next node (assembly/prefix-match.ts): the record
// after the current one first (a chain stored in one event is consecutive in
// the pool), runs of such records stepped at once, and the root's children
// through a small table of hints. Each is only a faster way to the node the
// children lists would give, so every case here is checked against the twin,
// including records that look like the child but are not: freed ones that kept
// their block and parent, reused ones under another parent, and the records a
// worker's span keeps for its next turns.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { PrefixIndex } from '../../bindings/prefix-index.js';
import { ShardedPrefixIndex } from '../../bindings/prefix-index-sharded.js';
import { brokenRule, chainId, locals, makeIndex, matchesOf, random, type IndexKind } from './prefix-index.fixtures.js';

const w0 = { id: 'w0', rank: 0 };
const w1 = { id: 'w1', rank: 0 };

const M64 = (1n << 64n) - 1n;

/** chainId of every prefix of parent + path that ends in path, in one pass (chainId folds the whole prefix). */
function chainIds(parent: number[], path: number[]): bigint[] {
  let h = 0xcbf29ce484222325n;
  const step = (v: number) => (h = ((h ^ BigInt(v + 1)) * 0x100000001b3n) & M64);
  parent.forEach(step);
  return path.map((v) => step(v) | 1n);
}

/** Stores `path` for a worker as one event under `parent` (a path whose last block the worker holds), ids chained as engines do. */
function store(index: PrefixIndexApi, worker: typeof w0, parent: number[], path: number[]): void {
  index.applyStored(worker, parent.length === 0 ? null : chainId(parent), chainIds(parent, path), locals(path));
}

function remove(index: PrefixIndexApi, worker: typeof w0, path: number[]): void {
  index.applyRemoved(worker, [chainId(path)]);
}

/** The same events on the wasm index, the sharded one and the twin. */
function all(): PrefixIndexApi[] {
  return (['wasm', 'sharded', 'twin'] as IndexKind[]).map((kind) => makeIndex(kind));
}

function expectAgree(indexes: PrefixIndexApi[], queries: number[][]): void {
  const [first, ...rest] = indexes;
  for (const index of indexes) expect(brokenRule(index)).toBe(0);
  for (const q of queries) {
    for (const other of rest) {
      expect(matchesOf(first!, q), `query ${q}`).toEqual(matchesOf(other, q));
      expect(matchesOf(first!, q, true), `query ${q}, earlyExit`).toEqual(matchesOf(other, q, true));
    }
  }
}

/** Each worker opens a session of one block, then they take turns adding `length` blocks to theirs, `turns` times. */
function sessionsInTurns(targets: PrefixIndexApi[], workers: (typeof w0)[], turns: number, length: number): number[][] {
  const sessions = workers.map((_, k) => [1000 * (k + 1)]);
  for (const [k, worker] of workers.entries()) for (const target of targets) store(target, worker, [], sessions[k]!);
  for (let turn = 0; turn < turns; turn++) {
    for (const [k, worker] of workers.entries()) {
      const tail = Array.from({ length }, (_, i) => 1000 * (k + 1) + 1 + turn * length + i);
      for (const target of targets) store(target, worker, sessions[k]!, tail);
      sessions[k]!.push(...tail);
    }
  }
  return sessions;
}

/**
 * Each session's chained turns sit in consecutive records (read from the
 * core's node dump: id, parent, local), the records spans hold back are no
 * nodes, the index is consistent and agrees with the twin on `queries`.
 */
function expectConsecutive(index: PrefixIndex, twin: PrefixIndexApi, sessions: number[][], queries: (path: number[]) => number[][]): void {
  const k = index.core.kernel<{ indexDumpNodes(): number; indexDumpBuffer(): number }>();
  const count = k.indexDumpNodes();
  const dump = index.core.u32(k.indexDumpBuffer(), count * 4);
  const idOf = new Map<bigint, number>();
  for (let i = 0; i < count; i++) idOf.set(BigInt(dump[4 * i + 2]!) | (BigInt(dump[4 * i + 3]!) << 32n), dump[4 * i]!);
  for (const session of sessions) {
    const ids = locals(session.slice(1)).map((h) => idOf.get(h)!);
    expect(ids.every((id, i) => i === 0 || id === ids[i - 1]! + 1)).toBe(true);
  }
  expect(count).toBe(index.stats().nodes);
  expect(brokenRule(index)).toBe(0);
  for (const path of sessions) for (const q of queries(path)) expect(matchesOf(index, q)).toEqual(matchesOf(twin, q));
}

describe('findMatches walk', () => {
  it('does not take a freed record that kept its block and parent for the child stored elsewhere since', () => {
    const indexes = all();
    for (const index of indexes) {
      store(index, w0, [], [1, 2]); // records: 1, then 2 right after it
      store(index, w0, [], [3]);
      remove(index, w0, [1, 2]); // frees the record of 2 (it keeps block 2 under 1)
      remove(index, w0, [3]); // freed last: the next new record reuses this one
      store(index, w0, [1], [2]); // 2 under 1 again, in 3's old record
    }
    expect(matchesOf(indexes[2]!, [1, 2])).toEqual(['w0:2']);
    expectAgree(indexes, [[1, 2], [1, 2, 3], [3], [2]]);
  });

  it('does not take a root hint whose record now holds the block under another parent', () => {
    const indexes = all();
    for (const index of indexes) {
      store(index, w1, [], [9]);
      store(index, w0, [], [1]);
      store(index, w0, [], [5]);
      index.findMatches(locals([1])); // the root's hint for 1: its record
      remove(index, w0, [5]);
      remove(index, w0, [1]); // 1's record is the next one reused
      store(index, w1, [9], [1]); // block 1 again, under 9
    }
    expect(matchesOf(indexes[2]!, [1])).toEqual([]);
    expectAgree(indexes, [[1], [9, 1], [5], [9]]);
  });

  it('does not run on through a node with many children, whose children may hold workers it lacks', () => {
    // One event stores 1, 2, 3 (consecutive records). Block 2 then gets six
    // children and stops tracking their orphans; s5 drops 3, and s6 holds 3
    // alone: 1, 2 and 3 have five members each, but 3's are not 2's.
    const indexes = all();
    const s = Array.from({ length: 7 }, (_, i) => ({ id: `s${i}`, rank: 0 }));
    for (const index of indexes) {
      for (const worker of s.slice(1, 6)) store(index, worker, [], [1, 2, 3]);
      for (const [k, worker] of s.slice(1, 6).entries()) store(index, worker, [1, 2], [50 + k]);
      remove(index, s[5]!, [1, 2, 3]);
      store(index, s[6]!, [], [1, 2, 3]);
      remove(index, s[6]!, [1]);
      remove(index, s[6]!, [1, 2]);
    }
    expect(matchesOf(indexes[2]!, [1, 2, 3])).toEqual(['s1:3', 's2:3', 's3:3', 's4:3', 's5:2']);
    expectAgree(indexes, [[1, 2, 3], [1, 2, 3, 4], [1, 2], [2, 3]]);
  });

  it('walks a chain across the pool chunks it spans (8,192 records each) and stops where a block differs', () => {
    const long = Array.from({ length: 20_000 }, (_, i) => 100 + i);
    const indexes = all();
    for (const index of indexes) {
      store(index, w0, [], long);
      store(index, w1, [], long.slice(0, 9000));
    }
    const changed = (at: number) => long.map((v, i) => (i === at ? 7 : v));
    expect(matchesOf(indexes[2]!, long)).toEqual(['w0:20000', 'w1:9000']);
    expectAgree(indexes, [long, long.slice(0, 8191), long.slice(0, 8193), changed(8191), changed(8192), changed(16_384), changed(12_000)]);
  });

  it('copies each shard matches after its memory grew between two lookups', () => {
    const sharded = new ShardedPrefixIndex({ shards: 2 });
    const twin = makeIndex('twin');
    const before = sharded.shards.map((s) => s.core.memoryBytes);
    const path = Array.from({ length: 300 }, (_, i) => 1 + i);
    for (const index of [sharded, twin]) store(index, w0, [], path);
    expect(matchesOf(sharded, path)).toEqual(matchesOf(twin, path));
    const workers = Array.from({ length: 40 }, (_, i) => ({ id: `g${i}`, rank: 0 }));
    for (const [i, worker] of workers.entries()) {
      for (const index of [sharded, twin]) store(index, worker, [], [...path, ...Array.from({ length: 2000 }, (_, k) => 10_000 * (i + 1) + k)]);
    }
    expect(sharded.shards.every((s, k) => s.core.memoryBytes > before[k]!)).toBe(true);
    expect(matchesOf(sharded, path)).toEqual(matchesOf(twin, path));
    expect(matchesOf(sharded, [...path, 10_000])).toEqual(matchesOf(twin, [...path, 10_000]));
  });

  it('agrees with the twin on random streams of long chains stored, cut and stored again', () => {
    // Few block values and long chains: removals free records in the middle of
    // runs, and later events reuse them for other blocks and parents.
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        const next = random(seed);
        const indexes = all();
        const held: { worker: typeof w0; path: number[] }[] = [];
        const queries: number[][] = [];
        for (let step = 0; step < 30; step++) {
          const worker = [w0, w1, { id: 'w2', rank: 0 }][next(3)]!;
          const mine = held.filter((h) => h.worker.id === worker.id);
          if (mine.length > 0 && next(3) === 0) {
            const { path } = mine[next(mine.length)]!;
            const cut = path.slice(0, 1 + next(path.length));
            for (const index of indexes) remove(index, worker, cut);
          } else {
            const base = mine.length > 0 && next(2) === 0 ? mine[next(mine.length)]!.path : [];
            const parent = base.slice(0, next(base.length + 1));
            const tail = Array.from({ length: 1 + next(40) }, () => next(6));
            for (const index of indexes) store(index, worker, parent, tail);
            held.push({ worker, path: [...parent, ...tail] });
            queries.push([...parent, ...tail]);
          }
          expectAgree(indexes, queries.slice(-3).flatMap((q) => [q, q.slice(0, 1 + next(q.length))]));
        }
      }),
      { numRuns: 40 },
    );
  });

  it('gives a worker\'s chained turns consecutive records, though other workers store between them', () => {
    const index = new PrefixIndex();
    const twin = makeIndex('twin');
    const sessions = sessionsInTurns([index, twin], [w0, w1, { id: 'w2', rank: 0 }], 4, 10);
    expectConsecutive(index, twin, sessions, (path) => [path, path.slice(0, 15), [...path.slice(0, 25), 7]]);
  });

  it('keeps a long session in one span when the pool is large for its workers, though another worker\'s span follows it', () => {
    const index = new PrefixIndex();
    const twin = makeIndex('twin');
    // 140,000 records for 16 worker slots: spans of 140,000 / (16 x 8), capped at 1,024 records, where a
    // pool of a few thousand records gets spans of 128.
    const bulk = Array.from({ length: 140_000 }, (_, i) => 10_000_000 + i);
    for (const target of [index, twin]) store(target, { id: 'bulk', rank: 0 }, [], bulk);
    // Eight turns of 60 blocks each, the two workers taking turns: 480 records each, in spans side by side.
    const sessions = sessionsInTurns([index, twin], [w0, w1], 8, 60);
    expectConsecutive(index, twin, sessions, (path) => [path, path.slice(0, 200), [...path.slice(0, 300), 7]]);
  });

  it('agrees with the twin on sessions stored turn by turn across workers, with tails removed and stored again', () => {
    // Workers extend sessions in turns (spans), remove tails (freed records,
    // which later turns reuse instead of taking spans) and share a prompt, so
    // walks cross turns by the next record, by a lookup, and over reused records.
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        const next = random(seed);
        const indexes = all();
        const workers = Array.from({ length: 4 }, (_, i) => ({ id: `s${i}`, rank: 0 }));
        const prompt = [1, 2, 3, 4];
        const sessions = workers.map(() => [...prompt]);
        for (const worker of workers) for (const index of indexes) store(index, worker, [], prompt);
        for (let step = 0; step < 40; step++) {
          const k = next(workers.length);
          const session = sessions[k]!;
          if (session.length > prompt.length + 1 && next(4) === 0) {
            const cut = prompt.length + 1 + next(session.length - prompt.length - 1);
            // Tail first, as engines evict.
            for (let end = session.length; end > cut; end--) for (const index of indexes) remove(index, workers[k]!, session.slice(0, end));
            session.length = cut;
          } else {
            const tail = Array.from({ length: 1 + next(12) }, () => 100 + next(50));
            for (const index of indexes) store(index, workers[k]!, session, tail);
            session.push(...tail);
          }
        }
        expectAgree(indexes, sessions.flatMap((s) => [s, s.slice(0, 1 + next(s.length)), [...s.slice(0, 1 + next(s.length)), 7]]));
      }),
      { numRuns: 30 },
    );
  });
});
