// Which of a hybrid model's KV cache groups make the prefix index. A model
// with several attention kinds (full attention beside sliding-window or
// Mamba layers) publishes one group per kind, each with its own blocks. Only a
// full-attention group's blocks are a reusable prefix (a sliding window keeps
// only the last tokens; a recurrent state only the last position), and one
// chain must hold one group's blocks, so each worker's events are indexed
// from a single group: the first full-attention one it names. Engines with
// one group name none, or group 0.
import type { BlockRemoved, BlockStored } from '../kv-events.js';

const PREFIX_KINDS = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);

interface WorkerGroups {
  /** The group the worker's prefix blocks come from, once known. */
  prefix: number | null;
  /** Groups known to be of another kind. */
  others: Set<number>;
}

export class KvGroups {
  private readonly byWorker = new Map<string, WorkerGroups>();

  /** Whether a store's blocks belong in the prefix index; learns the worker's groups from it. */
  storeIndexed(worker: string, event: BlockStored): boolean {
    const group = event.groupIdx ?? null;
    const kind = event.specKind ?? null;
    if (group === null && kind === null) return true;
    const state = this.of(worker);
    const id = group ?? 0;
    if (kind !== null) {
      const prefixKind = PREFIX_KINDS.has(kind) && (event.slidingWindow ?? null) === null;
      if (!prefixKind) {
        state.others.add(id);
        return false;
      }
      state.prefix ??= id;
      return state.prefix === id;
    }
    return this.known(state, id);
  }

  /** Whether a removal names blocks of the prefix group. */
  removeIndexed(worker: string, event: BlockRemoved): boolean {
    const group = event.groupIdx ?? null;
    if (group === null) return true;
    return this.known(this.of(worker), group);
  }

  forget(worker: string): void {
    this.byWorker.delete(worker);
  }

  // A group named without its kind: the prefix group if it is the one
  // learned, else group 0 while none is.
  private known(state: WorkerGroups, group: number): boolean {
    if (state.prefix !== null) return state.prefix === group;
    return group === 0 && !state.others.has(0);
  }

  private of(worker: string): WorkerGroups {
    let state = this.byWorker.get(worker);
    if (!state) {
      state = { prefix: null, others: new Set() };
      this.byWorker.set(worker, state);
    }
    return state;
  }
}
