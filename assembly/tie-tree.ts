import { alloc, release } from './alloc';

// Tournament (segment) trees over positions that answer, in O(1) at the root,
// "what is the smallest key among member leaves, how many leaves hold it, and
// what is the next larger key", draw the r-th leaf holding the smallest key
// and count those before a position in O(log n). The ledger keeps the
// request-independent part of every candidate worker's cost in them (one tree
// per view and taint group, ledger/views.ts), so a decision finds the
// cheapest untouched workers without visiting every row.
//
// A tree is an 8-byte header (+0 nodes ptr u32, +4 leaves u32, a power of two)
// and an implicit binary heap of 2 x leaves nodes: node 1 is the root, node i
// has children 2i and 2i + 1, the leaf of position p is node leaves + p. A
// node is 24 bytes:
//   +0  min    f64  smallest key among member leaves below (+Infinity: none)
//   +8  next   f64  smallest key below that is larger than min (+Infinity: none)
//   +16 count  u32  member leaves below whose key equals min
// `next` lets a decision see whether rounding could make keys other than the
// minimum cost the same as it, and where untouched workers start once every
// worker at the minimum is accounted for (see select-fast.ts).

const NODE: usize = 24;
const HEADER: usize = 8;

@inline
function nodesOf(tree: usize): usize {
  return <usize>load<u32>(tree);
}

@inline
export function treeLeaves(tree: usize): u32 {
  return load<u32>(tree, 4);
}

@inline
function node(tree: usize, i: u32): usize {
  return nodesOf(tree) + <usize>i * NODE;
}

/** A tree of `leaves` leaves (a power of two), every leaf empty. */
export function treeCreate(leaves: u32): usize {
  const tree = alloc(HEADER);
  store<u32>(tree, 0);
  store<u32>(tree, 0, 4);
  treeResize(tree, leaves);
  return tree;
}

export function treeDestroy(tree: usize): void {
  release(nodesOf(tree), <usize>treeLeaves(tree) * 2 * NODE);
  release(tree, HEADER);
}

/** Re-allocates for `leaves` leaves (a power of two), every leaf empty. */
export function treeResize(tree: usize, leaves: u32): void {
  if (nodesOf(tree) != 0) release(nodesOf(tree), <usize>treeLeaves(tree) * 2 * NODE);
  store<u32>(tree, <u32>alloc(<usize>leaves * 2 * NODE));
  store<u32>(tree, leaves, 4);
  for (let i: u32 = 1; i < leaves * 2; i++) setEmpty(node(tree, i));
}

@inline
function setEmpty(p: usize): void {
  store<f64>(p, Infinity, 0);
  store<f64>(p, Infinity, 8);
  store<u32>(p, 0, 16);
}

@inline
function writeLeaf(tree: usize, pos: u32, key: f64, member: bool): void {
  const p = node(tree, treeLeaves(tree) + pos);
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
function combine(tree: usize, i: u32): bool {
  const a = node(tree, i << 1);
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
  const p = node(tree, i);
  if (load<f64>(p, 0) == min && load<f64>(p, 8) == next && load<u32>(p, 16) == count) return false;
  store<f64>(p, min, 0);
  store<f64>(p, next, 8);
  store<u32>(p, count, 16);
  return true;
}

/** Sets a leaf without touching its ancestors; call treeRebuild after a batch. */
@inline
export function treeFill(tree: usize, pos: u32, key: f64, member: bool): void {
  writeLeaf(tree, pos, key, member);
}

/** Recomputes every inner node from the leaves. */
export function treeRebuild(tree: usize): void {
  for (let i = treeLeaves(tree); i > 1; ) combine(tree, --i);
}

/** Sets a leaf and its ancestors, stopping where an ancestor does not change. */
export function treeSet(tree: usize, pos: u32, key: f64, member: bool): void {
  writeLeaf(tree, pos, key, member);
  let i = (treeLeaves(tree) + pos) >> 1;
  while (i >= 1 && combine(tree, i)) i >>= 1;
}

@inline
export function treeMin(tree: usize): f64 {
  return load<f64>(node(tree, 1), 0);
}

@inline
export function treeNext(tree: usize): f64 {
  return load<f64>(node(tree, 1), 8);
}

/** Member leaves holding the smallest key. */
@inline
export function treeCount(tree: usize): u32 {
  return load<u32>(node(tree, 1), 16);
}

@inline
export function treeIsMember(tree: usize, pos: u32): bool {
  return load<u32>(node(tree, treeLeaves(tree) + pos), 16) != 0;
}

/**
 * The position of the r-th leaf (0 <= r < treeCount, in position order)
 * holding the smallest key: descend towards the child whose count at that key
 * covers r.
 */
export function treeNthAtMin(tree: usize, r: u32): u32 {
  const min = treeMin(tree);
  const leaves = treeLeaves(tree);
  let i: u32 = 1;
  while (i < leaves) {
    const left = node(tree, i << 1);
    const covered = load<f64>(left, 0) == min ? load<u32>(left, 16) : 0;
    if (r < covered) {
      i = i << 1;
    } else {
      r -= covered;
      i = (i << 1) | 1;
    }
  }
  return i - leaves;
}

/** How many leaves at positions below `pos` hold the smallest key. */
export function treeCountBefore(tree: usize, pos: u32): u32 {
  const leaves = treeLeaves(tree);
  const min = treeMin(tree);
  if (pos >= leaves) return treeCount(tree);
  // Walk up from the leaf: every left sibling of the path lies wholly before pos.
  let counted: u32 = 0;
  let i = leaves + pos;
  while (i > 1) {
    if (i & 1) {
      const left = node(tree, i - 1);
      if (load<f64>(left, 0) == min) counted += load<u32>(left, 16);
    }
    i >>= 1;
  }
  return counted;
}
