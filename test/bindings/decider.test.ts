// The wasm Decider's own behaviour: prompts' hashes and matches reused from
// core memory only while they are still there (other bindings moving or
// overwriting the buffers, memory growing), bookings it makes in the core
// handed to the ledger, projections it leaves partial, and fast-path views
// beyond the core's limit.
import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED } from '../../bindings/block-hasher.js';
import { BlockHasher as TwinHasher } from '../../bindings/reference/block-hasher.js';
import { NO_CONSTRAINTS, type DecisionRequest, type PromptHashes } from '../../bindings/decision-contract.js';
import { BS, COSTS, twinKit, wasmKit, type Kit } from './decider.fixtures.js';

const twinHasher = new TwinHasher();
const tokens = (n: number, start = 1) => Array.from({ length: n }, (_, i) => start + i);

function fleet(kit: Kit, workers: number): void {
  for (let w = 0; w < workers; w++) kit.ledger.setWorker(kit.workers.ensure(`w${w}`), { totalBlocks: 100, maxBatchedTokens: 1000 });
}

function store(kit: Kit, worker: number, prompt: number[]): void {
  const external = Array.from({ length: Math.floor(prompt.length / BS) }, (_, i) => BigInt(1000 * worker + i + 1));
  kit.index.applyStored({ id: `w${worker}`, rank: 0 }, null, external, kit.localHashes(prompt));
}

function request(prompt: PromptHashes, promptTokens: number, extra: Partial<DecisionRequest> = {}): DecisionRequest {
  return { prompt, promptTokens, busy: null, constraints: NO_CONSTRAINTS, cost: COSTS[0]!, ...extra };
}

describe('Decider', () => {
  it('prepare hashes both lists as the twin does, each prompt into lists of its own', () => {
    const kit = wasmKit(1);
    const prompts = Array.from({ length: 60 }, (_, i) => tokens(40 + i, 7 * i));
    const prepared = prompts.map((p) => kit.decider.prepare(p, DEFAULT_SEED));
    prompts.forEach((p, i) => {
      const local = twinHasher.localHashes(p, BS);
      expect([...prepared[i]!.local]).toEqual([...local]);
      expect([...prepared[i]!.sequence]).toEqual([...twinHasher.sequenceHashes(local)]);
    });
  });

  it('prepare hashes the new tokens after another binding reserved the hasher input larger (a long KV event)', () => {
    const kit = wasmKit(1);
    kit.decider.prepare(tokens(64), DEFAULT_SEED);
    kit.localHashes(tokens(500_000, 5));
    const prompt = tokens(64, 999);
    expect([...kit.decider.prepare(prompt, DEFAULT_SEED).local]).toEqual([...twinHasher.localHashes(prompt, BS)]);
  });

  it('decides on a prompt prepared earlier from its own hashes and matches, not those left by a later prompt or event', () => {
    const wasm = wasmKit(2);
    const twin = twinKit(2);
    for (const kit of [wasm, twin]) {
      fleet(kit, 4);
      store(kit, 1, tokens(32));
      store(kit, 3, tokens(32, 500));
    }
    const first = [wasm, twin].map((k) => k.decider.prepare(tokens(32), DEFAULT_SEED));
    // Another prompt, a KV event and core memory growth in between.
    for (const kit of [wasm, twin]) {
      kit.decider.prepare(tokens(32, 500), DEFAULT_SEED);
      store(kit, 2, tokens(16));
      kit.localHashes(tokens(300_000, 3));
    }
    const [a, b] = [wasm, twin].map((k, i) => k.decider.decide(request(first[i]!, 32)));
    expect(a!.slot).toBe(1);
    expect(a!.overlapBlocks).toBe(8);
    expect({ ...a!, path: 'scan' }).toEqual(b);
    expect(wasm.decider.bestDepth(first[0]!, NO_CONSTRAINTS)).toBe(8);
  });

  it('a booking made in the core belongs to the ledger: freed by id, never booked twice', () => {
    const kit = wasmKit(3);
    fleet(kit, 3);
    const prompt = kit.decider.prepare(tokens(40), DEFAULT_SEED);
    const decision = kit.decider.decide(request(prompt, 40, { book: { requestId: 'r1', now: 5 } }));
    expect(kit.ledger.has('r1')).toBe(true);
    expect(kit.ledger.columns.activePrefillTokens[decision.slot]).toBe(40);
    expect(() => kit.decider.decide(request(prompt, 40, { book: { requestId: 'r1', now: 6 } }))).toThrow(/already booked/);
    expect(kit.ledger.free('r1')).toBe(true);
    expect(kit.ledger.liveRequests).toBe(0);
  });

  it('a booking on a worker without KV events records the prompt as routed there', () => {
    const kit = wasmKit(4);
    fleet(kit, 3);
    kit.decider.setRouted(2, true);
    const prompt = kit.decider.prepare(tokens(40), DEFAULT_SEED);
    const pinned = { slots: Uint32Array.of(2), excluded: null, groups: null };
    const decision = kit.decider.decide(request(prompt, 40, { constraints: pinned, book: { requestId: 'r1', now: 0 } }));
    expect(decision).toMatchObject({ slot: 2, routed: true });
    const again = kit.decider.prepare(tokens(40), DEFAULT_SEED);
    expect(kit.decider.bestDepth(again, NO_CONSTRAINTS)).toBe(10);
  });

  it('a fast decision that left workers out of the projection does not pass it off as current', () => {
    const kit = wasmKit(5);
    fleet(kit, 40);
    store(kit, 0, tokens(64));
    for (let w = 1; w < 40; w++) store(kit, w, tokens(8));
    const prompt = kit.decider.prepare(tokens(64), DEFAULT_SEED);
    const fast = kit.decider.decide(request(prompt, 64));
    expect(fast).toMatchObject({ slot: 0, path: 'fast' });
    // The shallow matches cost more than worker 0's bound: they were skipped.
    expect(kit.ledger.projected).toBeUndefined();
    const scan = kit.decider.decide(request(prompt, 64, { fullScan: true }));
    expect(scan.slot).toBe(0);
    expect(kit.ledger.projected).toEqual({ promptTokens: 64, blockSize: BS });
    expect(Array.from(kit.ledger.projection.overlapBlocks.slice(0, 3))).toEqual([16, 2, 2]);
  });

  it('decides exactly on more distinct busy thresholds than the core keeps views for', () => {
    const wasm = wasmKit(6);
    const twin = twinKit(6);
    for (const kit of [wasm, twin]) {
      fleet(kit, 12);
      for (let w = 0; w < 12; w++) kit.ledger.add(`load${w}`, w, [], 10 * w, 0);
    }
    const prompt = [wasm, twin].map((k) => k.decider.prepare(tokens(20), DEFAULT_SEED));
    for (let round = 0; round < 3; round++) {
      for (let t = 0; t < 12; t++) {
        const busy = { prefillTokens: 10 * t + 5 };
        const [a, b] = [wasm, twin].map((k, i) => k.decider.decide(request(prompt[i]!, 20, { busy })));
        expect({ ...a!, path: 'scan' }).toEqual(b);
        expect(a!.counts.eligible).toBe(t + 1);
      }
    }
  });
});

describe('Decider memory', () => {
  it('decisions, bookings and their release hold no core memory once the requests are freed', () => {
    const kit = wasmKit(7);
    fleet(kit, 50);
    for (let w = 0; w < 50; w += 5) store(kit, w, tokens(8 * (w % 4 + 1)));
    const core = kit.ledger.core;
    const round = (i: number) => {
      const prompt = kit.decider.prepare(tokens(40, i % 3), DEFAULT_SEED);
      const groups = { allowed: Uint8Array.of(1, 1), multipliers: Float64Array.of(1, 0.5) };
      const constraints = i % 2 ? { slots: null, excluded: Uint32Array.of(i % 50), groups } : NO_CONSTRAINTS;
      kit.decider.decide(request(prompt, 40, { constraints, busy: i % 3 ? { prefillTokens: 200 } : null, book: { requestId: `r${i}`, now: i } }));
      kit.ledger.free(`r${i}`);
    };
    for (let w = 0; w < 50; w += 7) kit.ledger.setGroup(w, 1);
    for (let i = 0; i < 20; i++) round(i);
    const settled = core.liveBytes;
    for (let i = 20; i < 400; i++) round(i);
    expect(core.liveBytes).toBe(settled);
    expect(kit.ledger.liveRequests).toBe(0);
  });
});
