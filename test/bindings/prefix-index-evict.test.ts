// At its memory bound the wasm index forgets the coldest blocks instead of
// failing: it stays consistent, its memory stays flat under churn, and a twin
// told the same evictions (forget) agrees with it after every event.
import { describe, expect, it } from 'vitest';
import { PrefixIndex } from '../../bindings/prefix-index.js';
import { ReferencePrefixIndex } from '../../bindings/reference/prefix-index.js';
import { Core } from '../../bindings/core.js';
import { chainId, locals, matchesOf, random } from './prefix-index.fixtures.js';

const WORKERS = Array.from({ length: 24 }, (_, i) => ({ id: `w${i}`, rank: 0 }));
const BOUND = 1_200_000;

interface Fleet {
  wasm: PrefixIndex;
  twin: ReferencePrefixIndex;
  core: Core;
}

function fleet(): Fleet {
  const core = new Core();
  return { core, wasm: new PrefixIndex({ core, memoryBoundBytes: BOUND, evictionLog: 1 << 16 }), twin: new ReferencePrefixIndex() };
}

/** A conversation: one of 6 system prompts of 20 blocks, then turns of its own. */
function conversation(rnd: (n: number) => number, id: number): number[] {
  const system = Array.from({ length: 20 }, (_, i) => rnd(6) * 100 + i);
  const own = Array.from({ length: 10 + rnd(60) }, (_, i) => 10_000 + id * 100 + i);
  return [...system, ...own];
}

/** Applies the evictions the wasm index logged to the twin; returns how many. */
function mirror(f: Fleet): number {
  const evictions = f.wasm.takeEvictions();
  for (const e of evictions) f.twin.forget(e.worker, [e.external]);
  return evictions.length;
}

function counters(index: PrefixIndex | ReferencePrefixIndex) {
  const { liveBytes: _, indexBytes: __, allocationFailures: ___, ...rest } = index.stats();
  return rest;
}

describe('PrefixIndex at its memory bound', () => {
  it('churning past the bound keeps memory flat, the index consistent, and a twin told the same evictions agrees', () => {
    const f = fleet();
    const verify = () => f.core.kernel<{ indexVerify(): number }>().indexVerify();
    const rnd = random(5);
    const live: { w: number; path: number[] }[] = [];
    const held: number[] = [];
    let evicted = 0;
    for (let step = 0; step < 3000; step++) {
      const w = rnd(WORKERS.length);
      const path = conversation(rnd, step);
      // Store the conversation in turns, each turn chained to the last.
      for (let from = 0; from < path.length; from += 16) {
        const upto = Math.min(path.length, from + 16);
        const ids = path.slice(from, upto).map((_, i) => chainId(path.slice(0, from + i + 1)));
        const parent = from === 0 ? null : chainId(path.slice(0, from));
        const wasmOk = f.wasm.applyStored(WORKERS[w]!, parent, ids, locals(path.slice(from, upto)));
        evicted += mirror(f);
        expect(f.twin.applyStored(WORKERS[w]!, parent, ids, locals(path.slice(from, upto)))).toBe(wasmOk);
      }
      live.push({ w, path });
      // Engines evict too: a fifth of the time, a random live conversation goes, tail first.
      if (rnd(5) === 0 && live.length > 0) {
        const [gone] = live.splice(rnd(live.length), 1);
        const ids = gone!.path.map((_, i) => chainId(gone!.path.slice(0, i + 1))).reverse();
        f.wasm.applyRemoved(WORKERS[gone!.w]!, ids);
        f.twin.applyRemoved(WORKERS[gone!.w]!, ids);
      }
      if (step % 50 === 0) {
        expect(verify()).toBe(0);
        expect(counters(f.wasm)).toEqual(counters(f.twin));
        for (const { path } of live.slice(-8)) expect(matchesOf(f.wasm, path)).toEqual(matchesOf(f.twin, path));
        for (const w of WORKERS) expect(f.wasm.evictedBlocks(w)).toBe(f.twin.evictedBlocks(w));
        held.push(f.wasm.stats().indexBytes);
        expect(f.wasm.usedBytes).toBeLessThanOrEqual(BOUND);
      }
    }
    // The churn went through the bound's worth of blocks several times over.
    expect(evicted).toBeGreaterThan(4 * f.wasm.stats().blocks);
    // Memory with the pools' free records stays near the bound and has no trend:
    // the last third of the run holds on average what the middle third did.
    expect(Math.max(...held)).toBeLessThanOrEqual(1.2 * BOUND);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const third = Math.floor(held.length / 3);
    expect(mean(held.slice(2 * third))).toBeLessThanOrEqual(1.02 * mean(held.slice(third, 2 * third)));
  }, 120_000);

  it('forgets the least recently stored or matched blocks first', () => {
    const f = fleet();
    const rnd = random(9);
    // An old conversation of its own that lookups keep warm, then a flood of new ones.
    const kept = Array.from({ length: 40 }, (_, i) => 900_000 + i);
    const store = (w: number, path: number[]) =>
      f.wasm.applyStored(WORKERS[w]!, null, path.map((_, i) => chainId(path.slice(0, i + 1))), locals(path));
    store(0, kept);
    for (let step = 1; step < 3000 && f.wasm.stats().evictedBlocks === 0; step++) {
      store(1 + rnd(WORKERS.length - 1), conversation(rnd, step));
      f.wasm.findMatches(locals(kept));
    }
    expect(f.wasm.stats().evictedBlocks).toBeGreaterThan(0);
    for (let step = 0; step < 200; step++) {
      store(1 + rnd(WORKERS.length - 1), conversation(rnd, 5000 + step));
      f.wasm.findMatches(locals(kept));
    }
    expect(matchesOf(f.wasm, kept)).toEqual([`w0:${kept.length}`]);
    expect(f.wasm.evictedBlocks(WORKERS[0]!)).toBe(0);
  });
});
