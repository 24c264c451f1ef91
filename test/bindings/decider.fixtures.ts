// The fused decision's kernels, wasm and twin, each set on its own Core (or
// twins), and random decision scenarios for differential tests.
import fc from 'fast-check';
import { BlockHasher } from '../../bindings/block-hasher.js';
import { Core } from '../../bindings/core.js';
import { Decider } from '../../bindings/decider.js';
import type { DecisionConstraints, DecisionCost, DecisionKernel, GroupTable } from '../../bindings/decision-contract.js';
import { LoadTable } from '../../bindings/load-table.js';
import { PrefixIndex } from '../../bindings/prefix-index.js';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { BlockHasher as ReferenceBlockHasher } from '../../bindings/reference/block-hasher.js';
import { ReferenceDecider } from '../../bindings/reference/decider.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { ReferencePrefixIndex } from '../../bindings/reference/prefix-index.js';
import { ReferenceSelector } from '../../bindings/reference/selector.js';
import type { BusyThresholds, LoadLedger, WorkerSelector } from '../../bindings/selection-contract.js';
import { Selector } from '../../bindings/selector.js';
import { WorkerSlots } from '../../bindings/workers.js';

export const BS = 4;

export interface Kit {
  workers: WorkerSlots;
  index: PrefixIndexApi;
  ledger: LoadLedger;
  selector: WorkerSelector;
  decider: DecisionKernel;
  /** Hashes as the kit's own hasher computes them (for KV events). */
  localHashes(tokens: number[]): BigUint64Array;
}

export function wasmKit(seed: number): Kit & { ledger: LoadTable; selector: Selector; index: PrefixIndex } {
  const core = new Core();
  const workers = new WorkerSlots();
  const hasher = new BlockHasher({ core });
  const index = new PrefixIndex({ core, workers });
  const ledger = new LoadTable({ core, workers });
  const selector = new Selector({ ledger, seed });
  const decider = new Decider({ hasher, ledger, selector, blockSize: BS });
  return { workers, index, ledger, selector, decider, localHashes: (tokens) => hasher.localHashes(tokens, BS) };
}

export function twinKit(seed: number): Kit {
  const workers = new WorkerSlots();
  const hasher = new ReferenceBlockHasher();
  const index = new ReferencePrefixIndex({ workers });
  const ledger = new ReferenceLoadTable({ workers });
  const selector = new ReferenceSelector({ ledger, seed });
  const decider = new ReferenceDecider({ hasher, index, ledger, selector, blockSize: BS });
  return { workers, index, ledger, selector, decider, localHashes: (tokens) => hasher.localHashes(tokens, BS) };
}

/** Prompts come from a few chains of tokens, so cached prefixes and active hashes overlap. */
export const CHAINS = [0, 1, 2].map((c) => Array.from({ length: 40 }, (_, i) => 1000 * (c + 1) + i));

export const GROUPS = 3;
const MULTIPLIERS = [1, 0.5, Math.exp(-Math.tanh(0.7)), Math.exp(-Math.tanh(-0.3))];
export const BUSY: (BusyThresholds | null)[] = [null, { prefillTokens: 30 }, { decodeFraction: 0.5 }, { prefillFraction: 0.5, prefillTokens: 60 }];
export const COSTS: DecisionCost[] = [
  { kind: 0, overlapCredit: 1, prefillLoadScale: 1, activeRequestWeight: 0, temperature: 0 },
  { kind: 0, overlapCredit: 0.5, prefillLoadScale: 2, activeRequestWeight: 0, temperature: 0 },
  { kind: 0, overlapCredit: 1, prefillLoadScale: 1, activeRequestWeight: 1, temperature: 0 },
  { kind: 0, overlapCredit: 3, prefillLoadScale: 0.5, activeRequestWeight: 0.25, temperature: 0 },
  { kind: 1, reuseWeight: 4, decodeWeight: 300, kvWeight: 0.05, temperature: 0 },
  { kind: 1, reuseWeight: 0, decodeWeight: 0, kvWeight: 0, temperature: 0 },
  { kind: 1, reuseWeight: 1.5, decodeWeight: 7, kvWeight: 2, temperature: 0.5 },
];
/** The kv costs of COSTS (the step-by-step selector API takes only those). */
export const KV_COSTS = COSTS.filter((c) => c.kind === 0).length;
/** Worker speeds for the ttft cost: the unit speed, a mid-size engine's, a slow one's. */
export const SPEEDS = [
  { baseMs: 0, msPerToken: 1 },
  { baseMs: 20, msPerToken: 1 / 48 },
  { baseMs: 7.5, msPerToken: 0.3 },
];

export type Step =
  | { kind: 'worker'; worker: number; group: number; totalBlocks: number; maxBatchedTokens: number; routed: boolean }
  | { kind: 'available'; worker: number; available: boolean }
  | { kind: 'speed'; worker: number; speed: number }
  | { kind: 'remove'; worker: number }
  | { kind: 'store'; worker: number; chain: number; blocks: number }
  | { kind: 'first'; pick: number }
  | { kind: 'release'; pick: number }
  | {
      kind: 'decide';
      chain: number;
      length: number;
      tail: number;
      busy: number;
      cost: number;
      pin: number | null;
      list: number[] | null;
      excluded: number[] | null;
      groups: { allowed: boolean[]; multipliers: number[] } | null;
      book: boolean;
      fullScan: boolean;
    };

export function stepArb(workers: number): fc.Arbitrary<Step> {
  const worker = fc.nat({ max: workers - 1 });
  return fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('worker' as const), worker, group: fc.nat({ max: GROUPS - 1 }), totalBlocks: fc.nat({ max: 60 }), maxBatchedTokens: fc.nat({ max: 120 }), routed: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('available' as const), worker, available: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('speed' as const), worker, speed: fc.nat({ max: SPEEDS.length - 1 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), worker }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('store' as const), worker, chain: fc.nat({ max: CHAINS.length - 1 }), blocks: fc.integer({ min: 1, max: 10 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('first' as const), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('decide' as const),
        chain: fc.nat({ max: CHAINS.length - 1 }),
        length: fc.nat({ max: 40 }),
        tail: fc.nat({ max: 12 }),
        busy: fc.nat({ max: BUSY.length - 1 }),
        cost: fc.nat({ max: COSTS.length - 1 }),
        pin: fc.option(fc.nat({ max: workers }), { freq: 6 }),
        list: fc.option(fc.array(fc.nat({ max: workers + 1 }), { maxLength: workers + 2 }), { freq: 3 }),
        excluded: fc.option(fc.array(fc.nat({ max: workers }), { maxLength: 4 }), { freq: 2 }),
        groups: fc.option(
          fc.record({
            allowed: fc.array(fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }), { minLength: GROUPS, maxLength: GROUPS }),
            multipliers: fc.array(fc.constantFrom(...MULTIPLIERS), { minLength: GROUPS, maxLength: GROUPS }),
          }),
          { freq: 2 },
        ),
        book: fc.boolean(),
        fullScan: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      }),
    },
  );
}

export function promptOf(step: Extract<Step, { kind: 'decide' }>): number[] {
  return [...CHAINS[step.chain]!.slice(0, step.length), ...Array.from({ length: step.tail }, (_, i) => 90_000 + i)];
}

/** The decision's constraints over a kit's slots (the same slots on every kit: workers are added in the same order). */
export function constraintsOf(kit: Kit, step: Extract<Step, { kind: 'decide' }>): DecisionConstraints {
  const slotOf = (w: number) => kit.workers.slotOf(`w${w}`) ?? 1000 + w;
  let slots: Uint32Array | null = null;
  if (step.pin !== null) slots = Uint32Array.of(slotOf(step.pin));
  else if (step.list) slots = Uint32Array.from(step.list, slotOf);
  const excluded = step.excluded ? Uint32Array.from(step.excluded, slotOf) : null;
  let groups: GroupTable | null = null;
  if (step.groups) groups = { allowed: Uint8Array.from(step.groups.allowed, (a) => (a ? 1 : 0)), multipliers: Float64Array.from(step.groups.multipliers) };
  return { slots, excluded, groups };
}
