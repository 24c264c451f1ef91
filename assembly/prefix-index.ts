// The radix prefix-cache index: which workers hold which KV blocks, and for a
// prompt, how many leading blocks each worker holds. Exports are prefixed
// `index`; the binding is bindings/prefix-index.ts (one core) and
// bindings/prefix-index-sharded.ts (a model's index over several cores).
//
// A worker is a dense u32 slot (bindings/workers.ts maps (id, rank) to it).
// The tree is walked by local hashes (the router's own u64 per block); the
// engines' external hashes are opaque ids, looked up per worker, for parent
// links and removals.
//
// Files: prefix-memory.ts (accounting, slabs), prefix-nodes.ts (tree,
// children, orphans), prefix-members.ts (member sets), prefix-ids.ts
// (per-worker id tables), prefix-bind.ts (ids -> nodes, clear, expiry),
// prefix-table.ts (shared hash tables), prefix-routed.ts (approximate mode),
// prefix-slots.ts (per-slot columns), prefix-evict.ts (stamps, the memory
// bound), prefix-match.ts (findMatches), prefix-verify.ts (consistency check).
//
// ---- Memory ------------------------------------------------------------------
// Everything below is allocated through alloc.ts tryAlloc and owned by the
// core. Allocation can fail (no memory, or a test's coreFailAllocation): each
// step allocates what it needs before it changes anything, so a failure leaves
// the index as it was after the last whole block. When the last node goes,
// every structure is freed (the I/O buffer excepted), so an emptied index
// holds what a fresh one does.
//
// A (worker, block) pair costs, once its block is shared by many workers,
// the worker's 12-byte id entry (about 17 B at the tables' load) and its
// member bit or slot; a block held by one worker adds its 32-byte node.
//
// Node pool: 32-byte records in chunks of 8,192 (256 KiB), listed in a small
// chunk table (per chunk: 32-byte aligned start u32, allocated address u32),
// indexed by node id (chunk = id >> 13); id 0 is the root. Records never
// move; freed ones form a list through `next` and are reused first.
//   +0  local    u64  the block's local hash
//   +8  parent   u32  parent node id (0 = root); a reserved record: its owner's slot
//   +12 first    u32  list regime: first child (0 = none); wide: the child array
//   +16 next     u32  next sibling; under a wide parent, position in its child
//                     array; the next free record while free
//   +20 info     u32  bits 0-23 members; 24 wide, 25 untracked, 26 free,
//                     27-29 children in the list regime, 30 reserved (with
//                     free: kept in a worker's span for its next turns)
//   +24 orphans  u16  members that do not hold the parent (parents that
//                     track orphans; else 0; a parent stops tracking rather
//                     than let a child pass 65,535)
//   +26 stamp    u16  epoch of the last store or lookup through it (prefix-evict.ts)
//   +28 members  u32  the single member's slot, or the member block's address
// Member block (prefix-members.ts, from 64 KiB slabs by size class):
//   header u32 (capacity, top bit: bitmap), then a sorted u32 slot array or
//   a bitmap of u32 words.
// Child array of a wide node: count u32, capacity u32, then child ids u32.
// Root hints (prefix-nodes.ts, static data, 4 KiB): 1,024 u32 node ids by
//   the low 10 bits of a block's local hash, for findMatches' first lookup;
//   taken only when the record is live, a child of the root and of that
//   block, so no update of the tree writes them.
//
// Worker id tables (prefix-ids.ts): one per slot, header in the slot column;
//   12-byte entries: id u64, word u32 (node | EXTRA_REFS | ROUTED). Robin
//   Hood open addressing at 0.65 to 0.8 load; freed with the last id.
//
// Shared tables (prefix-table.ts; 16-byte entries key u64, a u32, b u32;
// headers in static data):
//   children table  key mix(parent, local) -> a: child, for wide nodes; hits
//                   are checked against the child's parent and local hash, so
//                   a key collision can never return a wrong node.
//   orphan registry key parent << 32 | slot -> a: a child of `parent` the
//                   worker holds without holding `parent` (tracked parents).
//   refs table      key id -> a: slot, b: references beyond the first.
//   extras table    key node << 32 | slot -> a: the worker's ids for the node
//                   beyond the first.
// Slot columns (prefix-slots.ts), grown by stored/routed events only: 16 B
//   id-table header (+12: orphan total), 16 B meta (evictions, oldest stamp,
//   extras), marks, active list, and the two findMatches outputs, 4 B each.
// Approximate mode (prefix-routed.ts): 32-byte routed records (expiry f64,
//   id u64, slot u32, depth u32, node u32) and a 32-byte-entry min-heap
//   (expiry f64, id u64, slot u32, depth u32, record u32); the heap is
//   compacted when stale entries outnumber live ones.
// Dump buffer and eviction log: from alloc.ts, outside the index's bound.

// ---- Calls ---------------------------------------------------------------------
// Inputs go through the I/O buffer (indexInput reserves it; it only grows):
//   indexStored(slot, hasParent, n)   buffer: parent, ext[0..n), local[0..n)
//   indexRemoved(slot, n)             buffer: ext[0..n)
//   indexInsertRouted(slot, n, nowMs) buffer: local[0..n)
// indexStored returns STORED, UNKNOWN_PARENT (skipped, counted) or
// NO_MEMORY: the blocks before the one that could not be stored are in, the
// rest are not, and the index is consistent; the caller clears the worker.
// indexInsertRouted returns STORED or NO_MEMORY likewise. indexInput returns
// 0 when it cannot reserve the buffer.
// indexFind(ptr, n, earlyExit) reads n local hashes at any address (the block
// hasher's output, or the I/O buffer) and writes its answer, compact (runs of
// workers read from the nodes, and pairs; prefix-match.ts), described by the
// record at indexAnswer(); indexExpand() adds the runs' workers as (slot,
// depth) pairs to the columns at indexOutSlots()/indexOutDepths(). Neither
// allocates, so the answer stays valid until the next stored/routed event or
// indexInput.
// Slots past any stored one (0xffffffff included) are treated as empty
// workers by removals and clears. Calls that may grow memory: indexInput,
// indexStored, indexInsertRouted, indexDumpNodes, indexDumpSlot,
// indexEvictionLog.
//
// Dump (cold path): indexDumpNodes() writes every live node as 16 bytes
// (id u32, parent u32, local u64) to the dump buffer and returns the count;
// indexDumpSlot(slot) writes a worker's ids as 16 bytes (ext u64, node u32,
// refs u32) and returns the count; indexDumpBuffer() is the buffer's address,
// valid until the next dump call; indexDumpRelease() frees it.

import { alloc, release, tryAlloc } from './alloc';
import { EXTRA_REFS, ID_EMPTY, ROUTED, idsCapacity, idsEntry, idsReserve, idsSize, idsTouch } from './prefix-ids';
import { abandonMemory, heldBytes, releaseSlabs, usedBytes } from './prefix-memory';
import {
  LOCAL,
  NONE,
  PARENT,
  ROOT,
  childAdd,
  childFind,
  childReserve,
  forgetTree,
  membershipCount,
  nodeAt,
  nodeCount,
  nodeIsLive,
  nodeTop,
  poolArena,
  poolReserve,
  releasePending,
  releaseTree,
  startTree,
  treeStarted,
} from './prefix-nodes';
import { bindRouted, bindStored, boundNode, chainMix, clearSlot, expireUntil, pruneTo, refsFind, refsTable, extrasTable, settleIds, unbind, wordNode } from './prefix-bind';
import { tableRelease } from './prefix-table';
import { dropStaleTop, forgetRouted, heapEmpty, heapPop, releaseRouted, routedCount, routedReserve, topDepth, topExpiry, topExt, topSlot } from './prefix-routed';
import { META_EVICTED, ensureSlot, forgetSlots, globalSlot, outDepthsPtr, outSlotsPtr, releaseSlots, setSlotMapping, slotCapacity, slotIds, slotMeta } from './prefix-slots';
import {
  clearEvictionLog,
  evictedCount,
  evictionLogCount,
  evictionLogPtr,
  makeRoom,
  resetEviction,
  setBound,
  setEvictionLog,
  startOldest,
  stampNode,
  tickBlocks,
  touchUp,
} from './prefix-evict';
import { findMatches, matchAnswerPtr, matchExpand } from './prefix-match';
import { verifyIndex } from './prefix-verify';

export const STORED: u32 = 1;
const UNKNOWN_PARENT: u32 = 0;
const NO_MEMORY: u32 = 2;

/** Bytes an event may add per block, for the memory bound: node, id entry, member and table share. */
const BYTES_PER_BLOCK: usize = 64;

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

// The routed block indexRoutedTop found: expiry f64, id u64, slot u32, depth u32.
const routedTop: usize = memory.data(24, 8);

/** Reserves the I/O buffer for `capacity` u64 values and returns its address; 0 when there is no memory. */
export function indexInput(capacity: u32): usize {
  if (capacity > inputCapacity) {
    let next = inputCapacity < 16 ? <u32>16 : inputCapacity;
    while (next < capacity) next <<= 1;
    const grown = tryAlloc(<usize>next << 3);
    if (grown == 0) return 0;
    if (input != 0) {
      memory.copy(grown, input, <usize>inputCapacity << 3);
      release(input, <usize>inputCapacity << 3);
    }
    input = grown;
    inputCapacity = next;
  }
  return input;
}

export function indexConfigure(ttl: f64, maxRoutedBlocks: u32, target: u32): void {
  ttlMs = ttl;
  maxRouted = maxRoutedBlocks;
  pruneTarget = target;
}

/** This core holds the model's slots s with s mod stride == offset (as s / stride). */
export function indexConfigureShard(stride: u32, offset: u32): void {
  setSlotMapping(stride, offset);
}

/** The most bytes the index may hold before it evicts (0: no bound). */
export function indexSetMemoryBound(bytes: f64): void {
  setBound(bytes <= 0 ? 0 : <usize>min(bytes, 4294967295.0));
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
    releasePending();
    releaseSlabs();
    tableRelease(refsTable);
    tableRelease(extrasTable);
    resetEviction();
  }
}

// Reads the home entries of the event's ids in the worker's table before the
// event is applied block by block: independent reads the processor overlaps,
// where the per-block work would wait for each cache miss in turn.
function warmIds(slot: u32, from: u32, count: u32): void {
  const ids = slotIds(slot);
  let touched: u64 = 0;
  for (let i: u32 = 0; i < count; i++) touched ^= idsTouch(ids, inputAt(from + i));
  sink = touched;
}

// What every stored or routed event needs before its first block: the tree
// and the slot's columns.
function prepare(slot: u32): bool {
  if (!startTree() || !ensureSlot(slot)) return false;
  if (idsSize(slotIds(slot)) == 0) startOldest(slot);
  return true;
}

// The node for the block under cur, made if absent; 0 when there is no memory
// for it. A new node has no members, so joining it cannot fail: room for the
// worker's id is made here too, and binding the block to it cannot fail either.
function nodeFor(cur: u32, local: u64, slot: u32): u32 {
  const n = childFind(cur, local);
  if (n != 0) return n;
  if (!poolReserve(1) || !childReserve(cur) || !idsReserve(slotIds(slot), 1)) return 0;
  return childAdd(cur, local);
}

/** A stored event; see the return codes above. */
export function indexStored(slot: u32, hasParent: u32, count: u32): u32 {
  let cur = ROOT;
  if (hasParent) {
    cur = boundNode(slot, inputAt(0));
    if (cur == NONE) {
      unknownParents++;
      return UNKNOWN_PARENT;
    }
  }
  if (count == 0) return STORED;
  if (cur != ROOT) touchUp(cur);
  makeRoom(<usize>count * BYTES_PER_BLOCK);
  if (hasParent) {
    // Eviction forgets the coldest blocks; only with nothing else left can that be this one.
    cur = boundNode(slot, inputAt(0));
    if (cur == NONE) {
      unknownParents++;
      return UNKNOWN_PARENT;
    }
  }
  if (!prepare(slot)) return NO_MEMORY;
  // A chain continued: its records from the worker's span, after its last turn's.
  poolArena(hasParent ? slot : NONE);
  warmIds(slot, 1, count);
  let parentHeld: i32 = hasParent ? 1 : -1;
  for (let i: u32 = 0; i < count; i++) {
    const n = nodeFor(cur, inputAt(1 + count + i), slot);
    if (n == 0) return NO_MEMORY;
    stampNode(n);
    if (!bindStored(slot, inputAt(1 + i), n, parentHeld)) return NO_MEMORY;
    cur = n;
    parentHeld = 1;
  }
  tickBlocks(count);
  return STORED;
}

export function indexRemoved(slot: u32, count: u32): void {
  if (slot < slotCapacity()) warmIds(slot, 0, count);
  for (let i: u32 = 0; i < count; i++) {
    if (!unbind(slot, inputAt(i))) unknownRemovals++;
  }
  settleIds(slot);
  settle();
}

export function indexCleared(slot: u32): void {
  clearSlot(slot);
  settle();
}

// Updates that could not complete inside another kernel's call (the fused
// decision recording a routed prompt): their worker is cleared, as the binding
// does for its own calls, and they are counted here for it to report.
let failedUpdates: u32 = 0;

export function indexFailedUpdate(slot: u32): void {
  indexCleared(slot);
  failedUpdates++;
}

export function indexFailedUpdates(): u32 {
  return failedUpdates;
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

/** Where the last indexFind's answer is (prefix-match.ts): workers, runs, pairs, and the addresses of the runs, slots and depths. */
export function indexAnswer(): usize {
  return matchAnswerPtr();
}

/** Adds the last answer's runs as pairs (once); returns the pairs, one per worker. */
export function indexExpand(): u32 {
  return matchExpand();
}

/** Approximate mode: worker `slot` was sent these blocks at nowMs. Returns STORED or NO_MEMORY. */
export function indexInsertRouted(slot: u32, count: u32, nowMs: f64): u32 {
  if (count == 0) return STORED;
  makeRoom(<usize>count * BYTES_PER_BLOCK);
  if (!prepare(slot) || !routedReserve(count)) return NO_MEMORY;
  poolArena(NONE);
  const expiry = nowMs + ttlMs;
  let cur = ROOT;
  let seq: u64 = 0;
  let parentHeld: i32 = -1;
  for (let i: u32 = 0; i < count; i++) {
    const local = inputAt(i);
    seq = i == 0 ? local : chainMix(seq, local);
    const n = nodeFor(cur, local, slot);
    if (n == 0) return NO_MEMORY;
    stampNode(n);
    if (!bindRouted(slot, seq, n, i + 1, expiry, parentHeld)) return NO_MEMORY;
    cur = n;
    parentHeld = 1;
  }
  tickBlocks(count);
  if (routedCount() > maxRouted) pruneTo(pruneTarget);
  settle();
  return STORED;
}

export function indexExpire(nowMs: f64): u32 {
  const removed = expireUntil(nowMs);
  settle();
  return removed;
}

/**
 * The routed block the next prune would drop first: 1 with its expiry f64,
 * id u64, slot u32 (the model's) and depth u32 at indexRoutedTopPtr(), or 0
 * when there is none. For a sharded index's model-wide prune.
 */
export function indexRoutedTop(): u32 {
  dropStaleTop();
  if (heapEmpty()) return 0;
  store<f64>(routedTop, topExpiry());
  store<u64>(routedTop, topExt(), 8);
  store<u32>(routedTop, globalSlot(topSlot()), 16);
  store<u32>(routedTop, topDepth(), 20);
  return 1;
}

export function indexRoutedTopPtr(): usize {
  return routedTop;
}

/** Drops the routed block indexRoutedTop found. */
export function indexRoutedPop(): void {
  dropStaleTop();
  if (heapEmpty()) return;
  const slot = topSlot();
  const ext = topExt();
  heapPop();
  unbind(slot, ext);
  settle();
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

/** Ids forgotten under the memory bound, in all. */
export function indexEvictedBlocks(): f64 {
  return <f64>evictedCount();
}

/** Ids of the worker forgotten under the memory bound since it was last cleared. */
export function indexSlotEvicted(slot: u32): u32 {
  return slot < slotCapacity() ? load<u32>(slotMeta(slot), META_EVICTED) : 0;
}

/** Bytes the index holds (its pools' free records included). */
export function indexHeldBytes(): usize {
  return heldBytes();
}

/** Bytes the index holds less its pools' free records: what the memory bound is compared with. */
export function indexUsedBytes(): usize {
  return usedBytes();
}

/** Starts logging evicted ids (16 bytes each: id u64, slot u32, pad) for `capacity` of them; 0 stops. */
export function indexEvictionLog(capacity: u32): void {
  setEvictionLog(capacity);
}

export function indexEvictionLogPtr(): usize {
  return evictionLogPtr();
}

/** Entries in the eviction log, or -1 once it overflowed. */
export function indexEvictionLogCount(): i32 {
  return evictionLogCount();
}

export function indexEvictionLogClear(): void {
  clearEvictionLog();
}

/**
 * Abandons every index structure without freeing it, leaving an empty index:
 * for a host that caught a trap in the middle of an update, after which the
 * structures cannot be trusted. The abandoned memory stays counted in liveBytes.
 */
export function indexReset(): void {
  releasePending();
  forgetTree();
  forgetSlots();
  forgetRouted();
  abandonMemory();
  memory.fill(refsTable, 0, 16);
  memory.fill(extrasTable, 0, 16);
  resetEviction();
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
  const h = slotIds(slot);
  const out = dumpReserve(<usize>max<u32>(idsSize(h), 1) << 4);
  let written: u32 = 0;
  const capacity = idsCapacity(h);
  for (let i: u32 = 0; i < capacity; i++) {
    const e = idsEntry(h, i);
    const word = load<u32>(e, 8);
    if (word == ID_EMPTY) continue;
    const id = load<u64>(e);
    const o = out + (<usize>(written++) << 4);
    store<u64>(o, id);
    store<u32>(o, wordNode(word), 8);
    store<u32>(o, word & ROUTED ? 1 : refsOf(slot, id, word), 12);
  }
  return written;
}

function refsOf(slot: u32, id: u64, word: u32): u32 {
  return word & EXTRA_REFS ? 1 + load<u32>(refsFind(slot, id), 12) : 1;
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
 * Recomputes every derived count (orphans, totals, table contents) and
 * returns 0 when all match, else the broken rule's number
 * (prefix-verify.ts). For tests; O(nodes x workers).
 */
export function indexVerify(): u32 {
  return verifyIndex();
}

