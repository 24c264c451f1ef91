// Shared by the ledger and selector tests: both implementations behind one
// factory, fleets, and random ledger lifecycles for differential tests.
import fc from 'fast-check';
import { LoadTable } from '../../bindings/load-table.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { ReferenceSelector } from '../../bindings/reference/selector.js';
import type { LoadLedger, ProjectionRequest, WorkerSelector } from '../../bindings/selection-contract.js';
import { Selector } from '../../bindings/selector.js';

export type Impl = 'wasm' | 'twin';
export const IMPLS: Impl[] = ['wasm', 'twin'];

export function makeLedger(impl: Impl): LoadLedger {
  return impl === 'wasm' ? new LoadTable() : new ReferenceLoadTable();
}

export function makePair(impl: Impl, seed = 0): { ledger: LoadLedger; selector: WorkerSelector } {
  if (impl === 'wasm') {
    const ledger = new LoadTable();
    return { ledger, selector: new Selector({ ledger, seed }) };
  }
  const ledger = new ReferenceLoadTable();
  return { ledger, selector: new ReferenceSelector({ ledger, seed }) };
}

/** Adds workers w0..w{n-1} with one capacity; returns their slots. */
export function addFleet(ledger: LoadLedger, n: number, totalBlocks = 1000, maxBatchedTokens = 8192): number[] {
  const slots: number[] = [];
  for (let i = 0; i < n; i++) {
    const slot = ledger.workers.ensure(`w${i}`);
    ledger.setWorker(slot, { totalBlocks, maxBatchedTokens });
    slots.push(slot);
  }
  return slots;
}

/** Sequence hashes h(1..n) under a tag, so prompts with the same tag share a prefix. */
export function chain(tag: number, n: number): bigint[] {
  return Array.from({ length: n }, (_, i) => (BigInt(tag) << 32n) | BigInt(i + 1));
}

export function snapshot(ledger: LoadLedger): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const [name, column] of Object.entries(ledger.columns)) out[name] = Array.from(column as ArrayLike<number>);
  out.liveRequests = [ledger.liveRequests];
  return out;
}

export function projectionSnapshot(ledger: LoadLedger): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const [name, column] of Object.entries(ledger.projection)) out[name] = Array.from(column as ArrayLike<number>);
  return out;
}

// ---- random lifecycles ----

// A small hash universe (0 and 2^64 - 1 included) so prompts share prefixes and blocks often.
export const HASH_POOL: bigint[] = [0n, (1n << 64n) - 1n, ...Array.from({ length: 10 }, (_, i) => 0x9e3779b97f4a7c15n * BigInt(i + 1) & ((1n << 64n) - 1n))];

const hashesArb = fc.oneof(
  // a prefix of the pool: the shared-prefix case
  fc.nat({ max: HASH_POOL.length }).map((n) => HASH_POOL.slice(0, n)),
  // any picks, duplicates within one prompt included
  fc.array(fc.constantFrom(...HASH_POOL), { maxLength: 8 }),
);

export const WORKERS = 5;
export const REQUESTS = 8;

export type LedgerOp =
  | { kind: 'setWorker'; worker: number; totalBlocks: number; maxBatchedTokens: number }
  | { kind: 'setAvailable'; worker: number; available: boolean }
  | { kind: 'removeWorker'; worker: number }
  | { kind: 'add'; request: number; worker: number; hashes: bigint[]; tokens: number; dt: number }
  | { kind: 'prefillComplete'; request: number }
  | { kind: 'free'; request: number }
  | { kind: 'sweep'; dt: number; maxAgeMs: number }
  | { kind: 'project'; request: ProjectionRequest };

export const overlapsArb = fc
  .array(fc.tuple(fc.nat({ max: WORKERS + 1 }), fc.nat({ max: 12 })), { maxLength: WORKERS + 2 })
  .map((pairs) => ({ slots: pairs.map((p) => p[0]), depths: pairs.map((p) => p[1]) }));

export const projectionArb: fc.Arbitrary<ProjectionRequest> = fc.record({
  seqHashes: hashesArb,
  promptTokens: fc.nat({ max: 300 }),
  blockSize: fc.integer({ min: 1, max: 32 }),
  overlaps: overlapsArb,
});

export const ledgerOpArb: fc.Arbitrary<LedgerOp> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('setWorker' as const), worker: fc.nat({ max: WORKERS - 1 }), totalBlocks: fc.nat({ max: 40 }), maxBatchedTokens: fc.nat({ max: 400 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('setAvailable' as const), worker: fc.nat({ max: WORKERS - 1 }), available: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('removeWorker' as const), worker: fc.nat({ max: WORKERS - 1 }) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('add' as const),
      request: fc.nat({ max: REQUESTS - 1 }),
      worker: fc.nat({ max: WORKERS - 1 }),
      hashes: hashesArb,
      tokens: fc.nat({ max: 200 }),
      dt: fc.nat({ max: 100_000 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('prefillComplete' as const), request: fc.nat({ max: REQUESTS }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('free' as const), request: fc.nat({ max: REQUESTS }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sweep' as const), dt: fc.nat({ max: 200_000 }), maxAgeMs: fc.nat({ max: 300_000 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('project' as const), request: projectionArb }) },
);

/**
 * Applies one op and returns what the caller saw (a result or an error
 * message), so two implementations can be compared op by op. `clock` carries
 * the time between ops. A worker that is absent from the WorkerSlots is
 * addressed by a slot no worker holds.
 */
export function applyOp(ledger: LoadLedger, op: LedgerOp, clock: { now: number }): unknown {
  const slotOf = (worker: number) => ledger.workers.slotOf(`w${worker}`) ?? 50 + worker;
  try {
    switch (op.kind) {
      case 'setWorker':
        return ledger.setWorker(ledger.workers.ensure(`w${op.worker}`), { totalBlocks: op.totalBlocks, maxBatchedTokens: op.maxBatchedTokens });
      case 'setAvailable':
        return ledger.setAvailable(slotOf(op.worker), op.available);
      case 'removeWorker': {
        const dropped = ledger.removeWorker(slotOf(op.worker)).sort();
        ledger.workers.release(`w${op.worker}`);
        return dropped;
      }
      case 'add':
        clock.now += op.dt;
        return ledger.add(`r${op.request}`, slotOf(op.worker), op.hashes, op.tokens, clock.now);
      case 'prefillComplete':
        return ledger.prefillComplete(`r${op.request}`);
      case 'free':
        return ledger.free(`r${op.request}`);
      case 'sweep':
        clock.now += op.dt;
        return ledger.sweep(clock.now, op.maxAgeMs).sort();
      case 'project':
        ledger.project(op.request);
        return projectionSnapshot(ledger);
    }
  } catch (error) {
    return { error: (error as Error).message };
  }
}
