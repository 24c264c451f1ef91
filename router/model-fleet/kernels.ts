// The kernels one model fleet decides with, on one wasm Core or on the pure-TS
// twins: the block hasher its KV events are hashed with, the prefix index, the
// load ledger, the selector (its generator and columns) and the fused
// decision, all over one WorkerSlots so a slot means the same worker in each.
import { BlockHasher } from '../../bindings/block-hasher.js';
import { Core } from '../../bindings/core.js';
import { Decider } from '../../bindings/decider.js';
import type { AnswerStage, DecisionKernel } from '../../bindings/decision-contract.js';
import { LoadTable } from '../../bindings/load-table.js';
import type { PrefixIndexApi } from '../../bindings/prefix-index-api.js';
import { ShardedPrefixIndex } from '../../bindings/prefix-index-sharded.js';
import { BlockHasher as ReferenceBlockHasher } from '../../bindings/reference/block-hasher.js';
import { ReferenceDecider } from '../../bindings/reference/decider.js';
import { ReferenceLoadTable } from '../../bindings/reference/load-table.js';
import { ReferencePrefixIndex } from '../../bindings/reference/prefix-index.js';
import { ReferenceSelector } from '../../bindings/reference/selector.js';
import type { LoadLedger, WorkerSelector } from '../../bindings/selection-contract.js';
import { Selector } from '../../bindings/selector.js';
import type { WorkerSlots } from '../../bindings/workers.js';
import type { MediaHasher } from '../media-keys.js';
import type { KeyedHasher } from './block-keys.js';
import type { WireIndex } from './cache-index.js';

/** What the model fleet needs of a block hasher for KV events, salted prompts and media keys: the wasm one and its twin both fit. */
export type EventHasher = KeyedHasher & MediaHasher;

export interface Kernels {
  /** The wasm core (undefined on the twins). */
  readonly core: Core | undefined;
  readonly hasher: EventHasher;
  readonly index: PrefixIndexApi;
  readonly ledger: LoadLedger;
  readonly selector: WorkerSelector;
  readonly decider: DecisionKernel;
  /** A new, empty index like the model's, for an offloaded storage tier (on a core of its own). */
  tierIndex(): PrefixIndexApi;
  /** The index again, when it applies KV-event batches from their wire bytes (the wasm one). */
  readonly wire: WireIndex | null;
}

export interface KernelOptions {
  kernels: 'wasm' | 'reference';
  workers: WorkerSlots;
  blockSize: number;
  seed: number;
  routedTtlMs: number | undefined;
  maxRoutedBlocks: number | undefined;
  indexMemoryBytes: number | undefined;
  /** Index shards (cores); default: as many as the memory bound needs. */
  indexShards?: number;
}

export function createKernels(options: KernelOptions): Kernels {
  const { workers, blockSize, seed } = options;
  const indexOptions = { workers, ttlMs: options.routedTtlMs, maxRoutedBlocks: options.maxRoutedBlocks };
  if (options.kernels === 'reference') {
    const hasher = new ReferenceBlockHasher();
    const index = new ReferencePrefixIndex(indexOptions);
    const ledger = new ReferenceLoadTable({ workers });
    const selector = new ReferenceSelector({ ledger, seed });
    const decider = new ReferenceDecider({ hasher, index, ledger, selector, blockSize });
    return { core: undefined, hasher, index, ledger, selector, decider, tierIndex: () => new ReferencePrefixIndex(indexOptions), wire: null };
  }
  const core = new Core();
  const hasher = new BlockHasher({ core });
  const index = new ShardedPrefixIndex({ core, ...indexOptions, memoryBoundBytes: options.indexMemoryBytes, shards: options.indexShards });
  const ledger = new LoadTable({ core, workers });
  const selector = new Selector({ ledger, seed });
  // An index over several cores is searched from here, its matches staged in
  // the decision's core; one in the decision's core is searched in the core.
  const matcher =
    index.shards.length > 1
      ? { find: (local: BigUint64Array) => index.findMatches(local), epoch: () => index.matchesEpoch(), stage: (local: BigUint64Array, into: AnswerStage) => index.stageAnswer(local, into) }
      : undefined;
  const tierIndex = () => new ShardedPrefixIndex({ core: new Core(), ...indexOptions, memoryBoundBytes: options.indexMemoryBytes, shards: options.indexShards });
  return { core, hasher, index, ledger, selector, decider: new Decider({ hasher, ledger, selector, blockSize, matcher }), tierIndex, wire: index };
}
