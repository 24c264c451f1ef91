// The index's compact answer (assembly/prefix-match.ts): runs, each a node's
// members less its child's at one depth, read in place from the member
// layout, and pairs for the workers the walk met one by one. On random fleets
// where many workers share long prefixes (stored to random depths, cut by
// removals that leave orphans, branching, cleared), every lookup's answer
// (1) decoded here from the documented layout, (2) expanded to pairs by the
// binding and (3) merged from a sharded index names exactly the workers and
// depths the twin reports; and the fused decision reading the answer in the
// core decides exactly as the same kernels fed the pairs from the host.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED } from '../../bindings/block-hasher.js';
import type { Core } from '../../bindings/core.js';
import type { Decision, DecisionConstraints, DecisionRequest, HostMatcher } from '../../bindings/decision-contract.js';
import type { PrefixIndex } from '../../bindings/prefix-index.js';
import type { MatchResult, PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { ShardedPrefixIndex } from '../../bindings/prefix-index-sharded.js';
import { BlockHasher as ReferenceBlockHasher } from '../../bindings/reference/block-hasher.js';
import { ReferencePrefixIndex } from '../../bindings/reference/prefix-index.js';
import { BlockHasher } from '../../bindings/block-hasher.js';
import { Core as WasmCore } from '../../bindings/core.js';
import { Decider } from '../../bindings/decider.js';
import { LoadTable } from '../../bindings/load-table.js';
import { Selector } from '../../bindings/selector.js';
import { WorkerSlots } from '../../bindings/workers.js';
import { BS, BUSY, COSTS, GROUPS, wasmKit } from './decider.fixtures.js';

/** A decision core whose index is sharded over three cores (shard 0 in its own), its answers staged as runs and pairs. */
function shardedKit(seed: number) {
  const core = new WasmCore();
  const workers = new WorkerSlots();
  const hasher = new BlockHasher({ core });
  const index = new ShardedPrefixIndex({ core, workers, shards: 3 });
  const ledger = new LoadTable({ core, workers });
  const selector = new Selector({ ledger, seed });
  const matcher: HostMatcher = { find: (local) => index.findMatches(local), epoch: () => index.matchesEpoch(), stage: (local, into) => index.stageAnswer(local, into) };
  const decider = new Decider({ hasher, ledger, selector, blockSize: BS, matcher });
  return { workers, index, ledger, decider };
}

const PREFIXES = 3;
const PREFIX_BLOCKS = 40;
const RUN_BYTES = 32;
const BITMAP = 0x80000000;

const hasher = new ReferenceBlockHasher();
const tokensOf = (ids: readonly number[]) => ids.flatMap((id) => Array.from({ length: BS }, (_, k) => id * BS + k));
/** Prefix p's block j, and branch b's block j under prefix p (shared by the workers that take branch b). */
const prefixBlock = (p: number, j: number) => p * 1000 + j + 1;
const branchBlock = (p: number, b: number, j: number) => 100_000 + p * 10_000 + b * 100 + j;

type Event =
  | { kind: 'store'; worker: number; prefix: number; depth: number; branch: number; branchBlocks: number }
  | { kind: 'remove'; worker: number; prefix: number; at: number }
  | { kind: 'clear'; worker: number }
  | { kind: 'hold'; worker: number; prefix: number; depth: number; branch: number; branchBlocks: number }
  | { kind: 'ask'; prefix: number; length: number; branch: number; tail: number; cost: number; busy: number; pin: number | null; excluded: number | null; group: boolean };

function eventArb(workers: number): fc.Arbitrary<Event> {
  const worker = fc.nat({ max: workers - 1 });
  const prefix = fc.nat({ max: PREFIXES - 1 });
  // Most stores hold most of a prefix: heavy sharing, with drop-outs of every size.
  const depth = fc.oneof({ weight: 3, arbitrary: fc.integer({ min: PREFIX_BLOCKS - 4, max: PREFIX_BLOCKS }) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: PREFIX_BLOCKS }) });
  return fc.oneof(
    { weight: 8, arbitrary: fc.record({ kind: fc.constant('store' as const), worker, prefix, depth, branch: fc.nat({ max: 3 }), branchBlocks: fc.nat({ max: 6 }) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('remove' as const), worker, prefix, at: fc.nat({ max: PREFIX_BLOCKS - 1 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), worker }) },
    // Active requests on a few workers: few holders, so runs whose bound
    // exceeds the best are not expanded but searched for their holders.
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('hold' as const), worker: fc.nat({ max: 3 }), prefix, depth, branch: fc.nat({ max: 3 }), branchBlocks: fc.nat({ max: 6 }) }) },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('ask' as const),
        prefix,
        length: fc.integer({ min: 1, max: PREFIX_BLOCKS }),
        branch: fc.nat({ max: 4 }),
        tail: fc.nat({ max: 6 }),
        cost: fc.nat({ max: COSTS.length - 1 }),
        busy: fc.nat({ max: BUSY.length - 1 }),
        pin: fc.option(worker, { freq: 8 }),
        excluded: fc.option(worker, { freq: 4 }),
        group: fc.boolean(),
      }),
    },
  );
}

/** The store's (or hold's) blocks: the prefix to its depth, then, under a full prefix, the branch's. */
function storedBlocks(e: Extract<Event, { kind: 'store' | 'hold' }>): number[] {
  const ids = Array.from({ length: e.depth }, (_, j) => prefixBlock(e.prefix, j));
  if (e.depth === PREFIX_BLOCKS && e.branch > 0) for (let j = 0; j < e.branchBlocks; j++) ids.push(branchBlock(e.prefix, e.branch, j));
  return ids;
}

function askedBlocks(e: Extract<Event, { kind: 'ask' }>): number[] {
  const ids = Array.from({ length: e.length }, (_, j) => prefixBlock(e.prefix, j));
  if (e.length === PREFIX_BLOCKS && e.branch > 0) for (let j = 0; j < 6; j++) ids.push(branchBlock(e.prefix, e.branch, j));
  for (let j = 0; j < e.tail; j++) ids.push(900_000 + j);
  return ids;
}

function apply(index: PrefixIndexApi, e: Event): void {
  const worker = { id: `w${e.kind === 'ask' ? 0 : e.worker}`, rank: 0 };
  if (e.kind === 'store') {
    const ids = storedBlocks(e);
    index.applyStored(worker, null, ids.map(BigInt), hasher.localHashes(tokensOf(ids), BS));
  } else if (e.kind === 'remove') {
    index.applyRemoved(worker, [BigInt(prefixBlock(e.prefix, e.at))]);
  } else if (e.kind === 'clear') {
    index.applyCleared(worker);
  }
}

/** A member set as the core keeps it (assembly/prefix-members.ts): one slot, or a sorted array or bitmap block. */
function setOf(core: Core, count: number, word: number): number[] {
  if (count === 0) return [];
  if (count === 1) return [word];
  const header = core.u32(word, 1)[0]!;
  if ((header & BITMAP) === 0) return Array.from(core.u32(word + 4, count));
  const words = core.u32(word + 4, header & ~BITMAP);
  const slots: number[] = [];
  for (let w = 0; w < words.length; w++) for (let bit = 0; bit < 32; bit++) if ((words[w]! >>> bit) & 1) slots.push(32 * w + bit);
  return slots;
}

/** The last answer of a core's index, read from its documented layout: worker id -> depth. */
function decodeAnswer(index: PrefixIndex): Map<string, number> {
  const core = index.core;
  const [workers, runs, pairs, runsPtr, slotsPtr, depthsPtr] = core.u32(core.kernel<{ indexAnswer(): number }>().indexAnswer(), 6);
  const out = new Map<string, number>();
  const put = (slot: number, depth: number) => {
    const id = index.workers.keyOf(slot).id;
    expect(out.has(id), `${id} named twice`).toBe(false);
    out.set(id, depth);
  };
  const slots = core.u32(slotsPtr!, pairs!);
  const depths = core.u32(depthsPtr!, pairs!);
  for (let i = 0; i < pairs!; i++) put(slots[i]!, depths[i]!);
  for (let r = 0; r < runs!; r++) {
    const [depth, count, countA, wordA, countB, wordB, map] = core.u32(runsPtr! + RUN_BYTES * r, 7);
    const a = setOf(core, countA!, wordA!);
    const b = new Set(setOf(core, countB!, wordB!));
    for (const s of b) expect(a).toContain(s);
    const members = a.filter((s) => !b.has(s));
    expect(members.length).toBe(count);
    for (const s of members) put(s * (map! >>> 16) + (map! & 0xffff), depth!);
  }
  expect(out.size).toBe(workers);
  return out;
}

function pairsOf(index: PrefixIndexApi, found: MatchResult): Map<string, number> {
  const out = new Map<string, number>();
  for (let i = 0; i < found.count; i++) out.set(index.workers.keyOf(found.slots[i]!).id, found.depths[i]!);
  return out;
}

const sorted = (m: Map<string, number>) => [...m].sort((x, y) => (x[0] < y[0] ? -1 : 1));
const comparable = (d: Decision) => ({ slot: d.slot, cost: d.cost, overlapBlocks: d.overlapBlocks, cachedBlocks: d.cachedBlocks, counts: d.counts, path: d.path, routed: d.routed });

describe('compact match answer', () => {
  it('names exactly the pairs of the twin, decoded from its layout, expanded, and merged over shards', () => {
    fc.assert(
      fc.property(fc.integer({ min: 8, max: 140 }), fc.infiniteStream(fc.nat()), (workers, seeds) => {
        const events = fc.sample(fc.array(eventArb(workers), { minLength: 60, maxLength: 260 }), { seed: seeds.next().value, numRuns: 1 })[0]!;
        const kit = wasmKit(1);
        const wasm = kit.index;
        const sharded = new ShardedPrefixIndex({ shards: 3 });
        const twin = new ReferencePrefixIndex();
        const indexes: PrefixIndexApi[] = [wasm, sharded, twin];
        // The same slot per worker in each index.
        for (let w = 0; w < workers; w++) for (const index of indexes) index.workers.ensure(`w${w}`, 0);
        for (const e of events) {
          if (e.kind !== 'ask') {
            for (const index of indexes) apply(index, e);
            continue;
          }
          const local = hasher.localHashes(tokensOf(askedBlocks(e)), BS);
          const expected = sorted(pairsOf(twin, twin.findMatches(local)));
          const found = wasm.findMatches(local);
          expect(sorted(decodeAnswer(wasm))).toEqual(expected);
          expect(sorted(pairsOf(wasm, found))).toEqual(expected);
          expect(sorted(pairsOf(sharded, sharded.findMatches(local)))).toEqual(expected);
          expect(sorted(pairsOf(wasm, wasm.findMatches(local, true)))).toEqual(sorted(pairsOf(twin, twin.findMatches(local, true))));
        }
      }),
      { numRuns: 40 },
    );
  });

  it('reading the answer in the core, or the shards\' answers staged as runs, decides exactly as the pairs fed from the host', () => {
    fc.assert(
      fc.property(fc.integer({ min: 8, max: 140 }), fc.infiniteStream(fc.nat()), (workers, seeds) => {
        const events = fc.sample(fc.array(eventArb(workers), { minLength: 60, maxLength: 260 }), { seed: seeds.next().value, numRuns: 1 })[0]!;
        // Two kits alike in every event and draw: one decides on the answer in
        // its core, the other on the answer's pairs staged from the host.
        const inCore = wasmKit(3);
        const fromHost = wasmKit(3);
        const pairs: HostMatcher = {
          find: (local) => {
            const found = fromHost.index.findMatches(local);
            return { count: found.count, slots: found.slots.slice(), depths: found.depths.slice() };
          },
          // Never the same: the pairs are found again for every decision.
          epoch: (() => {
            let n = 0;
            return () => ++n;
          })(),
        };
        fromHost.decider.useMatcher(pairs);
        const kits = [inCore, fromHost, shardedKit(3)];
        for (const kit of kits) {
          for (let w = 0; w < workers; w++) {
            const slot = kit.workers.ensure(`w${w}`);
            kit.ledger.setWorker(slot, { totalBlocks: 20 + (w % 7) * 10, maxBatchedTokens: 64 });
            kit.ledger.setGroup(slot, w % GROUPS);
          }
        }
        let held = 0;
        for (const e of events) {
          if (e.kind === 'hold') {
            // An active request on the worker: its prompt's hashes are held there.
            for (const kit of kits) {
              const prompt = kit.decider.prepare(tokensOf(storedBlocks(e)), DEFAULT_SEED);
              kit.ledger.add(`h${held}`, kit.workers.slotOf(`w${e.worker}`)!, prompt.sequence, 0, held);
            }
            held++;
            continue;
          }
          if (e.kind !== 'ask') {
            for (const kit of kits) apply(kit.index, e);
            continue;
          }
          const tokens = tokensOf(askedBlocks(e));
          const [a, b, c] = kits.map((kit) => {
            const prompt = kit.decider.prepare(tokens, DEFAULT_SEED);
            const slotOf = (w: number) => kit.workers.slotOf(`w${w}`)!;
            const constraints: DecisionConstraints = {
              slots: e.pin === null ? null : Uint32Array.of(slotOf(e.pin)),
              excluded: e.excluded === null ? null : Uint32Array.of(slotOf(e.excluded)),
              groups: e.group ? { allowed: Uint8Array.of(1, 0, 1), multipliers: Float64Array.of(1, 1, 0.5) } : null,
            };
            const request: DecisionRequest = { prompt, promptTokens: tokens.length, busy: BUSY[e.busy]!, constraints, cost: COSTS[e.cost]!, book: null, fullScan: false };
            return { decision: kit.decider.decide(request), best: kit.decider.bestDepth(prompt, constraints) };
          });
          expect(comparable(a!.decision)).toEqual(comparable(b!.decision));
          expect(comparable(c!.decision)).toEqual(comparable(b!.decision));
          expect(a!.best).toBe(b!.best);
          expect(c!.best).toBe(b!.best);
        }
      }),
      { numRuns: 40 },
    );
  });

  it('finds a holder among the workers of a run it does not expand', () => {
    // Forty workers hold a prefix to block 8, w0 all 40 blocks: the answer is
    // w0 at 40 and a run of 39 at 8, whose bound is past w0's cost. w5 holds
    // the prompt through its branch active (a request past nothing cached
    // deeper): under the ttft cost that prices held hashes as cached it is
    // the cheapest, and the holder lookup finds its depth in the run.
    const cost = COSTS.find((c) => c.kind === 1 && c.temperature === 0 && c.reuseWeight === 0)!;
    const kit = wasmKit(5);
    for (let w = 0; w < 40; w++) {
      const slot = kit.workers.ensure(`w${w}`);
      kit.ledger.setWorker(slot, { totalBlocks: 1000, maxBatchedTokens: 64 });
      apply(kit.index, { kind: 'store', worker: w, prefix: 0, depth: w === 0 ? PREFIX_BLOCKS : 8, branch: 0, branchBlocks: 0 });
    }
    const asked = { kind: 'ask', prefix: 0, length: PREFIX_BLOCKS, branch: 1, tail: 4, cost: 0, busy: 0, pin: null, excluded: null, group: false } as const;
    const held = kit.decider.prepare(tokensOf(storedBlocks({ kind: 'hold', worker: 5, prefix: 0, depth: PREFIX_BLOCKS, branch: 1, branchBlocks: 6 })), DEFAULT_SEED);
    kit.ledger.add('held', kit.workers.slotOf('w5')!, held.sequence, 0, 0);
    const tokens = tokensOf(askedBlocks(asked));
    const prompt = kit.decider.prepare(tokens, DEFAULT_SEED);
    const decision = kit.decider.decide({ prompt, promptTokens: tokens.length, busy: null, constraints: { slots: null, excluded: null, groups: null }, cost, book: null, fullScan: false });
    expect(decision.path).toBe('fast');
    expect(kit.workers.keyOf(decision.slot).id).toBe('w5');
    // Its cached prefix is the run's depth, though the run was not expanded.
    expect(decision.overlapBlocks).toBe(8);
  });
});
