// Turns a snapshot of a prefix index (its nodes and each worker's ids) into
// stored/removed events that rebuild it when applied to an empty index, and
// applies such events. Shared by the wasm binding and its twin.
//
// Per worker, the blocks it holds form a forest once each is linked to its
// parent block when the worker holds that too. Each tree is emitted as chains
// in depth-first order, so a chain's parent id is always stored earlier. A
// tree whose top block's parent the worker does not hold (after a removal in
// the middle of a chain) cannot hang off a real id: it is stored through the
// missing ancestors under synthetic ids (values the worker does not use),
// from its nearest held ancestor or the root, and a removed event for the
// synthetic ids follows at once, leaving exactly the original holdings.
// Extra ids for a block and extra references of an id (duplicate stores) are
// replayed as further one-block events the same way.
//
// Routed (approximate-mode) blocks come out as stored blocks under their
// sequence-hash ids: a rebuilt index keeps them but no longer expires them.
import type { WorkerKey } from './workers.js';
import type { IndexEvent, PrefixIndexApi } from './prefix-index-api.js';

export interface SnapshotNode {
  id: number;
  /** The parent's id; 0 is the root. */
  parent: number;
  local: bigint;
}

export interface SnapshotId {
  external: bigint;
  node: number;
  /** References: stored events naming the id (a routed block has one). */
  refs: number;
}

export interface IndexSnapshot {
  nodes: readonly SnapshotNode[];
  workers: readonly { worker: WorkerKey; ids: readonly SnapshotId[] }[];
}

export function applyIndexEvents(target: Pick<PrefixIndexApi, 'applyStored' | 'applyRemoved'>, events: readonly IndexEvent[]): void {
  for (const e of events) {
    if (e.type === 'stored') target.applyStored(e.worker, e.parent, e.external, e.local);
    else target.applyRemoved(e.worker, e.external);
  }
}

const SYNTHETIC_BASE = 0x5eed_0000_0000_0000n;

export function eventsFromSnapshot(snapshot: IndexSnapshot): IndexEvent[] {
  const nodes = new Map<number, SnapshotNode>();
  for (const n of snapshot.nodes) nodes.set(n.id, n);
  const depths = new Map<number, number>();
  const depthOf = (id: number): number => {
    let d = depths.get(id);
    if (d === undefined) {
      const parent = nodes.get(id)!.parent;
      d = parent === 0 ? 1 : depthOf(parent) + 1;
      depths.set(id, d);
    }
    return d;
  };
  const out: IndexEvent[] = [];
  for (const { worker, ids } of snapshot.workers) {
    if (ids.length > 0) emitWorker(worker, ids, nodes, depthOf, out);
  }
  return out;
}

function emitWorker(
  worker: WorkerKey,
  ids: readonly SnapshotId[],
  nodes: Map<number, SnapshotNode>,
  depthOf: (id: number) => number,
  out: IndexEvent[],
): void {
  const byNode = new Map<number, SnapshotId[]>();
  const taken = new Set<bigint>();
  for (const id of ids) {
    taken.add(id.external);
    const list = byNode.get(id.node);
    if (list) list.push(id);
    else byNode.set(id.node, [id]);
  }
  const primary = (n: number): bigint => byNode.get(n)![0]!.external;
  const local = (n: number): bigint => nodes.get(n)!.local;

  const kids = new Map<number, number[]>();
  const tops: number[] = [];
  for (const n of byNode.keys()) {
    const parent = nodes.get(n)!.parent;
    if (parent !== 0 && byNode.has(parent)) {
      const list = kids.get(parent);
      if (list) list.push(n);
      else kids.set(parent, [n]);
    } else {
      tops.push(n);
    }
  }
  // Shallow tops first: a deeper top's nearest held ancestor is then stored.
  tops.sort((a, b) => depthOf(a) - depthOf(b) || a - b);

  // Path to n from its nearest held ancestor: that ancestor's id (null at the
  // root) and the missing blocks in between, under synthetic ids.
  const approach = (n: number): { parent: bigint | null; external: bigint[]; local: bigint[] } => {
    const missing: number[] = [];
    let up = nodes.get(n)!.parent;
    while (up !== 0 && !byNode.has(up)) {
      missing.push(up);
      up = nodes.get(up)!.parent;
    }
    missing.reverse();
    const external: bigint[] = [];
    let next = SYNTHETIC_BASE;
    for (let i = 0; i < missing.length; i++) {
      while (taken.has(next)) next++;
      external.push(next++);
    }
    return { parent: up === 0 ? null : primary(up), external, local: missing.map(local) };
  };
  const emit = (parent: bigint | null, external: bigint[], locals: bigint[], synthetic: number): void => {
    out.push({ type: 'stored', worker, parent, external, local: locals });
    if (synthetic > 0) out.push({ type: 'removed', worker, external: external.slice(0, synthetic) });
  };

  for (const top of tops) {
    const lead = approach(top);
    const stack: { start: number; parent: bigint | null; external: bigint[]; local: bigint[] }[] = [{ start: top, ...lead }];
    while (stack.length > 0) {
      const chain = stack.pop()!;
      const synthetic = chain.external.length;
      const external = [...chain.external];
      const locals = [...chain.local];
      for (let n: number | undefined = chain.start; n !== undefined; ) {
        external.push(primary(n));
        locals.push(local(n));
        const below: number[] = kids.get(n) ?? [];
        for (let i = below.length - 1; i >= 1; i--) stack.push({ start: below[i]!, parent: primary(n), external: [], local: [] });
        n = below[0];
      }
      emit(chain.parent, external, locals, synthetic);
    }
  }

  // The primary id of each block went out once; replay the other ids and references.
  for (const [n, list] of byNode) {
    list.forEach((id, i) => {
      for (let r = i === 0 ? 1 : 0; r < id.refs; r++) {
        const lead = approach(n);
        emit(lead.parent, [...lead.external, id.external], [...lead.local, local(n)], lead.external.length);
      }
    });
  }
}
