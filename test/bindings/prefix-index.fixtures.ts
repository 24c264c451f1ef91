// Helpers shared by the prefix index tests: small block universes whose
// hashes look like real ones, engine-style chained ids, and a comparable
// form of findMatches results.
import fc from 'fast-check';
import { Core } from '../../bindings/core.js';
import { PrefixIndex } from '../../bindings/prefix-index.js';
import { ShardedPrefixIndex } from '../../bindings/prefix-index-sharded.js';
import { ReferencePrefixIndex, chainMix } from '../../bindings/reference/prefix-index.js';
import type { PrefixIndexApi, PrefixIndexOptions } from '../../bindings/prefix-index-api.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';

/** 'sharded': a ShardedPrefixIndex of SHARDS cores. */
export type IndexKind = 'wasm' | 'twin' | 'sharded';

export const SHARDS = 3;

const cores = new WeakMap<PrefixIndexApi, Core[]>();

export function makeIndex(kind: IndexKind, opts: PrefixIndexOptions = {}): PrefixIndexApi {
  if (kind === 'twin') return new ReferencePrefixIndex(opts);
  if (kind === 'sharded') {
    const index = new ShardedPrefixIndex({ ...opts, shards: SHARDS });
    cores.set(index, index.shards.map((s) => s.core));
    return index;
  }
  const core = new Core();
  const index = new PrefixIndex({ ...opts, core });
  cores.set(index, [core]);
  return index;
}

/** The wasm index's own consistency check (0: every derived count is exact, in every core); 0 for the twin. */
export function brokenRule(index: PrefixIndexApi): number {
  for (const core of cores.get(index) ?? []) {
    const broken = core.kernel<{ indexVerify(): number }>().indexVerify();
    if (broken !== 0) return broken;
  }
  return 0;
}

const M64 = (1n << 64n) - 1n;

/** Small deterministic generator (mulberry32): an integer in [0, n) per call, so a failing seed replays. */
export function random(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 2 ** 32) * n);
  };
}

/** The local hash of block value v: spread over the whole u64 range, top bit included. */
export function blockHash(v: number): bigint {
  return (BigInt(v + 1) * 0x9e3779b97f4a7c15n) & M64;
}

export function locals(path: readonly number[]): bigint[] {
  return path.map(blockHash);
}

/** An engine-style external id for the last block of a path: a hash of the whole prefix. */
export function chainId(path: readonly number[]): bigint {
  let h = 0xcbf29ce484222325n;
  for (const v of path) h = ((h ^ BigInt(v + 1)) * 0x100000001b3n) & M64;
  return h | 1n;
}

/** The sequence-hash ids an insertRouted of this path uses, block by block. */
export function routedIds(path: readonly number[]): bigint[] {
  const ids: bigint[] = [];
  for (const [i, h] of locals(path).entries()) ids.push(i === 0 ? h : chainMix(ids[i - 1]!, h));
  return ids;
}

/** findMatches as sorted "worker:depth" strings, independent of slot numbering and order. */
export function matchesOf(index: PrefixIndexApi, path: readonly number[], earlyExit = false): string[] {
  const r = index.findMatches(locals(path), earlyExit);
  const out: string[] = [];
  for (let i = 0; i < r.count; i++) out.push(`${workerLabel(index.workers.keyOf(r.slots[i]!))}:${r.depths[i]}`);
  return out.sort();
}

// ---- random event streams -----------------------------------------------------

export type IndexOp =
  | { type: 'stored'; worker: WorkerKey; path: number[]; split: number; noise: (number | null)[]; seqIds: boolean }
  | { type: 'removed'; worker: WorkerKey; ids: { path: number[]; kind: 'chain' | 'routed' | 'noise' }[] }
  | { type: 'popular'; workers: WorkerKey[]; path: number[] }
  | { type: 'fan'; worker: WorkerKey; path: number[]; tails: number[] }
  | { type: 'cleared'; worker: WorkerKey }
  | { type: 'removeWorker'; id: string }
  | { type: 'routed'; worker: WorkerKey; path: number[]; dt: number }
  | { type: 'expire'; dt: number };

export interface StreamShape {
  /** Shared path skeletons: fewer trunks, more sharing and wider nodes. */
  trunks: number;
  workerIds: number;
  ranks: number;
  values: number;
  maxPath: number;
  routed: boolean;
  /** Most workers a popular-path event stores the path for. */
  crowd: number;
}

export function opArbitrary(shape: StreamShape): fc.Arbitrary<IndexOp> {
  const worker = fc.record({
    id: fc.integer({ min: 0, max: shape.workerIds - 1 }).map((i) => `w${i}`),
    rank: fc.integer({ min: 0, max: shape.ranks - 1 }),
  });
  // A path is a trunk's prefix plus a random tail, so workers share prefixes
  // and branch off them the way prompts do (nodes get many children).
  const path = fc
    .record({
      trunk: fc.integer({ min: 0, max: shape.trunks - 1 }),
      // Tails branch off at a few points, so those nodes gather children.
      keep: fc.constantFrom(0, 1, 3, 3, shape.maxPath),
      tail: fc.array(fc.integer({ min: 0, max: shape.values - 1 }), { maxLength: 3 }),
    })
    .map(({ trunk, keep, tail }) => {
      const p = Array.from({ length: keep }, (_, i) => (trunk + i * (trunk + 1)) % shape.values);
      p.push(...tail);
      return p.length === 0 ? [trunk] : p.slice(0, shape.maxPath);
    });
  const stored = fc
    .record({
      worker,
      path,
      cut: fc.nat(),
      noise: fc.array(fc.option(fc.integer({ min: 0, max: 6 }), { freq: 6 }), { maxLength: shape.maxPath }),
      // Ids equal to routed blocks' sequence hashes: events meeting routed blocks.
      seqIds: shape.routed ? fc.boolean() : fc.constant(false),
    })
    .map(({ worker, path, cut, noise, seqIds }) => ({ type: 'stored' as const, worker, path, split: cut % path.length, noise, seqIds }));
  const removed = fc.record({
    type: fc.constant('removed' as const),
    worker,
    ids: fc.array(
      fc.record({ path, kind: fc.constantFrom<('chain' | 'routed' | 'noise')[]>('chain', 'chain', 'chain', 'routed', 'noise') }),
      { minLength: 1, maxLength: 4 },
    ),
  });
  const arbitraries: fc.WeightedArbitrary<IndexOp>[] = [
    { weight: 8, arbitrary: stored },
    { weight: 5, arbitrary: removed },
    // Many workers storing one path: nodes get past the member-scan bound.
    { weight: 1, arbitrary: fc.record({ type: fc.constant('popular' as const), workers: fc.array(worker, { minLength: Math.min(6, shape.crowd), maxLength: shape.crowd }), path }) },
    // One prefix continued many ways: nodes get past the children-list bound.
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constant('fan' as const),
        worker,
        path,
        tails: fc.uniqueArray(fc.integer({ min: 0, max: shape.values - 1 }), { minLength: 3, maxLength: shape.values }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('cleared' as const), worker }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('removeWorker' as const), id: worker.map((w) => w.id) }) },
  ];
  if (shape.routed) {
    arbitraries.push(
      { weight: 5, arbitrary: fc.record({ type: fc.constant('routed' as const), worker, path, dt: fc.integer({ min: 0, max: 40 }) }) },
      { weight: 2, arbitrary: fc.record({ type: fc.constant('expire' as const), dt: fc.integer({ min: 0, max: 80 }) }) },
    );
  }
  return fc.oneof(...arbitraries);
}

/** Applies one op; `clock` carries the stream's time. Returns the paths the op touched (for queries). */
export function applyOp(index: PrefixIndexApi, op: IndexOp, clock: { now: number }): number[][] {
  switch (op.type) {
    case 'stored': {
      const idOf = (path: number[]) => (op.seqIds ? routedIds(path).at(-1)! : chainId(path));
      const external = op.path.slice(op.split).map((_, j) => {
        const noise = op.noise[j];
        return noise === null || noise === undefined ? idOf(op.path.slice(0, op.split + j + 1)) : BigInt(1000 + noise);
      });
      index.applyStored(op.worker, op.split > 0 ? idOf(op.path.slice(0, op.split)) : null, external, locals(op.path.slice(op.split)));
      return [op.path];
    }
    case 'popular':
      for (const worker of op.workers) index.applyStored(worker, null, op.path.map((_, i) => chainId(op.path.slice(0, i + 1))), locals(op.path));
      return [op.path];
    case 'fan': {
      const chain = op.path.map((_, i) => chainId(op.path.slice(0, i + 1)));
      index.applyStored(op.worker, null, chain, locals(op.path));
      for (const v of op.tails) index.applyStored(op.worker, chain.at(-1)!, [chainId([...op.path, v])], locals([v]));
      return op.tails.map((v) => [...op.path, v]);
    }
    case 'removed':
      index.applyRemoved(
        op.worker,
        op.ids.map(({ path, kind }) => (kind === 'chain' ? chainId(path) : kind === 'routed' ? routedIds(path).at(-1)! : BigInt(1000 + path[0]!))),
      );
      return [];
    case 'cleared':
      index.applyCleared(op.worker);
      return [];
    case 'removeWorker':
      index.removeWorker(op.id);
      return [];
    case 'routed':
      clock.now += op.dt;
      index.insertRouted(op.worker, locals(op.path), clock.now);
      return [op.path];
    case 'expire':
      clock.now += op.dt;
      index.expire(clock.now);
      return [];
  }
}

/** Queries worth asking after a stream touched these paths: each path, a prefix and an extension. */
export function queriesFor(paths: readonly number[][], values: number): number[][] {
  const out = new Map<string, number[]>();
  const add = (p: number[]) => p.length > 0 && out.set(p.join(','), p);
  for (let v = 0; v < values; v++) add([v]);
  for (const p of paths) {
    add(p);
    add(p.slice(0, Math.ceil(p.length / 2)));
    add([...p, (p.at(-1)! + 1) % values]);
  }
  return [...out.values()];
}
