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

export type LedgerOp =
  | { kind: 'setWorker'; worker: number; totalBlocks: number; maxBatchedTokens: number }
  | { kind: 'setAvailable'; worker: number; available: boolean }
  | { kind: 'removeWorker'; worker: number }
  | { kind: 'add'; request: number; worker: number; hashes: bigint[]; tokens: number; dt: number }
  | { kind: 'prefillComplete'; request: number }
  | { kind: 'prefillProgress'; request: number; tokens: number; keep: number }
  | { kind: 'free'; request: number }
  | { kind: 'sweep'; dt: number; maxAgeMs: number }
  | { kind: 'project'; request: ProjectionRequest };

export interface LifecycleScale {
  workers: number;
  /** Request ids r0..r{requests-1} (plus one never booked). */
  requests: number;
  /** Prompts are prefixes of `chains` hash chains of `chainLength` blocks, or arbitrary picks from them. */
  chains: number;
  chainLength: number;
}

/** Random ledger lifecycles at one scale: the ops and the projection requests. */
export function lifecycle(scale: LifecycleScale) {
  const { workers, requests, chains, chainLength } = scale;
  // 0 and 2^64 - 1 are in every universe: the extremes of the u64 keys.
  const pool = [0n, (1n << 64n) - 1n, ...Array.from({ length: chains }, (_, t) => chain(t + 1, chainLength)).flat()];
  const hashesArb = fc.oneof(
    // a prefix of one chain: the shared-prefix case
    fc.tuple(fc.nat({ max: chains - 1 }), fc.nat({ max: chainLength })).map(([t, n]) => chain(t + 1, n)),
    // any picks, duplicates within one prompt and the extremes included
    fc.array(fc.constantFrom(...pool), { maxLength: 8 }),
  );
  const overlapsArb = fc
    .array(fc.tuple(fc.nat({ max: workers + 1 }), fc.nat({ max: chainLength + 2 })), { maxLength: workers + 2 })
    .map((pairs) => ({ slots: pairs.map((p) => p[0]), depths: pairs.map((p) => p[1]) }));
  const projectionArb: fc.Arbitrary<ProjectionRequest> = fc.record({
    seqHashes: hashesArb,
    promptTokens: fc.nat({ max: 300 }),
    blockSize: fc.integer({ min: 1, max: 32 }),
    overlaps: overlapsArb,
  });
  const worker = fc.nat({ max: workers - 1 });
  const opArb: fc.Arbitrary<LedgerOp> = fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('setWorker' as const), worker, totalBlocks: fc.nat({ max: 40 }), maxBatchedTokens: fc.nat({ max: 400 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('setAvailable' as const), worker, available: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('removeWorker' as const), worker }) },
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('add' as const),
        request: fc.nat({ max: requests - 1 }),
        worker,
        hashes: hashesArb,
        tokens: fc.nat({ max: 200 }),
        dt: fc.nat({ max: 100_000 }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('prefillComplete' as const), request: fc.nat({ max: requests }) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('prefillProgress' as const), request: fc.nat({ max: requests }), tokens: fc.nat({ max: 250 }), keep: fc.nat({ max: 150 }) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('free' as const), request: fc.nat({ max: requests }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('sweep' as const), dt: fc.nat({ max: 200_000 }), maxAgeMs: fc.nat({ max: 300_000 }) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('project' as const), request: projectionArb }) },
  );
  return { opArb, projectionArb };
}

/** setWorker for every worker of a scale: a start where most ops land on a live worker. */
export function fleetOps(scale: LifecycleScale): LedgerOp[] {
  return Array.from({ length: scale.workers }, (_, worker) => ({ kind: 'setWorker', worker, totalBlocks: 8, maxBatchedTokens: 100 }));
}

/** Five workers and a handful of hashes: sharing, ties and slot reuse everywhere. */
export const SMALL: LifecycleScale = { workers: 5, requests: 8, chains: 2, chainLength: 5 };
/** Enough workers, requests and hashes that the core's maps and pools grow and shrink. */
export const LARGE: LifecycleScale = { workers: 30, requests: 60, chains: 6, chainLength: 40 };

/**
 * Applies one op and returns what the caller saw (a result or an error
 * message), so two implementations can be compared op by op. `clock` carries
 * the time between ops. A worker that is absent from the WorkerSlots is
 * addressed by a slot no worker holds.
 */
export function applyOp(ledger: LoadLedger, op: LedgerOp, clock: { now: number }): unknown {
  const slotOf = (worker: number) => ledger.workers.slotOf(`w${worker}`) ?? 1000 + worker;
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
      case 'prefillProgress':
        return ledger.prefillProgress(`r${op.request}`, op.tokens, op.keep);
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
