// The ttft cost (assembly/cost/ttft.ts) through the fused decision, wasm and
// twin, on random fleets and ledgers: workers in speed classes (the class's
// factor as the group multiplier, as router/model-fleet/core-groups.ts sets it),
// queued prefill, decoding requests, the KV their requests hold, cached and
// held prefixes. Each decision
// must agree exactly with the twin, and the picked worker's predicted time to
// first token, computed here from the scenario alone, must be the least of
// every eligible worker's (up to rounding).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED } from '../../bindings/block-hasher.js';
import { CostKind, type DecisionCost } from '../../bindings/decision-contract.js';
import { BS, CHAINS, twinKit, wasmKit, type Kit } from './decider.fixtures.js';

const A0 = 20;
const B0 = 1 / 48;
const RATIO = 1.25;
const CLASSES = [0, 1, -1, 3];

const scenario = fc.record({
  workers: fc.array(fc.record({ speedClass: fc.nat({ max: CLASSES.length - 1 }), maxBatchedTokens: fc.integer({ min: 1, max: 400 }) }), { minLength: 1, maxLength: 40 }),
  stores: fc.array(fc.record({ worker: fc.nat({ max: 39 }), chain: fc.nat({ max: CHAINS.length - 1 }), blocks: fc.integer({ min: 1, max: 10 }) }), { maxLength: 30 }),
  bookings: fc.array(
    fc.record({ worker: fc.nat({ max: 39 }), chain: fc.nat({ max: CHAINS.length - 1 }), blocks: fc.nat({ max: 10 }), prefill: fc.nat({ max: 600 }), decoding: fc.boolean() }),
    { maxLength: 60 },
  ),
  decisions: fc.array(
    fc.record({
      chain: fc.nat({ max: CHAINS.length - 1 }),
      length: fc.nat({ max: 40 }),
      tail: fc.nat({ max: 9 }),
      reuseWeight: fc.constantFrom(0, 1, 4),
      decodeWeight: fc.constantFrom(0, 30, 300),
      kvWeight: fc.constantFrom(0, 0.05, 3),
      fullScan: fc.boolean(),
    }),
    { minLength: 1, maxLength: 8 },
  ),
  seed: fc.nat(),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

function build(kit: Kit, s: Scenario): void {
  s.workers.forEach((w, i) => {
    const slot = kit.workers.ensure(`w${i}`);
    const factor = RATIO ** CLASSES[w.speedClass]!;
    kit.ledger.setWorker(slot, { totalBlocks: 1000, maxBatchedTokens: w.maxBatchedTokens });
    kit.ledger.setSpeed(slot, { baseMs: factor * A0, msPerToken: factor * B0 });
    kit.ledger.setGroup(slot, w.speedClass);
  });
  for (const st of s.stores) {
    if (st.worker >= s.workers.length) continue;
    const tokens = CHAINS[st.chain]!.slice(0, st.blocks * BS);
    kit.index.applyStored({ id: `w${st.worker}`, rank: 0 }, null, Array.from({ length: st.blocks }, (_, i) => BigInt(st.chain * 100 + i + 1)), kit.localHashes(tokens));
  }
  s.bookings.forEach((b, n) => {
    if (b.worker >= s.workers.length) return;
    const prompt = kit.decider.prepare(CHAINS[b.chain]!.slice(0, b.blocks * BS), DEFAULT_SEED);
    kit.ledger.add(`b${n}`, kit.workers.slotOf(`w${b.worker}`)!, prompt.sequence, b.prefill, 0);
    if (b.decoding) kit.ledger.prefillComplete(`b${n}`);
  });
}

/** Every worker's predicted time to first token (ms) for a decision, from the scenario alone. */
function predicted(s: Scenario, d: Scenario['decisions'][number]): number[] {
  const full = Math.floor(d.length / BS);
  const promptTokens = d.length + d.tail;
  let fleetPrefill = 0;
  let fleetBatched = 0;
  s.workers.forEach((w) => (fleetBatched += w.maxBatchedTokens));
  for (const b of s.bookings) if (b.worker < s.workers.length && !b.decoding) fleetPrefill += b.prefill;
  const reuse = 1 + d.reuseWeight * (fleetPrefill / fleetBatched);
  return s.workers.map((w, i) => {
    const factor = RATIO ** CLASSES[w.speedClass]!;
    let queued = 0;
    let decoding = 0;
    let held = 0;
    // The KV its active requests hold: one chain's bookings share their common prefix.
    const heldPerChain = new Map<number, number>();
    for (const b of s.bookings) {
      if (b.worker !== i) continue;
      if (b.decoding) decoding++;
      else queued += b.prefill;
      heldPerChain.set(b.chain, Math.max(heldPerChain.get(b.chain) ?? 0, b.blocks));
      if (b.chain === d.chain) held = Math.max(held, Math.min(b.blocks, full));
    }
    let activeBlocks = 0;
    for (const blocks of heldPerChain.values()) activeBlocks += blocks;
    let overlap = 0;
    for (const st of s.stores) if (st.worker === i && st.chain === d.chain) overlap = Math.max(overlap, Math.min(st.blocks, full));
    const cached = Math.min(Math.max(overlap, held) * BS, promptTokens);
    return factor * A0 + factor * B0 * (queued + d.decodeWeight * decoding + d.kvWeight * activeBlocks * BS + reuse * (promptTokens - cached));
  });
}

describe('the ttft cost in the fused decision', () => {
  it('picks as the twin does, and a worker of the least predicted time to first token', () => {
    let decided = 0;
    const paths = { fast: 0, scan: 0 };
    fc.assert(
      fc.property(scenario, (s) => {
        const kits = [wasmKit(s.seed), twinKit(s.seed)] as const;
        for (const kit of kits) build(kit, s);
        const groups = { allowed: new Uint8Array(CLASSES.length).fill(1), multipliers: Float64Array.from(CLASSES, (c) => RATIO ** c) };
        for (const d of s.decisions) {
          const tokens = [...CHAINS[d.chain]!.slice(0, d.length), ...Array.from({ length: d.tail }, (_, i) => 90_000 + i)];
          const cost: DecisionCost = { kind: CostKind.ttft, reuseWeight: d.reuseWeight, decodeWeight: d.decodeWeight, kvWeight: d.kvWeight, temperature: 0 };
          const [a, b] = kits.map((kit) =>
            kit.decider.decide({ prompt: kit.decider.prepare(tokens, DEFAULT_SEED), promptTokens: tokens.length, busy: null, constraints: { slots: null, excluded: null, groups }, cost, book: null, fullScan: d.fullScan }),
          );
          expect({ slot: a!.slot, cost: a!.cost, overlap: a!.overlapBlocks }).toEqual({ slot: b!.slot, cost: b!.cost, overlap: b!.overlapBlocks });
          const times = predicted(s, d);
          const best = Math.min(...times);
          const picked = times[Number(kits[0].workers.keyOf(a!.slot).id.slice(1))]!;
          expect(picked).toBeLessThanOrEqual(best * (1 + 1e-9));
          // The decision's cost is the predicted time in tokens at the reference speed.
          expect(a!.cost * B0).toBeCloseTo(picked, 6);
          paths[a!.path]++;
          decided++;
        }
      }),
      { numRuns: 300 },
    );
    expect(decided).toBeGreaterThan(300);
    expect(Math.min(paths.fast, paths.scan)).toBeGreaterThan(decided / 4);
  });

  it('hand-computed: the queue ahead, the uncached tokens, decoding requests and the reuse factor', () => {
    for (const kit of [wasmKit(1), twinKit(1)]) {
      const slots = [0, 1, 2].map((w) => kit.workers.ensure(`w${w}`));
      for (const slot of slots) kit.ledger.setWorker(slot, { totalBlocks: 100, maxBatchedTokens: 100 });
      kit.ledger.setSpeed(slots[0]!, { baseMs: 10, msPerToken: 0.5 });
      kit.ledger.setSpeed(slots[1]!, { baseMs: 10, msPerToken: 0.5 });
      kit.ledger.setSpeed(slots[2]!, { baseMs: 10, msPerToken: 0.5 });
      // w0: 60 tokens queued; w1: one decoding request; w2: the prompt's first 2 blocks cached.
      kit.ledger.add('q', slots[0]!, [], 60, 0);
      kit.ledger.add('d', slots[1]!, [], 0, 0);
      kit.ledger.prefillComplete('d');
      kit.index.applyStored({ id: 'w2', rank: 0 }, null, [1n, 2n], kit.localHashes(CHAINS[0]!.slice(0, 2 * BS)));
      const tokens = CHAINS[0]!.slice(0, 12);
      const decide = (reuseWeight: number, decodeWeight: number) =>
        kit.decider.decide({ prompt: kit.decider.prepare(tokens, DEFAULT_SEED), promptTokens: 12, busy: null, constraints: { slots: null, excluded: null, groups: null }, cost: { kind: CostKind.ttft, reuseWeight, decodeWeight, kvWeight: 0, temperature: 0 }, book: null });
      // Fleet queue: 60 tokens over 300 batched = 0.2 steps; r = 1 + 4 x 0.2 = 1.8.
      // Costs in tokens: w0 20 + 60 + 1.8 x 12 = 101.6; w1 20 + 50 x 1 + 21.6 = 91.6; w2 20 + 1.8 x 4 = 27.2.
      expect(decide(4, 50)).toMatchObject({ slot: slots[2], overlapBlocks: 2 });
      expect(decide(4, 50).cost).toBeCloseTo(27.2, 9);
      // Without the cache (another prompt), w1's decoding request at 50 tokens beats w0's 60 queued.
      const other = CHAINS[1]!.slice(0, 12);
      const cold = kit.decider.decide({ prompt: kit.decider.prepare(other, DEFAULT_SEED), promptTokens: 12, busy: null, constraints: { slots: null, excluded: null, groups: null }, cost: { kind: CostKind.ttft, reuseWeight: 0, decodeWeight: 50, kvWeight: 0, temperature: 0 }, book: null });
      // w0 20 + 60 + 12 = 92; w1 20 + 50 + 12 = 82; w2 20 + 12 = 32: the idle worker.
      expect(cold).toMatchObject({ slot: slots[2] });
      expect(cold.cost).toBeCloseTo(32, 9);
      // A decode weight past the queue's: w0 (92) beats w1 (20 + 100 + 12 = 132) once w2 is excluded.
      const heavy = kit.decider.decide({ prompt: kit.decider.prepare(other, DEFAULT_SEED), promptTokens: 12, busy: null, constraints: { slots: null, excluded: Uint32Array.of(slots[2]!), groups: null }, cost: { kind: CostKind.ttft, reuseWeight: 0, decodeWeight: 100, kvWeight: 0, temperature: 0 }, book: null });
      expect(heavy).toMatchObject({ slot: slots[0] });
      expect(heavy.cost).toBeCloseTo(92, 9);
    }
  });

  it('hand-computed: the KV weight counts each distinct KV token the active requests hold', () => {
    for (const kit of [wasmKit(1), twinKit(1)]) {
      const slots = [0, 1].map((w) => kit.workers.ensure(`w${w}`));
      for (const slot of slots) {
        kit.ledger.setWorker(slot, { totalBlocks: 100, maxBatchedTokens: 100 });
        kit.ledger.setSpeed(slot, { baseMs: 10, msPerToken: 0.5 });
      }
      const hold = (id: string, slot: number, chain: number, blocks: number) => {
        kit.ledger.add(id, slot, kit.decider.prepare(CHAINS[chain]!.slice(0, blocks * BS), DEFAULT_SEED).sequence, 0, 0);
        kit.ledger.prefillComplete(id);
      };
      // w0: one decoding request holding 4 blocks; w1: two holding 1 and 2 blocks of one chain, 2 distinct.
      hold('a', slots[0]!, 1, 4);
      hold('b', slots[1]!, 2, 1);
      hold('c', slots[1]!, 2, 2);
      const tokens = CHAINS[0]!.slice(0, 12);
      const decide = (kvWeight: number) =>
        kit.decider.decide({ prompt: kit.decider.prepare(tokens, DEFAULT_SEED), promptTokens: 12, busy: null, constraints: { slots: null, excluded: null, groups: null }, cost: { kind: CostKind.ttft, reuseWeight: 0, decodeWeight: 3, kvWeight, temperature: 0 }, book: null });
      // Without it: w0 20 + 3 x 1 + 12 = 35, w1 20 + 3 x 2 + 12 = 38.
      expect(decide(0)).toMatchObject({ slot: slots[0] });
      expect(decide(0).cost).toBeCloseTo(35, 9);
      // At 0.5 per KV token: w0 35 + 0.5 x 16 = 43, w1 38 + 0.5 x 8 = 42 (counting the shared block twice it would be 44).
      expect(decide(0.5)).toMatchObject({ slot: slots[1] });
      expect(decide(0.5).cost).toBeCloseTo(42, 9);
    }
  });
});
