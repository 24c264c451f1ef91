import { give, pooledChange, take } from './prefix-memory';
import { COUNT_MASK, INFO, MEMBERS, NO_SLOT, memberAdd, memberCount, memberHas, memberNext, memberRemove } from './prefix-members';
import { TABLE_HEADER_BYTES, tableDelete, tableFind, tableFindNext, tableInsert, tableRelease, tableReserve } from './prefix-table';
import { META_SPAN, addSlotOrphans, slotCapacity, slotMeta, slotOrphans } from './prefix-slots';

// The radix tree of the prefix index: pooled node records, their children
// and their members (the workers holding each block), with the count
// findMatches relies on kept exact:
//   orphans(c)   members of c that do not hold c's parent
// for the children of nodes that track it (list-regime nodes, see below).
// A node is freed once it has neither members nor children, and its freed
// ancestors with it. Layouts are drawn in prefix-index.ts.
//
// Children, by regime:
// - list: at most CHILD_LIST_MAX children in a singly linked sibling list
//   (first, next). A chain node has one child, so the walk is the one record
//   read a lookup needs anyway.
// - wide: more children (back to the list at CHILD_LIST_BACK): the node's
//   `first` points at a child array (u32 count, u32 capacity, then the child
//   ids; a child's `next` is its position there) and the shared children
//   table maps (parent, block) to the child.
// A wide node does not track its children's orphans: leaving it would mean
// finding which of possibly thousands of children the worker holds. Under an
// untracked node findMatches intersects its sets explicitly, as it does
// where members drop out anyway. A node back in the list regime tracks its
// children again once it has room to record their orphans; one that cannot
// (no memory for the registry) stays untracked, which is always valid.
//
// Orphan memberships under tracked parents are registered (key parent << 32
// | slot -> a: the child) so that a worker joining the parent finds the
// children that stop being orphans directly; each worker's orphan total
// (prefix-slots.ts) says when there is nothing to look up.

export const ROOT: u32 = 0;
export const NONE: u32 = 0xffffffff;

export const LOCAL: usize = 0;
export const PARENT: usize = 8;
export const FIRST: usize = 12;
export const NEXT: usize = 16;
export const ORPHANS: usize = 24; // u16
export const STAMP: usize = 26; // u16
/** Orphans a node can count; one more and its parent stops tracking them. */
const ORPHANS_MAX: u32 = 0xffff;
export { INFO, MEMBERS };

// Flags in the top byte of the info word (the member count has the low 24 bits).
const WIDE: u32 = 1 << 24;
export const UNTRACKED: u32 = 1 << 25;
const FREE: u32 = 1 << 26;
const LIST_SHIFT: u32 = 27; // bits 27-29: children in the list regime
const LIST_BITS: u32 = 7 << LIST_SHIFT;

export const CHILD_LIST_MAX: u32 = 4;
export const CHILD_LIST_BACK: u32 = 2;

// Headers of the shared tables (children of wide nodes, orphan memberships),
// in static data so an empty index holds no heap memory for them.
export const childTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);
export const orphanTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);

// The pool is a list of fixed chunks, so records never move: growing adds a
// chunk and copies nothing, and a record's address stays valid while it lives.
// Records come from the storing worker's span for a chained event (see
// arenas below), else from the free list first, else from the top, so the
// blocks of a stored event on a fresh pool are consecutive records, and so
// are a worker's successive turns (the walks of findMatches look there first;
// any other placement is only slower).
// A chunk holds 8,192 records of 32 bytes.
const NODE_SHIFT: usize = 5;
const CHUNK_BITS: u32 = 13;
const CHUNK_NODES: u32 = 1 << CHUNK_BITS;
const CHUNK_MASK: u32 = CHUNK_NODES - 1;
const CHUNK_BYTES: usize = (<usize>CHUNK_NODES) << NODE_SHIFT;
/** Bytes a node costs in the pool. */
const NODE_BYTES: usize = 32;
/** Node ids fit the 30 bits an external-id entry has for them. */
const NODE_LIMIT: u32 = 0x3fffff00;

// Chunk table: per chunk, the 32-byte aligned address records start at and
// the address the heap returned, to free it.
let chunks: usize = 0;
let chunkSlots: u32 = 0;
let chunkCount: u32 = 0;
let poolTop: u32 = 0; // records ever handed out, root included
let freeHead: u32 = 0; // 0: none (the root is never free)
let freeCount: u32 = 0;
let liveNodes: u32 = 0; // root excluded
let memberships: u32 = 0;

@inline
export function nodeAt(n: u32): usize {
  return <usize>load<u32>(chunks + (<usize>(n >> CHUNK_BITS) << 3)) + (<usize>(n & CHUNK_MASK) << NODE_SHIFT);
}

/** The address of a node's u16 stamp (prefix-evict.ts). */
@inline
export function stampAt(n: u32): usize {
  return nodeAt(n) + STAMP;
}

export function nodeCount(): u32 {
  return liveNodes;
}

export function membershipCount(): u32 {
  return memberships;
}

export function treeStarted(): bool {
  return chunks != 0;
}

/** One past the highest record index, for walks over every record. */
export function nodeTop(): u32 {
  return poolTop;
}

export function nodeIsLive(n: u32): bool {
  return n != ROOT && n < poolTop && (load<u32>(nodeAt(n), INFO) & FREE) == 0;
}

@inline
export function isTracked(n: u32): bool {
  return n == ROOT || (load<u32>(nodeAt(n), INFO) & UNTRACKED) == 0;
}

/** Starts the tree (chunk table, first chunk, root); false when there is no memory. */
export function startTree(): bool {
  if (chunks != 0) return true;
  const table = take(16 << 3);
  if (table == 0) return false;
  chunks = table;
  chunkSlots = 16;
  if (!addChunk()) {
    give(chunks, 16 << 3);
    chunks = 0;
    chunkSlots = 0;
    return false;
  }
  poolTop = 1;
  freeCount--;
  pooledChange(-<isize>NODE_BYTES);
  initRecord(ROOT, ROOT, 0);
  return true;
}

/** Frees the whole tree; only when it holds no node besides the root. */
export function releaseTree(): void {
  if (chunks == 0) return;
  for (let c: u32 = 0; c < chunkCount; c++) give(<usize>load<u32>(chunks + (<usize>c << 3), 4), CHUNK_BYTES + 32);
  pooledChange(-<isize>(<usize>freeCount * NODE_BYTES));
  give(chunks, <usize>chunkSlots << 3);
  tableRelease(childTable);
  tableRelease(orphanTable);
  forgetTree();
}

/** Drops the tree without freeing it (the state is abandoned after a trap). */
export function forgetTree(): void {
  chunks = 0;
  chunkSlots = chunkCount = poolTop = freeHead = freeCount = liveNodes = memberships = 0;
  arena = NONE;
  memory.fill(childTable, 0, TABLE_HEADER_BYTES);
  memory.fill(orphanTable, 0, TABLE_HEADER_BYTES);
}

function initRecord(n: u32, parent: u32, local: u64): void {
  const p = nodeAt(n);
  // Two vector stores rather than memory.fill: this runs for every new block.
  const zero = i64x2.splat(0);
  v128.store(p, zero);
  v128.store(p, zero, 16);
  store<u64>(p, local, LOCAL);
  store<u32>(p, parent, PARENT);
}

function addChunk(): bool {
  if (chunkCount == chunkSlots) {
    const grown = take(<usize>chunkSlots << 4);
    if (grown == 0) return false;
    memory.copy(grown, chunks, <usize>chunkSlots << 3);
    give(chunks, <usize>chunkSlots << 3);
    chunks = grown;
    chunkSlots <<= 1;
  }
  // The heap aligns to 16 bytes; 16 more let records start on 32 (two a line).
  const raw = take(CHUNK_BYTES + 32);
  if (raw == 0) return false;
  const entry = chunks + (<usize>(chunkCount++) << 3);
  store<u32>(entry, <u32>((raw + 31) & ~(<usize>31)));
  store<u32>(entry, <u32>raw, 4);
  freeCount += CHUNK_NODES;
  pooledChange(<isize>(<usize>CHUNK_NODES * NODE_BYTES));
  return true;
}

/** Makes sure `count` more nodes can be made without memory; false when there is none. */
export function poolReserve(count: u32): bool {
  while (freeCount < count) {
    if (poolTop + count > NODE_LIMIT || !addChunk()) return false;
  }
  return true;
}

function allocNode(parent: u32, local: u64): u32 {
  let n = arena != NONE ? arenaRecord(arena) : 0;
  if (n == 0) {
    n = freeHead;
    if (n != 0) {
      freeHead = load<u32>(nodeAt(n), NEXT);
    } else {
      n = poolTop++;
    }
    freeCount--;
    pooledChange(-<isize>NODE_BYTES);
  }
  initRecord(n, parent, local);
  liveNodes++;
  return n;
}

// ---- arenas ------------------------------------------------------------------
// A stored event that continues a worker's chain (one with a parent) takes
// its records from a span of consecutive records kept for that worker, so the
// worker's next turns follow this one in the pool, and a walk along its
// session goes on to the next record (adjacentChild, chainRun) where it would
// otherwise look the child up and wait on memory at every turn. The records
// of a span not handed out yet are marked free (walks skip them) and reserved
// (RESERVED, the owner's slot in their parent word), so the worker's next
// record (its slot's META_SPAN word) says by itself whether the span goes on:
// past its end lies a live node, another worker's span or the pool's top.
// They are counted as taken (poolReserve never counts on them). Spans are
// taken only from the top while the free list is empty: a pool that reuses
// freed records reuses them as before. A span is SPAN_SHORT records, longer in
// a pool large for its workers (up to SPAN_LONG, at most an eighth of the pool
// per worker slot), so what spans keep back stays under an eighth of the pool
// or SPAN_SHORT records a worker, and a long session stays within a few pages
// of the pool. The span words are reset with the tree (both go when the index
// empties, and on a reset), so a span word never outlives its records.
const SPAN_SHORT: u32 = 128;
const SPAN_LONG: u32 = 1024;
const RESERVED: u32 = 1 << 30;

let arena: u32 = NONE; // the slot whose span the records come from, or NONE

/** The slot a stored event's new records are taken for (NONE: from the free list or top as they come). */
export function poolArena(slot: u32): void {
  arena = slot;
}

@inline
function spanLength(): u32 {
  return min(max(poolTop / (max(slotCapacity(), 1) << 3), SPAN_SHORT), SPAN_LONG);
}

// The next record of the slot's span, taking a new span when it has none left
// and the pool only grows; 0 when neither (the caller takes one as usual).
function arenaRecord(slot: u32): u32 {
  const meta = slotMeta(slot);
  let n = load<u32>(meta, META_SPAN);
  if (n == 0 || n >= poolTop || load<u32>(nodeAt(n), INFO) != (FREE | RESERVED) || load<u32>(nodeAt(n), PARENT) != slot) {
    const start = poolTop;
    if (freeHead != 0 || start >= chunkCount << CHUNK_BITS) return 0;
    const end = min(min(start + spanLength(), (start | CHUNK_MASK) + 1), NODE_LIMIT);
    if (end <= start) return 0;
    for (let k = start + 1; k < end; k++) {
      const p = nodeAt(k);
      store<u32>(p, FREE | RESERVED, INFO);
      store<u32>(p, slot, PARENT);
    }
    poolTop = end;
    freeCount -= end - start;
    pooledChange(-<isize>(<usize>(end - start) * NODE_BYTES));
    n = start;
  }
  store<u32>(meta, n + 1, META_SPAN);
  return n;
}

function freeNode(n: u32): void {
  const p = nodeAt(n);
  store<u32>(p, FREE, INFO);
  store<u32>(p, freeHead, NEXT);
  freeHead = n;
  freeCount++;
  pooledChange(<isize>NODE_BYTES);
  liveNodes--;
}

// ---- children -------------------------------------------------------------

@inline
export function childKey(parent: u32, local: u64): u64 {
  return local ^ ((<u64>parent + 1) * 0xc2b2ae3d27d4eb4f);
}

@inline
export function isWide(p: usize): bool {
  return (load<u32>(p, INFO) & WIDE) != 0;
}

/** Children of a node. */
export function childCount(p: usize): u32 {
  return isWide(p) ? load<u32>(<usize>load<u32>(p, FIRST)) : (load<u32>(p, INFO) & LIST_BITS) >> LIST_SHIFT;
}

/** The k-th child (k < childCount): for walks over a node's children. */
@inline
export function wideChild(p: usize, k: u32): u32 {
  return load<u32>(<usize>load<u32>(p, FIRST) + 8 + (<usize>k << 2));
}

@inline
function setListCount(p: usize, count: u32): void {
  store<u32>(p, (load<u32>(p, INFO) & ~LIST_BITS) | (count << LIST_SHIFT), INFO);
}

/**
 * The record after n in the pool, when it is n's live child for this block;
 * else 0. A chain stored in one event takes consecutive records, so along a
 * stored prompt this finds the child without reading n's children: the next
 * address is n's plus one record (inside a chunk), not the result of a load,
 * and the walk's reads of successive nodes overlap instead of waiting on each
 * other. A live node is the only one with its (parent, block), so a hit is the
 * child childFind would return; a freed record keeps its old parent and block
 * and is told apart by its FREE flag.
 */
@inline
export function adjacentChild(n: u32, p: usize, local: u64): usize {
  const c = n + 1;
  if (c >= poolTop) return 0;
  const cp = (c & CHUNK_MASK) != 0 ? p + NODE_BYTES : nodeAt(c);
  return load<u64>(cp, LOCAL) == local && load<u32>(cp, PARENT) == n && (load<u32>(cp, INFO) & FREE) == 0 ? cp : 0;
}

/**
 * Steps down n's chain (n's record at p) along the u64 hashes at `hashes`,
 * at most `limit` of them, for as long as the members stay the same: the
 * next record is n's live child for the next hash, n tracks its children's
 * orphans, the child tracks its own, has no orphans (so its members are among
 * n's) and as many members as n. Stamps each node it steps to with `epoch`;
 * returns the steps taken (the node reached is n + steps). Records of a chain
 * stored in one event are consecutive (see adjacentChild): inside a chunk
 * each step reads the next 32 bytes and never a load of where to go, and
 * tests two words: the block and parent, then the info and marks.
 */
export function chainRun(n: u32, p: usize, hashes: usize, limit: u32, epoch: u16): u32 {
  const info = load<u32>(p, INFO);
  if (info & UNTRACKED) return 0;
  const members = info & COUNT_MASK;
  // A record with exactly these bits (an untracked or freed one has another flag set).
  const STATE: u32 = COUNT_MASK | UNTRACKED | FREE;
  // Orphans in the low half of the marks word, the stamp in the high half.
  const walked = <u32>epoch << 16;
  // The run ends at the limit, the pool's top or the chunk's end.
  const end = min(min(n + 1 + min(limit, CHUNK_NODES), poolTop), (n | CHUNK_MASK) + 1);
  let c = n + 1;
  let cp = p + NODE_BYTES;
  let h = hashes;
  for (; c < end; c++) {
    if ((load<u64>(cp, LOCAL) ^ load<u64>(h)) | <u64>(load<u32>(cp, PARENT) ^ (c - 1))) break;
    const state = load<u32>(cp, INFO) & STATE;
    const marks = load<u32>(cp, ORPHANS);
    if ((state ^ members) | (marks ^ walked)) {
      if (state != members || (marks & 0xffff) != 0) break;
      store<u16>(cp, epoch, STAMP);
    }
    cp += NODE_BYTES;
    h += 8;
  }
  return c - n - 1;
}

/** The child of `parent` for this block, or 0. */
export function childFind(parent: u32, local: u64): u32 {
  const pp = nodeAt(parent);
  if (isWide(pp)) {
    const key = childKey(parent, local);
    let e = tableFind(childTable, key);
    while (e != 0) {
      const c = load<u32>(e, 8);
      const cp = nodeAt(c);
      // Verify: a 64-bit key collision must never hand back another block.
      if (load<u64>(cp, LOCAL) == local && load<u32>(cp, PARENT) == parent) return c;
      e = tableFindNext(childTable, e, key);
    }
    return 0;
  }
  let c = load<u32>(pp, FIRST);
  while (c != 0) {
    const cp = nodeAt(c);
    if (load<u64>(cp, LOCAL) == local) return c;
    c = load<u32>(cp, NEXT);
  }
  return 0;
}

// The root's children by block, direct-mapped, for findMatches: every lookup
// starts at the root, and the root's children share the children table with
// every wide node's, so its slot there is rarely in cache; these 4 KiB are.
// An entry is a node id (0: none) and is only a hint: rootChild takes it when
// the record is a live child of the root for the block (the only one), and
// otherwise asks childFind and remembers the answer. Nothing else writes here,
// so no change to the tree needs to touch it.
const ROOT_HINT_BITS: u32 = 10;
const rootHints: usize = memory.data(4 << ROOT_HINT_BITS, 16);

/** childFind(ROOT, local) through the hints. */
export function rootChild(local: u64): u32 {
  const hint = rootHints + ((<usize>(<u32>local & ((1 << ROOT_HINT_BITS) - 1))) << 2);
  const c = load<u32>(hint);
  if (c != 0 && c < poolTop) {
    const cp = nodeAt(c);
    if (load<u64>(cp, LOCAL) == local && load<u32>(cp, PARENT) == ROOT && (load<u32>(cp, INFO) & FREE) == 0) return c;
  }
  const found = childFind(ROOT, local);
  if (found != 0) store<u32>(hint, found);
  return found;
}

/**
 * Makes room for one more child of `parent` (its child array and the
 * children table); false when there is no memory. With poolReserve(1), a
 * childAdd after it cannot fail.
 */
export function childReserve(parent: u32): bool {
  const pp = nodeAt(parent);
  if (isWide(pp)) {
    const arr = <usize>load<u32>(pp, FIRST);
    const count = load<u32>(arr);
    const cap = load<u32>(arr, 4);
    if (count == cap) {
      const next = cap + (cap >> 1);
      const grown = take(8 + (<usize>next << 2));
      if (grown == 0) return false;
      memory.copy(grown, arr, 8 + (<usize>count << 2));
      store<u32>(grown, next, 4);
      give(arr, 8 + (<usize>cap << 2));
      store<u32>(pp, <u32>grown, FIRST);
    }
    return tableReserve(childTable, 1);
  }
  if (childCount(pp) < CHILD_LIST_MAX) return true;
  // The next child makes the node wide: its array and table entries.
  return tableReserve(childTable, CHILD_LIST_MAX + 1) && pendingArray(2 * CHILD_LIST_MAX);
}

// A child array taken ahead of a list node going wide, so the switch cannot fail.
let pending: usize = 0;
let pendingCap: u32 = 0;

function pendingArray(cap: u32): bool {
  if (pending != 0) return true;
  pending = take(8 + (<usize>cap << 2));
  if (pending == 0) return false;
  pendingCap = cap;
  return true;
}

/** Frees a child array taken ahead and not used (the index is being emptied). */
export function releasePending(): void {
  if (pending != 0) give(pending, 8 + (<usize>pendingCap << 2));
  pending = 0;
}

/** Adds a new child (no members yet) for the block; room reserved (poolReserve, childReserve). */
export function childAdd(parent: u32, local: u64): u32 {
  const c = allocNode(parent, local);
  const pp = nodeAt(parent);
  if (isWide(pp)) {
    appendWide(parent, pp, c, local);
    return c;
  }
  const listed = childCount(pp);
  if (listed < CHILD_LIST_MAX) {
    store<u32>(nodeAt(c), load<u32>(pp, FIRST), NEXT);
    store<u32>(pp, c, FIRST);
    setListCount(pp, listed + 1);
    if (load<u32>(pp, INFO) & UNTRACKED) retrack(parent);
    return c;
  }
  // Going wide: the listed children move to the array taken ahead.
  if (parent != ROOT) untrack(parent);
  const arr = pending;
  pending = 0;
  store<u32>(arr, 0);
  store<u32>(arr, pendingCap, 4);
  let k = load<u32>(pp, FIRST);
  store<u32>(pp, <u32>arr, FIRST);
  setListCount(pp, 0);
  store<u32>(pp, load<u32>(pp, INFO) | WIDE, INFO);
  while (k != 0) {
    const kp = nodeAt(k);
    const next = load<u32>(kp, NEXT);
    appendWide(parent, pp, k, load<u64>(kp, LOCAL));
    k = next;
  }
  appendWide(parent, pp, c, local);
  return c;
}

function appendWide(parent: u32, pp: usize, c: u32, local: u64): void {
  const arr = <usize>load<u32>(pp, FIRST);
  const count = load<u32>(arr);
  store<u32>(arr + 8 + (<usize>count << 2), c);
  store<u32>(arr, count + 1);
  store<u32>(nodeAt(c), count, NEXT);
  tableInsert(childTable, childKey(parent, local), c, 0);
}

function childUnlink(c: u32): void {
  const cp = nodeAt(c);
  const parent = load<u32>(cp, PARENT);
  const pp = nodeAt(parent);
  if (!isWide(pp)) {
    let prev: u32 = 0;
    let k = load<u32>(pp, FIRST);
    while (k != c) {
      prev = k;
      k = load<u32>(nodeAt(k), NEXT);
    }
    const next = load<u32>(cp, NEXT);
    if (prev == 0) store<u32>(pp, next, FIRST);
    else store<u32>(nodeAt(prev), next, NEXT);
    setListCount(pp, childCount(pp) - 1);
    if (load<u32>(pp, INFO) & UNTRACKED) retrack(parent);
    return;
  }
  const arr = <usize>load<u32>(pp, FIRST);
  const count = load<u32>(arr) - 1;
  const pos = load<u32>(cp, NEXT);
  const last = load<u32>(arr + 8 + (<usize>count << 2));
  store<u32>(arr + 8 + (<usize>pos << 2), last);
  store<u32>(nodeAt(last), pos, NEXT);
  store<u32>(arr, count);
  unindexChild(parent, c, load<u64>(cp, LOCAL));
  if (count > CHILD_LIST_BACK) return;
  // Back to the list: nothing to allocate.
  let first: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    const k = load<u32>(arr + 8 + (<usize>i << 2));
    unindexChild(parent, k, load<u64>(nodeAt(k), LOCAL));
    store<u32>(nodeAt(k), first, NEXT);
    first = k;
  }
  give(arr, 8 + (<usize>load<u32>(arr, 4) << 2));
  store<u32>(pp, first, FIRST);
  store<u32>(pp, load<u32>(pp, INFO) & ~WIDE, INFO);
  setListCount(pp, count);
  if (parent != ROOT) retrack(parent);
}

function unindexChild(parent: u32, c: u32, local: u64): void {
  const key = childKey(parent, local);
  let e = tableFind(childTable, key);
  while (e != 0 && load<u32>(e, 8) != c) e = tableFindNext(childTable, e, key);
  if (e == 0) unreachable(); // the table lost a child: trap, never loop
  tableDelete(childTable, e);
}

/** Frees n and then each ancestor left with neither members nor children. */
function pruneUp(n: u32): void {
  while (n != ROOT) {
    const p = nodeAt(n);
    if (memberCount(p) != 0 || childCount(p) != 0) return;
    const parent = load<u32>(p, PARENT);
    childUnlink(n);
    freeNode(n);
    n = parent;
  }
}

// ---- orphan tracking ----------------------------------------------------------

@inline
function orphanKey(parent: u32, slot: u32): u64 {
  return (<u64>parent << 32) | <u64>slot;
}

// While set, nodes do not start tracking again (clearSlot removes a worker's
// memberships without the orphan bookkeeping, which a retrack would see half done).
let holdRetrack = false;

export function setHoldRetrack(hold: bool): void {
  holdRetrack = hold;
}

/** Stops tracking orphans of n's children: their registry entries go. Never allocates. */
function untrack(n: u32): void {
  const p = nodeAt(n);
  if (load<u32>(p, INFO) & UNTRACKED) return;
  store<u32>(p, load<u32>(p, INFO) | UNTRACKED, INFO);
  const wide = isWide(p);
  const count = childCount(p);
  let c = wide ? 0 : load<u32>(p, FIRST);
  for (let k: u32 = 0; k < count; k++) {
    if (wide) c = wideChild(p, k);
    const cp = nodeAt(c);
    if (load<u16>(cp, ORPHANS) != 0) {
      const members = memberCount(cp);
      for (let s = memberNext(cp, 0, members); s != NO_SLOT; s = memberNext(cp, s + 1, members)) {
        if (!memberHas(p, s)) orphanEnd(c, n, s);
      }
    }
    if (!wide) c = load<u32>(cp, NEXT);
  }
}

// Starts tracking n's children's orphans again, when there is memory to register them.
function retrack(n: u32): void {
  if (holdRetrack) return;
  const p = nodeAt(n);
  if (isWide(p)) return;
  let need: u32 = 0;
  for (let c = load<u32>(p, FIRST); c != 0; c = load<u32>(nodeAt(c), NEXT)) {
    const orphans = countOrphans(nodeAt(c), p);
    if (orphans > ORPHANS_MAX) return;
    need += orphans;
  }
  if (!tableReserve(orphanTable, need)) return;
  for (let c = load<u32>(p, FIRST); c != 0; c = load<u32>(nodeAt(c), NEXT)) {
    const cp = nodeAt(c);
    const members = memberCount(cp);
    for (let s = memberNext(cp, 0, members); s != NO_SLOT; s = memberNext(cp, s + 1, members)) {
      if (!memberHas(p, s)) orphanAdd(c, n, s);
    }
  }
  store<u32>(p, load<u32>(p, INFO) & ~UNTRACKED, INFO);
}

/** Members of the child at cp that the node at pp does not have. */
function countOrphans(cp: usize, pp: usize): u32 {
  let orphans: u32 = 0;
  const members = memberCount(cp);
  for (let s = memberNext(cp, 0, members); s != NO_SLOT; s = memberNext(cp, s + 1, members)) {
    if (!memberHas(pp, s)) orphans++;
  }
  return orphans;
}

// Registers the orphan membership (slot, c) under parent; room reserved, and
// c's count below ORPHANS_MAX (a parent whose child would pass it stops tracking).
function orphanAdd(c: u32, parent: u32, slot: u32): void {
  const p = nodeAt(c);
  store<u16>(p, <u16>(load<u16>(p, ORPHANS) + 1), ORPHANS);
  addSlotOrphans(slot, 1);
  tableInsert(orphanTable, orphanKey(parent, slot), c, 0);
}

/** Ends the orphan membership (slot, c), c's parent being `parent`. */
export function orphanEnd(c: u32, parent: u32, slot: u32): void {
  const p = nodeAt(c);
  store<u16>(p, <u16>(load<u16>(p, ORPHANS) - 1), ORPHANS);
  addSlotOrphans(slot, -1);
  const key = orphanKey(parent, slot);
  let e = tableFind(orphanTable, key);
  while (e != 0 && load<u32>(e, 8) != c) e = tableFindNext(orphanTable, e, key);
  if (e == 0) unreachable(); // the registry lost an orphan: trap, never loop
  tableDelete(orphanTable, e);
}

// ---- membership -----------------------------------------------------------------

/**
 * Makes slot a member of n (it must not be one); false (nothing changed) when
 * there is no memory for its member block. parentHeld: 1 or 0 when the caller
 * knows whether the slot holds n's parent (a chain being stored), -1 if not.
 */
export function memberJoin(n: u32, slot: u32, parentHeld: i32): bool {
  const p = nodeAt(n);
  if (!memberAdd(p, slot)) return false;
  memberships++;
  const parent = load<u32>(p, PARENT);
  if (parent != ROOT && isTracked(parent)) {
    const held = parentHeld >= 0 ? parentHeld != 0 : memberHas(nodeAt(parent), slot);
    if (!held) {
      // Without room to register the orphan (or to count it), the parent stops tracking.
      if (load<u16>(p, ORPHANS) < ORPHANS_MAX && tableReserve(orphanTable, 1)) orphanAdd(n, parent, slot);
      else untrack(parent);
    }
  }
  // Children of n this worker already held stop being orphans.
  if (slotOrphans(slot) != 0 && isTracked(n)) {
    const key = orphanKey(n, slot);
    for (let e = tableFind(orphanTable, key); e != 0; e = tableFind(orphanTable, key)) {
      const c = load<u32>(e, 8);
      tableDelete(orphanTable, e);
      const cp = nodeAt(c);
      store<u16>(cp, <u16>(load<u16>(cp, ORPHANS) - 1), ORPHANS);
      addSlotOrphans(slot, -1);
    }
  }
  return true;
}

/** Removes slot from n's members, then frees what is left unused. Never allocates. */
export function memberLeave(n: u32, slot: u32): void {
  const p = nodeAt(n);
  const parent = load<u32>(p, PARENT);
  if (parent != ROOT && isTracked(parent) && !memberHas(nodeAt(parent), slot)) orphanEnd(n, parent, slot);
  memberRemove(p, slot);
  memberships--;
  // Children of n the worker holds become orphans (a removal in the middle
  // of its chain; engines evict tails first, so usually there are none).
  if (!isWide(p) && isTracked(n)) {
    for (let c = load<u32>(p, FIRST); c != 0; c = load<u32>(nodeAt(c), NEXT)) {
      if (!memberHas(nodeAt(c), slot)) continue;
      if (load<u16>(nodeAt(c), ORPHANS) == ORPHANS_MAX || !tableReserve(orphanTable, 1)) {
        untrack(n);
        break;
      }
      orphanAdd(c, n, slot);
    }
  }
  pruneUp(n);
}

/**
 * Removes slot from n's members without the orphan bookkeeping: for
 * clearSlot, which settles orphans for the whole worker first.
 */
export function memberDrop(n: u32, slot: u32): void {
  memberRemove(nodeAt(n), slot);
  memberships--;
  pruneUp(n);
}

export { memberCount, memberHas, NO_SLOT };
