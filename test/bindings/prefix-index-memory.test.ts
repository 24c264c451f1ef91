// The wasm prefix index frees memory for real: emptied, it holds what a fresh
// index holds; churning over a fixed working set, it does not grow.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { brokenRule, chainId, locals, makeIndex, random, routedIds } from './prefix-index.fixtures.js';

const WORKERS = Array.from({ length: 40 }, (_, i) => ({ id: `w${i % 20}`, rank: i < 20 ? 0 : 1 }));

/** A prompt: one of 24 trunks of 48 blocks, cut anywhere, sometimes with its own tail. */
function prompt(rnd: (n: number) => number): number[] {
  const trunk = rnd(24);
  const path = Array.from({ length: 1 + rnd(48) }, (_, i) => trunk * 1000 + i);
  if (rnd(3) === 0) for (let i = rnd(6); i > 0; i--) path.push(100_000 + rnd(50_000));
  return path;
}

/** Live references the test itself tracks: `${worker}|${id}` -> [worker, id, refs]. */
type Refs = Map<string, [number, bigint, number]>;

function store(index: PrefixIndexApi, refs: Refs, w: number, path: number[], from: number): void {
  const ids = path.map((_, i) => chainId(path.slice(0, i + 1)));
  const ok = index.applyStored(WORKERS[w]!, from > 0 ? ids[from - 1]! : null, ids.slice(from), locals(path.slice(from)));
  if (!ok) return;
  for (const id of ids.slice(from)) {
    const key = `${w}|${id}`;
    const ref = refs.get(key);
    if (ref) ref[2]++;
    else refs.set(key, [w, id, 1]);
  }
}

function removeOne(index: PrefixIndexApi, refs: Refs, key: string): void {
  const ref = refs.get(key)!;
  index.applyRemoved(WORKERS[ref[0]]!, [ref[1]]);
  if (--ref[2] === 0) refs.delete(key);
}

function workload(index: PrefixIndexApi, rnd: (n: number) => number, events: number): Refs {
  const refs: Refs = new Map();
  for (let e = 0; e < events; e++) {
    const w = rnd(WORKERS.length);
    const path = prompt(rnd);
    const roll = rnd(10);
    if (roll < 6) store(index, refs, w, path, rnd(2) === 0 ? 0 : rnd(path.length));
    else if (roll < 7) index.insertRouted(WORKERS[w]!, locals(path), e);
    else if (refs.size > 0) {
      // Removals land anywhere in chains, middles included.
      const keys = [...refs.keys()];
      for (let k = 1 + rnd(4); k > 0; k--) {
        const key = keys[rnd(keys.length)]!;
        if (refs.has(key)) removeOne(index, refs, key);
      }
    }
  }
  return refs;
}

describe('PrefixIndex memory (wasm)', () => {
  it('memory is freed for real: once random stores and removals remove every block, nodes and live bytes are back to the empty state', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const index = makeIndex('wasm');
        const empty = index.stats().liveBytes;
        const rnd = random(seed);
        const refs = workload(index, rnd, 1500);
        expect(index.stats().nodes).toBeGreaterThan(1024); // past the first node pool
        expect(brokenRule(index)).toBe(0);
        // Routed blocks go by expiry, stored ones by removals in random order.
        index.expire(Number.MAX_SAFE_INTEGER);
        const keys = [...refs.keys()].sort(() => rnd(3) - 1);
        for (const key of keys) while (refs.has(key)) removeOne(index, refs, key);
        expect(index.stats()).toMatchObject({ nodes: 0, blocks: 0, routedBlocks: 0, liveBytes: empty });
      }),
      { numRuns: 3 },
    );
  });

  it('clears and removeWorker also return every byte', () => {
    const index = makeIndex('wasm');
    const empty = index.stats().liveBytes;
    const rnd = random(7);
    workload(index, rnd, 1500);
    for (const w of WORKERS.slice(0, 10)) index.applyCleared(w);
    expect(brokenRule(index)).toBe(0);
    for (let i = 0; i < 20; i++) index.removeWorker(`w${i}`);
    expect(index.stats()).toMatchObject({ nodes: 0, blocks: 0, routedBlocks: 0, liveBytes: empty });
  });

  it('a churning workload over a fixed working set does not grow', () => {
    const index = makeIndex('wasm');
    const rnd = random(11);
    const working = Array.from({ length: 300 }, () => ({ w: rnd(WORKERS.length), path: prompt(rnd) }));
    const refs: Refs = new Map();
    for (const { w, path } of working) store(index, refs, w, path, 0);
    const sizes: number[] = [];
    for (let round = 0; round < 24; round++) {
      // Evict a third of the set (whole chains, starting anywhere in them), store it again,
      // and route a few prompts that expire a round later.
      for (const { w, path } of working) {
        if (rnd(3) !== 0) continue;
        const start = rnd(path.length);
        for (let k = 0; k < path.length; k++) {
          const key = `${w}|${chainId(path.slice(0, ((start + k) % path.length) + 1))}`;
          while (refs.has(key)) removeOne(index, refs, key);
        }
        for (let copies = 1 + rnd(2); copies > 0; copies--) store(index, refs, w, path, 0);
      }
      for (const { w, path } of working.slice(0, 40)) index.insertRouted(WORKERS[w]!, locals(path), round * 200_000);
      index.expire(round * 200_000 - 1);
      sizes.push(index.stats().liveBytes);
    }
    expect(brokenRule(index)).toBe(0);
    const warm = Math.max(...sizes.slice(0, 6));
    expect(Math.max(...sizes.slice(6))).toBeLessThanOrEqual(warm);
  });

  it('refreshing routed blocks over and over keeps the expiry heap bounded and expiry on the latest refresh', () => {
    const index = makeIndex('wasm', { ttlMs: 1_000_000 });
    const empty = index.stats().liveBytes;
    const path = [1, 2, 3];
    let afterWarmup = 0;
    for (let now = 0; now < 6000; now++) {
      index.insertRouted({ id: 'a', rank: 0 }, locals(path), now);
      if (now === 1500) afterWarmup = index.stats().liveBytes;
    }
    expect(index.stats().liveBytes).toBe(afterWarmup);
    expect(index.expire(5998 + 1_000_000)).toBe(0);
    index.applyRemoved({ id: 'a', rank: 0 }, [routedIds(path)[2]!]);
    expect(index.expire(5999 + 1_000_000)).toBe(2);
    expect(index.stats()).toMatchObject({ nodes: 0, liveBytes: empty });
  });
});
