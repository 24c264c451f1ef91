// The radix prefix-cache index: which workers hold which KV blocks, and for a
// prompt, how many leading blocks each worker holds. Exports are prefixed
// `index`; the binding is bindings/prefix-index.ts.
//
// A worker is a dense u32 slot (bindings/workers.ts maps (id, rank) to it).
// The tree is walked by local hashes (the router's own u64 per block); the
// engines' external hashes are opaque ids, looked up per worker, for parent
// links and removals.
//
// Files: prefix-table.ts (hash table), prefix-nodes.ts (tree, members,
// orphans/kids), prefix-bind.ts (external ids, clear, expiry), prefix-routed.ts
// (approximate mode records and heap), prefix-slots.ts (per-slot columns),
// prefix-match.ts (findMatches).
//
// ---- Memory ------------------------------------------------------------------
// Everything below is allocated through alloc.ts and owned by the core. When
// the last node goes, every structure is freed (the I/O buffer excepted), so
// an emptied index holds what a fresh one does.
//
// Node pool: 64-byte records in chunks of 8,192 (512 KiB, cache-line
// aligned) listed in a small chunk table (per chunk: aligned start u32,
// allocated address u32), indexed by node id (chunk = id >> 13); id 0 is the root.
// Records never move; freed ones form a list through `next` and are reused
// first (most recently freed, so still in cache). A chunk is added only
// while a stored/routed event creates a node.
//   +0  local    u64  the block's local hash
//   +8  parent   u32  parent node id (0 = root)
//   +12 depth    u32  blocks from the root (1 under the root)
//   +16 count    u32  members: workers holding the block
//   +20 orphans  u32  members that do not hold the parent (0 under the root)
//   +24 first    u32  first child, 0 = none
//   +28 next     u32  next sibling (next free record while free)
//   +32 prev     u32  previous sibling
//   +36 nchild   u32  children
//   +40 flags    u32  1 children in the children table, 2 members in the member map, 4 free
//   +44 wcap     u32  member capacity; 1 = the single member inline at +48
//   +48 members  12 B the inline member, or u32 pointer to the member array
// Member array (wcap x 12 B, heap-allocated when wcap > 1; halves when a
// quarter full, back inline at one member): wcap u32 slots, contiguous so a
// node's workers copy out in one go, then wcap (exts u32, kids u32) pairs:
//   exts  how many of the worker's external ids point at this node
//   kids  children of this node the worker also holds
//
// Hash tables (prefix-table.ts; 16-byte entries key u64, a u32, b u32; the
// three global headers live in static data):
//   children table  key mix(parent, local) -> a: child id. Only nodes with more
//                   than 4 children are indexed (back to the sibling list at 2);
//                   hits are verified against the child's parent and local
//                   hash, so a key collision can never return a wrong node.
//   member map      key node << 32 | slot -> a: position in the member array.
//                   Only nodes with more than 8 members (back to scanning at 4).
//   orphan registry key parent << 32 | slot -> a: a child of `parent` the
//                   worker holds without holding `parent`; one entry per
//                   orphan membership (usually none).
//   worker tables   one per slot: key external id -> a: node, b: refcount, or
//                   0x80000000 | routed record for a routed block. Freed when
//                   the worker's last id goes.
// Slot columns (prefix-slots.ts), grown by stored/routed events only:
//   16 B worker-table header (+12: the worker's orphan total), marks, active
//   list, and the two findMatches outputs, 4 B each per slot.
// Approximate mode (prefix-routed.ts): 32-byte routed records
//   (+0 expiry f64, +8 external id u64, +16 slot u32, +20 depth u32) and a
//   32-byte-entry min-heap (+0 expiry f64, +8 id u64, +16 slot u32,
//   +20 depth u32, +24 record u32), both grown by routed inserts; the heap
//   is compacted when stale entries outnumber live ones.
// Dump buffer: allocated by the dump calls, freed by indexDumpRelease.

// ---- Calls ---------------------------------------------------------------------
// Inputs go through the I/O buffer (indexInput reserves it; it only grows):
//   indexStored(slot, hasParent, n)   buffer: parent, ext[0..n), local[0..n)
//   indexRemoved(slot, n)             buffer: ext[0..n)
//   indexInsertRouted(slot, n, nowMs) buffer: local[0..n)
// indexFind(ptr, n, earlyExit) reads n local hashes at any address (the block
// hasher's output, or the I/O buffer) and writes (slot, depth) pairs to the
// columns at indexOutSlots()/indexOutDepths(); it never allocates, so those
// stay valid until the next stored/routed event or indexInput.
// Slots past any stored one (0xffffffff included) are treated as empty
// workers by removals and clears. Calls that may grow memory: indexInput,
// indexStored, indexInsertRouted, indexDumpNodes, indexDumpSlot.
//
// Dump (cold path): indexDumpNodes() writes every live node as 16 bytes
// (id u32, parent u32, local u64) to the dump buffer and returns the count;
// indexDumpSlot(slot) writes a worker's ids as 16 bytes (ext u64, node u32,
// refs u32) and returns the count; indexDumpBuffer() is the buffer's address,
// valid until the next dump call; indexDumpRelease() frees it.

import { alloc, release, resize } from './alloc';
import { grownCapacity } from './grow';
import { TABLE_EMPTY, tableCapacity, tableEntry, tableSize, tableTouch } from './prefix-table';
import { LOCAL, NONE, PARENT, ROOT, childEnsure, membershipCount, nodeAt, nodeCount, nodeIsLive, nodeTop, releaseTree, startTree, treeStarted } from './prefix-nodes';
import { ROUTED, bindRouted, bindStored, boundNode, chainMix, clearSlot, expireUntil, pruneTo, unbind } from './prefix-bind';
import { releaseRouted, routedCount } from './prefix-routed';
import { ensureSlot, outDepthsPtr, outSlotsPtr, releaseSlots, slotCapacity, slotTable } from './prefix-slots';
import { findMatches } from './prefix-match';
import { verifyIndex } from './prefix-verify';

let input: usize = 0;
let inputCapacity: u32 = 0; // u64 values

let ttlMs: f64 = 120_000;
let maxRouted: u32 = 1 << 20;
let pruneTarget: u32 = <u32>((1 << 20) * 0.8);

// Where the warm-up reads of a worker's id table go, so they are not optimized away.
let sink: u64 = 0;

let unknownParents: u32 = 0;
let unknownRemovals: u32 = 0;

let dump: usize = 0;
let dumpBytes: usize = 0;

/** Reserves the I/O buffer for `capacity` u64 values and returns its address. */
export function indexInput(capacity: u32): usize {
  if (capacity > inputCapacity) {
    const next = grownCapacity(inputCapacity, capacity);
    input = input == 0 ? alloc(<usize>next << 3) : resize(input, <usize>inputCapacity << 3, <usize>next << 3);
    inputCapacity = next;
  }
  return input;
}

export function indexConfigure(ttl: f64, maxRoutedBlocks: u32, target: u32): void {
  ttlMs = ttl;
  maxRouted = maxRoutedBlocks;
  pruneTarget = target;
}

@inline
function inputAt(i: u32): u64 {
  return load<u64>(input + (<usize>i << 3));
}

// Once the last node is gone nothing else can be left but empty shells and
// stale heap entries: free it all, so an emptied index holds what a fresh one does.
function settle(): void {
  if (treeStarted() && nodeCount() == 0) {
    releaseTree();
    releaseSlots();
    releaseRouted();
  }
}

// Reads the home slots of the event's ids in the worker's table before the
// event is applied block by block: independent reads the processor overlaps,
// where the per-block work would wait for each cache miss in turn.
function warmIds(slot: u32, from: u32, count: u32): void {
  const ids = slotTable(slot);
  let touched: u64 = 0;
  for (let i: u32 = 0; i < count; i++) touched ^= tableTouch(ids, inputAt(from + i));
  sink = touched;
}

/** A stored event; returns 0 (and counts it) when the parent id is unknown to the worker. */
export function indexStored(slot: u32, hasParent: u32, count: u32): u32 {
  let cur = ROOT;
  if (hasParent) {
    cur = boundNode(slot, inputAt(0));
    if (cur == NONE) {
      unknownParents++;
      return 0;
    }
  }
  if (count == 0) return 1;
  startTree();
  ensureSlot(slot);
  warmIds(slot, 1, count);
  let pos = NONE;
  for (let i: u32 = 0; i < count; i++) {
    const n = childEnsure(cur, inputAt(1 + count + i));
    pos = bindStored(slot, inputAt(1 + i), n, pos);
    cur = n;
  }
  return 1;
}

export function indexRemoved(slot: u32, count: u32): void {
  if (slot < slotCapacity()) warmIds(slot, 0, count);
  for (let i: u32 = 0; i < count; i++) {
    if (!unbind(slot, inputAt(i))) unknownRemovals++;
  }
  settle();
}

export function indexCleared(slot: u32): void {
  clearSlot(slot);
  settle();
}

export function indexFind(ptr: usize, count: u32, earlyExit: u32): u32 {
  return findMatches(ptr, count, earlyExit != 0);
}

export function indexOutSlots(): usize {
  return outSlotsPtr();
}

export function indexOutDepths(): usize {
  return outDepthsPtr();
}

/** Approximate mode: worker `slot` was sent these blocks at nowMs. */
export function indexInsertRouted(slot: u32, count: u32, nowMs: f64): void {
  if (count == 0) return;
  startTree();
  ensureSlot(slot);
  const expiry = nowMs + ttlMs;
  let cur = ROOT;
  let pos = NONE;
  let seq: u64 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const local = inputAt(i);
    seq = i == 0 ? local : chainMix(seq, local);
    const n = childEnsure(cur, local);
    pos = bindRouted(slot, seq, n, expiry, pos);
    cur = n;
  }
  if (routedCount() > maxRouted) pruneTo(pruneTarget);
  settle();
}

export function indexExpire(nowMs: f64): u32 {
  const removed = expireUntil(nowMs);
  settle();
  return removed;
}

export function indexNodes(): u32 {
  return nodeCount();
}

/** (worker, node) memberships. */
export function indexBlocks(): u32 {
  return membershipCount();
}

export function indexRoutedBlocks(): u32 {
  return routedCount();
}

export function indexUnknownParents(): u32 {
  return unknownParents;
}

export function indexUnknownRemovals(): u32 {
  return unknownRemovals;
}

// ---- dump ----------------------------------------------------------------------

function dumpReserve(bytes: usize): usize {
  if (bytes > dumpBytes) {
    if (dump != 0) release(dump, dumpBytes);
    dump = alloc(bytes);
    dumpBytes = bytes;
  }
  return dump;
}

export function indexDumpNodes(): u32 {
  const out = dumpReserve(<usize>max<u32>(nodeCount(), 1) << 4);
  let written: u32 = 0;
  const top = nodeTop();
  for (let n: u32 = 1; n < top; n++) {
    if (!nodeIsLive(n)) continue;
    const p = nodeAt(n);
    const o = out + (<usize>(written++) << 4);
    store<u32>(o, n);
    store<u32>(o, load<u32>(p, PARENT), 4);
    store<u64>(o, load<u64>(p, LOCAL), 8);
  }
  return written;
}

export function indexDumpSlot(slot: u32): u32 {
  if (slot >= slotCapacity()) return 0;
  const h = slotTable(slot);
  const out = dumpReserve(<usize>max<u32>(tableSize(h), 1) << 4);
  let written: u32 = 0;
  const capacity = tableCapacity(h);
  for (let i: u32 = 0; i < capacity; i++) {
    const e = tableEntry(h, i);
    const n = load<u32>(e, 8);
    if (n == TABLE_EMPTY) continue;
    const info = load<u32>(e, 12);
    const o = out + (<usize>(written++) << 4);
    store<u64>(o, load<u64>(e));
    store<u32>(o, n, 8);
    store<u32>(o, info & ROUTED ? 1 : info, 12);
  }
  return written;
}

export function indexDumpBuffer(): usize {
  return dump;
}

export function indexDumpRelease(): void {
  if (dump != 0) release(dump, dumpBytes);
  dump = 0;
  dumpBytes = 0;
}

/**
 * Recomputes every derived count (orphans, kids, orphan totals, table
 * contents) and returns 0 when all match, else the broken rule's number
 * (prefix-verify.ts). For tests; O(nodes x workers).
 */
export function indexVerify(): u32 {
  return verifyIndex();
}
