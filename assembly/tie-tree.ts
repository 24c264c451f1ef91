import { alloc, release } from './alloc';

// A tournament (segment) tree over the ledger's worker slots that answers, in
// O(1) at the root, "what is the smallest key among member leaves, how many
// leaves hold it, and what is the next larger key", and draws the r-th leaf
// holding the smallest key in O(log n). The ledger keeps the request-independent
// part of every candidate worker's cost here (cost-model.ts), so a decision
// finds the cheapest untouched worker without visiting every row.
//
// Implicit binary heap of 2 x `leaves` nodes (leaves a power of two): node 1 is
// the root, node i has children 2i and 2i + 1, leaf for slot s is node
// leaves + s. A node is 24 bytes:
//   +0  min    f64  smallest key among member leaves below (+Infinity: none)
//   +8  next   f64  smallest key below that is larger than min (+Infinity: none)
//   +16 count  u32  member leaves below whose key equals min
// `next` lets a decision see whether rounding could make keys other than the
// minimum cost the same as it (see select-fast.ts).

const NODE: usize = 24;

let nodes: usize = 0;
let leafCount: u32 = 0;

@inline
function node(i: u32): usize {
  return nodes + <usize>i * NODE;
}

/** Leaves the tree holds (0 before the first resize). */
export function tieTreeLeaves(): u32 {
  return leafCount;
}

/** Re-allocates for `leaves` leaves (a power of two), every leaf empty. */
export function tieTreeResize(leaves: u32): void {
  if (nodes != 0) release(nodes, <usize>leafCount * 2 * NODE);
  leafCount = leaves;
  nodes = alloc(<usize>leaves * 2 * NODE);
  for (let i: u32 = 1; i < leaves * 2; i++) setEmpty(node(i));
}

@inline
function setEmpty(p: usize): void {
  store<f64>(p, Infinity, 0);
  store<f64>(p, Infinity, 8);
  store<u32>(p, 0, 16);
}

@inline
function writeLeaf(slot: u32, key: f64, member: bool): void {
  const p = node(leafCount + slot);
  if (member) {
    store<f64>(p, key, 0);
    store<f64>(p, Infinity, 8);
    store<u32>(p, 1, 16);
  } else {
    setEmpty(p);
  }
}

/** Combines node i's children into it; false when node i did not change. */
@inline
function combine(i: u32): bool {
  const a = node(i << 1);
  const b = a + NODE;
  const aMin = load<f64>(a, 0);
  const bMin = load<f64>(b, 0);
  let min: f64;
  let next: f64;
  let count: u32;
  if (aMin < bMin) {
    min = aMin;
    count = load<u32>(a, 16);
    next = Math.min(load<f64>(a, 8), bMin);
  } else if (bMin < aMin) {
    min = bMin;
    count = load<u32>(b, 16);
    next = Math.min(load<f64>(b, 8), aMin);
  } else {
    min = aMin;
    count = load<u32>(a, 16) + load<u32>(b, 16);
    next = Math.min(load<f64>(a, 8), load<f64>(b, 8));
  }
  const p = node(i);
  if (load<f64>(p, 0) == min && load<f64>(p, 8) == next && load<u32>(p, 16) == count) return false;
  store<f64>(p, min, 0);
  store<f64>(p, next, 8);
  store<u32>(p, count, 16);
  return true;
}

/** Sets a leaf without touching its ancestors; call tieTreeRebuild after a batch. */
export function tieTreeFill(slot: u32, key: f64, member: bool): void {
  writeLeaf(slot, key, member);
}

/** Recomputes every inner node from the leaves. */
export function tieTreeRebuild(): void {
  for (let i = leafCount; i > 1; ) combine(--i);
}

/** Sets a leaf and its ancestors, stopping where an ancestor does not change. */
export function tieTreeSet(slot: u32, key: f64, member: bool): void {
  writeLeaf(slot, key, member);
  let i = (leafCount + slot) >> 1;
  while (i >= 1 && combine(i)) i >>= 1;
}

export function tieTreeMin(): f64 {
  return load<f64>(node(1), 0);
}

export function tieTreeNext(): f64 {
  return load<f64>(node(1), 8);
}

/** Member leaves holding the smallest key. */
export function tieTreeCount(): u32 {
  return load<u32>(node(1), 16);
}

@inline
export function tieTreeIsMember(slot: u32): bool {
  return load<u32>(node(leafCount + slot), 16) != 0;
}

@inline
export function tieTreeKey(slot: u32): f64 {
  return load<f64>(node(leafCount + slot), 0);
}

/**
 * The slot of the r-th leaf (0 <= r < tieTreeCount(), in slot order) holding the
 * smallest key: descend towards the child whose count at that key covers r.
 */
export function tieTreeNthAtMin(r: u32): u32 {
  const min = tieTreeMin();
  let i: u32 = 1;
  while (i < leafCount) {
    const left = node(i << 1);
    const covered = load<f64>(left, 0) == min ? load<u32>(left, 16) : 0;
    if (r < covered) {
      i = i << 1;
    } else {
      r -= covered;
      i = (i << 1) | 1;
    }
  }
  return i - leafCount;
}
