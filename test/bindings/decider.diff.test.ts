// Differential tests of the fused decision: the wasm Decider (one core call:
// matches, projection, fast path or scan, booking) against its twin (the
// twins composed step by step, full scan) and against today's step-by-step
// path on the wasm kernels (findMatches, project, select), on random fleets,
// taint groups, ledgers, cached prefixes and constraints (pins, allow-lists,
// exclusions, required and preferred taint groups, busy thresholds). Every
// decision must agree exactly: worker, cost, overlap, counts, routed booking.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED } from '../../bindings/block-hasher.js';
import { CostKind, type Decision, type DecisionRequest } from '../../bindings/decision-contract.js';
import { BS, BUSY, CHAINS, COSTS, KV_COSTS, SPEEDS, constraintsOf, promptOf, stepArb, twinKit, wasmKit, type Kit, type Step } from './decider.fixtures.js';

const WORKERS = 12;

function applyFleetStep(kit: Kit, step: Step, live: string[]): void {
  const id = 'worker' in step ? `w${step.worker}` : '';
  const slot = id ? kit.workers.slotOf(id) : undefined;
  switch (step.kind) {
    case 'worker': {
      const s = slot ?? kit.workers.ensure(id);
      kit.ledger.setWorker(s, { totalBlocks: step.totalBlocks, maxBatchedTokens: step.maxBatchedTokens });
      kit.ledger.setGroup(s, step.group);
      kit.decider.setRouted(s, step.routed);
      if (!groupsOf.has(kit)) groupsOf.set(kit, new Map());
      groupsOf.get(kit)!.set(s, step.group);
      return;
    }
    case 'available':
      if (slot !== undefined) kit.ledger.setAvailable(slot, step.available);
      return;
    case 'speed':
      if (slot !== undefined) kit.ledger.setSpeed(slot, SPEEDS[step.speed]!);
      return;
    case 'remove':
      if (slot === undefined) return;
      kit.index.removeWorker(id);
      for (const dropped of kit.ledger.removeWorker(slot)) live.splice(live.indexOf(dropped), 1);
      kit.workers.release(id);
      return;
    case 'store': {
      if (slot === undefined) return;
      const tokens = CHAINS[step.chain]!.slice(0, step.blocks * 4);
      const external = Array.from({ length: step.blocks }, (_, i) => BigInt(step.chain * 100 + i + 1));
      kit.index.applyStored({ id, rank: 0 }, null, external, kit.localHashes(tokens));
      return;
    }
    default:
      return;
  }
}

function requestOf(kit: Kit, step: Extract<Step, { kind: 'decide' }>, prompt: Parameters<Kit['decider']['decide']>[0]['prompt'], requestId: string, now: number): DecisionRequest {
  return {
    prompt,
    promptTokens: promptOf(step).length,
    busy: BUSY[step.busy]!,
    constraints: constraintsOf(kit, step),
    cost: COSTS[step.cost]!,
    book: step.book ? { requestId, now } : null,
    fullScan: step.fullScan,
  };
}

/** A booked request's first token or release, on every kit. */
function settle(kits: readonly Kit[], step: Extract<Step, { kind: 'first' | 'release' }>, live: string[][]): void {
  if (live[0]!.length === 0) return;
  const id = live[0]![step.pick % live[0]!.length]!;
  kits.forEach((kit, i) => {
    if (step.kind === 'first') kit.ledger.prefillComplete(id);
    else {
      kit.ledger.free(id);
      live[i]!.splice(live[i]!.indexOf(id), 1);
    }
  });
}

const comparable = (d: Decision) => ({ slot: d.slot, cost: d.cost, overlapBlocks: d.overlapBlocks, cachedBlocks: d.cachedBlocks, counts: d.counts, routed: d.routed });

/**
 * Runs the steps on a wasm kit and on its twin (each given `setup` first),
 * checking that every decision, best depth and the ledger after every step
 * agree exactly; returns the wasm kit's decisions with their steps.
 */
function decideAgainstTwin(steps: readonly Step[], seed: number, setup: (kit: Kit) => void = () => {}): { step: Extract<Step, { kind: 'decide' }>; decision: Decision }[] {
  const wasm = wasmKit(seed);
  const twin = twinKit(seed);
  setup(wasm);
  setup(twin);
  const decisions: { step: Extract<Step, { kind: 'decide' }>; decision: Decision }[] = [];
  const live: string[][] = [[], []];
  let n = 0;
  let now = 0;
  for (const step of steps) {
    now += 7;
    if (step.kind === 'decide') {
      const tokens = promptOf(step);
      const prompts = [wasm.decider.prepare(tokens, DEFAULT_SEED), twin.decider.prepare(tokens, DEFAULT_SEED)] as const;
      expect([...prompts[0].local, ...prompts[0].sequence]).toEqual([...prompts[1].local, ...prompts[1].sequence]);
      const id = `r${n++}`;
      const [a, b] = [wasm, twin].map((kit, i) => kit.decider.decide(requestOf(kit, step, prompts[i]!, id, now)));
      expect(comparable(a!)).toEqual(comparable(b!));
      decisions.push({ step, decision: a! });
      if (step.book && a!.slot >= 0) live.forEach((l) => l.push(id));
      const constraints = [constraintsOf(wasm, step), constraintsOf(twin, step)] as const;
      expect(wasm.decider.bestDepth(prompts[0], constraints[0])).toBe(twin.decider.bestDepth(prompts[1], constraints[1]));
    } else if (step.kind === 'first' || step.kind === 'release') {
      settle([wasm, twin], step, live);
    } else {
      applyFleetStep(wasm, step, live[0]!);
      applyFleetStep(twin, step, live[1]!);
    }
    expect(Array.from(wasm.ledger.columns.activePrefillTokens)).toEqual(Array.from(twin.ledger.columns.activePrefillTokens));
    expect(Array.from(wasm.ledger.columns.decodingRequests)).toEqual(Array.from(twin.ledger.columns.decodingRequests));
  }
  return decisions;
}

/**
 * Today's path on a kit's wasm kernels: findMatches, project, select over the
 * allowed slots computed here (listed, in an allowed group, not excluded), and
 * for a booking, add (and insertRouted on a worker without KV events).
 */
function stepPath(kit: ReturnType<typeof wasmKit>, request: DecisionRequest, routed: ReadonlySet<number>): Decision {
  const { constraints, prompt } = request;
  const matches = kit.index.findMatches(prompt.local);
  kit.ledger.project({ seqHashes: prompt.sequence, promptTokens: request.promptTokens, blockSize: BS, overlaps: { slots: matches.slots.slice(0, matches.count), depths: matches.depths.slice(0, matches.count) } });
  let allowedSlots: number[] | undefined;
  if (constraints.slots || constraints.excluded || constraints.groups) {
    const excluded = new Set(constraints.excluded ?? []);
    const candidates = constraints.slots ? [...constraints.slots] : Array.from({ length: kit.ledger.rows }, (_, s) => s);
    const groups = constraints.groups;
    allowedSlots = candidates.filter((s) => !excluded.has(s) && (!groups || (s < kit.ledger.rows && groups.allowed[groupOf(kit, s)] === 1)));
  }
  if (request.cost.kind !== CostKind.kv) throw new Error('the step API decides by the kv cost only');
  const { kind: _kind, temperature, ...cost } = request.cost;
  kit.selector.enableFastPath({ blockSize: BS, cost, busy: request.busy ?? undefined });
  const selection = kit.selector.select({ busy: request.busy ?? undefined, allowedSlots, cost, temperature, fullScan: request.fullScan });
  const slot = selection.slot;
  const overlapBlocks = slot >= 0 ? kit.ledger.projection.overlapBlocks[slot]! : 0;
  let booked = false;
  if (slot >= 0 && request.book) {
    kit.ledger.add(request.book.requestId, slot, prompt.sequence, request.promptTokens - Math.min(overlapBlocks * BS, request.promptTokens), request.book.now);
    if (routed.has(slot) && prompt.local.length > 0) {
      kit.index.insertRouted(kit.workers.keyOf(slot), prompt.local, request.book.now);
      booked = true;
    }
  }
  return { slot, cost: selection.cost, overlapBlocks, cachedBlocks: overlapBlocks, counts: selection.counts, path: kit.selector.lastPath!, routed: booked };
}

const groupsOf = new WeakMap<object, Map<number, number>>();
function groupOf(kit: Kit, slot: number): number {
  return groupsOf.get(kit)?.get(slot) ?? 0;
}

describe('Decider (fused decision) against its twin', () => {
  it('decides exactly as the twins composed step by step, through random fleets, ledgers, caches and constraints', () => {
    const paths = { fast: 0, scan: 0 };
    const ttftPaths = { fast: 0, scan: 0 };
    fc.assert(
      fc.property(fc.array(stepArb(WORKERS), { minLength: 1, maxLength: 70 }), fc.nat(), (steps, seed) => {
        for (const { step, decision } of decideAgainstTwin(steps, seed)) {
          paths[decision.path]++;
          if (COSTS[step.cost]!.kind === CostKind.ttft) ttftPaths[decision.path]++;
        }
      }),
      { numRuns: 250 },
    );
    // the comparison is about the fused fast path: most decisions must have taken it, under either cost
    expect(paths.fast).toBeGreaterThan(paths.scan);
    expect(ttftPaths.fast).toBeGreaterThan(ttftPaths.scan / 2);
  });

  it("decides exactly as today's path on the wasm kernels (findMatches, project, select; required taints as allowed slots)", () => {
    // Preferred-taint multipliers are the fused call's own (the step API takes weights), so they are 1 here.
    // The step API decides by the kv cost only.
    const unweighted = stepArb(WORKERS).map((step) =>
      step.kind === 'decide' ? { ...step, cost: step.cost % KV_COSTS, groups: step.groups && { ...step.groups, multipliers: step.groups.multipliers.map(() => 1) } } : step,
    );
    fc.assert(
      fc.property(fc.array(unweighted, { minLength: 1, maxLength: 60 }), fc.nat(), (steps, seed) => {
        const fused = wasmKit(seed);
        const step = wasmKit(seed);
        const routed = new Set<number>();
        const live: string[][] = [[], []];
        let n = 0;
        let now = 0;
        for (const s of steps) {
          now += 7;
          if (s.kind === 'decide') {
            const tokens = promptOf(s);
            const prompt = fused.decider.prepare(tokens, DEFAULT_SEED);
            const id = `r${n++}`;
            const a = fused.decider.decide(requestOf(fused, s, prompt, id, now));
            const b = stepPath(step, requestOf(step, s, prompt, id, now), routed);
            expect(comparable(a)).toEqual(comparable(b));
            if (s.book && a.slot >= 0) live.forEach((l) => l.push(id));
          } else if (s.kind === 'first' || s.kind === 'release') {
            settle([fused, step], s, live);
          } else {
            applyFleetStep(fused, s, live[0]!);
            applyFleetStep(step, s, live[1]!);
            if (s.kind === 'worker') {
              const slot = step.workers.slotOf(`w${s.worker}`)!;
              if (s.routed) routed.add(slot);
              else routed.delete(slot);
            }
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('Decider against its twin where workers tie', () => {
  // Idle workers share key 0, a credit of 0 makes a cached prefix cost nothing
  // off, and equal group multipliers tie groups: the picks come from touched
  // and untouched workers at once, across groups, with excluded workers at the
  // minimum (and, when all of it is excluded, the next key's workers).
  const scenario = fc.record({
    workers: fc.array(fc.record({ group: fc.nat({ max: 2 }), load: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat({ max: 3 }) }) }), { minLength: 2, maxLength: 30 }),
    stores: fc.array(fc.record({ worker: fc.nat({ max: 29 }), chain: fc.nat({ max: 1 }), blocks: fc.integer({ min: 1, max: 6 }) }), { maxLength: 20 }),
    decisions: fc.array(
      fc.record({
        chain: fc.nat({ max: 1 }),
        length: fc.integer({ min: 4, max: 30 }),
        credit: fc.constantFrom(0, 1),
        excluded: fc.array(fc.nat({ max: 31 }), { maxLength: 12 }),
        groups: fc.option(fc.array(fc.constantFrom(1, 0.5), { minLength: 3, maxLength: 3 }), { nil: null }),
        book: fc.boolean(),
      }),
      { minLength: 1, maxLength: 12 },
    ),
    seed: fc.nat(),
  });

  it('picks exactly as the twin, through touched and untouched ties, groups and exclusions', () => {
    fc.assert(
      fc.property(scenario, ({ workers, stores, decisions, seed }) => {
        const kits = [wasmKit(seed), twinKit(seed)] as const;
        for (const kit of kits) {
          workers.forEach((w, i) => {
            const slot = kit.workers.ensure(`w${i}`);
            kit.ledger.setWorker(slot, { totalBlocks: 100, maxBatchedTokens: 1000 });
            kit.ledger.setGroup(slot, w.group);
            for (let r = 0; r < w.load; r++) kit.ledger.add(`load${i}-${r}`, slot, [], 4, 0);
          });
          for (const s of stores) {
            if (s.worker >= workers.length) continue;
            const tokens = CHAINS[s.chain]!.slice(0, s.blocks * BS);
            kit.index.applyStored({ id: `w${s.worker}`, rank: 0 }, null, Array.from({ length: s.blocks }, (_, i) => BigInt(s.chain * 100 + i + 1)), kit.localHashes(tokens));
          }
        }
        decisions.forEach((d, n) => {
          const tokens = CHAINS[d.chain]!.slice(0, d.length);
          const cost = { kind: CostKind.kv, overlapCredit: d.credit, prefillLoadScale: 1, activeRequestWeight: 0, temperature: 0 };
          const groups = d.groups && { allowed: Uint8Array.of(1, 1, 1), multipliers: Float64Array.from(d.groups) };
          const constraints = { slots: null, excluded: d.excluded.length > 0 ? Uint32Array.from(d.excluded) : null, groups };
          const [a, b] = kits.map((kit) => {
            const prompt = kit.decider.prepare(tokens, DEFAULT_SEED);
            return kit.decider.decide({ prompt, promptTokens: tokens.length, busy: null, constraints, cost, book: d.book ? { requestId: `d${n}`, now: n } : null });
          });
          expect(comparable(a!)).toEqual(comparable(b!));
        });
      }),
      { numRuns: 400 },
    );
  });
});

describe('Decider against its twin with credited matches (storage tiers)', () => {
  /**
   * Matches as a tier matcher reports them: the index's, each credited its
   * depth times its worker's weight (a share held in slower tiers). Never the
   * same epoch twice, so every decision stages them afresh.
   */
  function creditedMatcher(kit: Kit, weights: readonly number[]) {
    let epoch = 0;
    return {
      epoch: () => ++epoch,
      find(local: BigUint64Array) {
        const found = kit.index.findMatches(local);
        const slots = found.slots.slice(0, found.count);
        const depths = found.depths.slice(0, found.count);
        const credits = Float64Array.from(depths, (depth, i) => depth * weights[slots[i]! % weights.length]!);
        return { count: found.count, slots, depths, credits };
      },
    };
  }

  it('decides, books and credits exactly as the twin: cost, pick, overlap and credited blocks, ledger after each step', () => {
    const weight = fc.constantFrom(0, 0.25, 0.3, 0.5, 0.75, 1);
    // Every worker present with room, most holding a prefix, before the random steps: picks then land on cached prefixes.
    const fleet: Step[] = Array.from({ length: WORKERS }, (_, w) => ({ kind: 'worker', worker: w, group: w % 3, totalBlocks: 500, maxBatchedTokens: 500, routed: false }));
    const stores = fc.array(fc.record({ kind: fc.constant('store' as const), worker: fc.nat({ max: WORKERS - 1 }), chain: fc.nat({ max: CHAINS.length - 1 }), blocks: fc.integer({ min: 1, max: 10 }) }), { minLength: 4, maxLength: 20 });
    let credited = 0;
    fc.assert(
      fc.property(stores, fc.array(stepArb(WORKERS), { minLength: 1, maxLength: 60 }), fc.array(weight, { minLength: 1, maxLength: WORKERS }), fc.nat(), (cached, random, weights, seed) => {
        const decisions = decideAgainstTwin([...fleet, ...cached, ...random], seed, (kit) => kit.decider.useMatcher(creditedMatcher(kit, weights)));
        credited += decisions.filter(({ decision }) => decision.cachedBlocks < decision.overlapBlocks).length;
      }),
      { numRuns: 200 },
    );
    // the credits must have mattered: picks whose prefix was credited below its depth
    expect(credited).toBeGreaterThan(0);
  });

  it('books a pick whose prefix is credited c blocks with the prompt less c blocks as prefill', () => {
    const kit = wasmKit(1);
    const slot = kit.workers.ensure('w0');
    kit.ledger.setWorker(slot, { totalBlocks: 1000, maxBatchedTokens: 1000 });
    const tokens = CHAINS[0]!.slice(0, 8 * BS);
    kit.index.applyStored({ id: 'w0', rank: 0 }, null, Array.from({ length: 8 }, (_, i) => BigInt(i + 1)), kit.localHashes(tokens));
    kit.decider.useMatcher(creditedMatcher(kit, [0.5]));
    const prompt = kit.decider.prepare(tokens, DEFAULT_SEED);
    const decision = kit.decider.decide({ prompt, promptTokens: tokens.length, busy: null, constraints: { slots: null, excluded: null, groups: null }, cost: COSTS[0]!, book: { requestId: 'r', now: 0 }, fullScan: false });
    expect(decision).toMatchObject({ slot, overlapBlocks: 8, cachedBlocks: 4 });
    // 8 blocks cached at half weight: 4 blocks' tokens (16) are booked as prefill
    expect(kit.ledger.columns.activePrefillTokens[slot]).toBe(16);
  });
});
