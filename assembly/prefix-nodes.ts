import { alloc, release, resize } from './alloc';
import { TABLE_HEADER_BYTES, tableDelete, tableFind, tableFindNext, tableInsert, tableRelease } from './prefix-table';
import { addSlotOrphans, slotOrphans } from './prefix-slots';

// The radix tree of the prefix index: pooled node records, their children
// and their members (the workers holding each node), with the two counts
// findMatches relies on kept exact on every change:
//   orphans(n)   members of n that do not hold n's parent (0 under the root)
//   kids(w, n)   children of n that member w also holds
// A node is freed once it has neither members nor children, and its freed
// ancestors with it. Layouts are drawn in prefix-index.ts.

export const ROOT: u32 = 0;
export const NONE: u32 = 0xffffffff;
/** kids value clearSlot uses to mark a membership already accounted for. */
export const KIDS_DONE: u32 = 0xffffffff;

export const LOCAL: usize = 0;
export const PARENT: usize = 8;
export const DEPTH: usize = 12;
export const COUNT: usize = 16;
export const ORPHANS: usize = 20;
export const FIRST: usize = 24;
export const NEXT: usize = 28;
export const PREV: usize = 32;
export const NCHILD: usize = 36;
export const FLAGS: usize = 40;
export const WCAP: usize = 44;
const MEMBERS: usize = 48;

export const CHILDREN_INDEXED: u32 = 1;
export const MEMBERS_INDEXED: u32 = 2;
const FREE: u32 = 4;

// Regimes, with hysteresis so a node hovering at a bound does not rebuild
// its index on every change. Few children: walk the sibling list (a chain
// node has one child, so the walk is the one record read the lookup needs
// anyway). Few members: scan the inline array. Beyond, the global tables.
export const CHILD_LIST_MAX: u32 = 4;
export const CHILD_LIST_BACK: u32 = 2;
export const MEMBER_SCAN_MAX: u32 = 8;
export const MEMBER_SCAN_BACK: u32 = 4;

/** Bytes per member: a u32 slot and an (exts, kids) pair. */
const MEMBER_BYTES: usize = 12;
export const M_EXTS: usize = 0;
export const M_KIDS: usize = 4;

// Headers of the global tables (children, members, orphans), in static data
// so an empty index holds no heap memory for them.
export const childTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);
export const memberTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);
export const orphanTable: usize = memory.data(<i32>TABLE_HEADER_BYTES, 16);

// The pool is a list of fixed chunks, so records never move: growing adds a
// chunk and copies nothing, and a record's address stays valid while it lives.
const NODE_SHIFT: usize = 6; // 64-byte records
const CHUNK_BITS: u32 = 13; // 8,192 records (512 KiB) per chunk
const CHUNK_MASK: u32 = (1 << CHUNK_BITS) - 1;
const CHUNK_BYTES: usize = (<usize>1) << (<usize>CHUNK_BITS + NODE_SHIFT);
// Chunk table: per chunk, the 64-byte aligned address records start at (so
// a record is one cache line) and the address alloc returned, to free it.
let chunks: usize = 0;
let chunkSlots: u32 = 0; // capacity of the chunk list
let chunkCount: u32 = 0;
let poolTop: u32 = 0; // records ever handed out, root included
let freeHead: u32 = 0; // 0: none (the root is never free)
let liveNodes: u32 = 0; // root excluded
let memberships: u32 = 0;

@inline
export function nodeAt(n: u32): usize {
  return <usize>load<u32>(chunks + (<usize>(n >> CHUNK_BITS) << 3)) + (<usize>(n & CHUNK_MASK) << NODE_SHIFT);
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
  return n != ROOT && n < poolTop && (load<u32>(nodeAt(n), FLAGS) & FREE) == 0;
}

export function startTree(): void {
  if (chunks != 0) return;
  chunkSlots = 16;
  chunks = alloc(<usize>chunkSlots << 3);
  addChunk();
  poolTop = 1;
  initRecord(ROOT, ROOT, 0, 0);
}

/** Frees the whole tree; only when it holds no node besides the root. */
export function releaseTree(): void {
  if (chunks == 0) return;
  for (let c: u32 = 0; c < chunkCount; c++) release(<usize>load<u32>(chunks + (<usize>c << 3), 4), CHUNK_BYTES + 48);
  release(chunks, <usize>chunkSlots << 3);
  tableRelease(childTable);
  tableRelease(memberTable);
  tableRelease(orphanTable);
  chunks = 0;
  chunkSlots = chunkCount = poolTop = freeHead = liveNodes = memberships = 0;
}

function initRecord(n: u32, parent: u32, local: u64, depth: u32): void {
  const p = nodeAt(n);
  // Four vector stores rather than memory.fill: this runs for every new block,
  // and a bulk-memory call costs more than the 64 bytes it clears.
  const zero = i64x2.splat(0);
  v128.store(p, zero);
  v128.store(p, zero, 16);
  v128.store(p, zero, 32);
  v128.store(p, zero, 48);
  store<u64>(p, local, LOCAL);
  store<u32>(p, parent, PARENT);
  store<u32>(p, depth, DEPTH);
  store<u32>(p, 1, WCAP);
}

function addChunk(): void {
  if (chunkCount == chunkSlots) {
    chunks = resize(chunks, <usize>chunkSlots << 3, <usize>chunkSlots << 4);
    chunkSlots <<= 1;
  }
  // alloc aligns to 16 bytes; 48 more let the records start on a cache line.
  const raw = alloc(CHUNK_BYTES + 48);
  const entry = chunks + (<usize>(chunkCount++) << 3);
  store<u32>(entry, <u32>((raw + 63) & ~(<usize>63)));
  store<u32>(entry, <u32>raw, 4);
}

function allocNode(parent: u32, local: u64, depth: u32): u32 {
  let n = freeHead;
  if (n != 0) {
    freeHead = load<u32>(nodeAt(n), NEXT);
  } else {
    if (poolTop == chunkCount << CHUNK_BITS) addChunk();
    n = poolTop++;
  }
  initRecord(n, parent, local, depth);
  liveNodes++;
  return n;
}

// A member array goes back inline when its count drops to one, so a node
// freed with none has nothing else to release.
function freeNode(n: u32): void {
  const p = nodeAt(n);
  store<u32>(p, FREE, FLAGS);
  store<u32>(p, freeHead, NEXT);
  freeHead = n;
  liveNodes--;
}

// ---- children -------------------------------------------------------------

@inline
export function childKey(parent: u32, local: u64): u64 {
  return local ^ ((<u64>parent + 1) * 0xc2b2ae3d27d4eb4f);
}

/** The child of `parent` for this block, or 0. */
export function childFind(parent: u32, local: u64): u32 {
  const pp = nodeAt(parent);
  if (load<u32>(pp, FLAGS) & CHILDREN_INDEXED) {
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

/** The child of `parent` for this block, created (without members) if absent. */
export function childEnsure(parent: u32, local: u64): u32 {
  const found = childFind(parent, local);
  if (found != 0) return found;
  const c = allocNode(parent, local, load<u32>(nodeAt(parent), DEPTH) + 1);
  const pp = nodeAt(parent);
  const first = load<u32>(pp, FIRST);
  store<u32>(nodeAt(c), first, NEXT);
  if (first != 0) store<u32>(nodeAt(first), c, PREV);
  store<u32>(pp, c, FIRST);
  const nchild = load<u32>(pp, NCHILD) + 1;
  store<u32>(pp, nchild, NCHILD);
  const flags = load<u32>(pp, FLAGS);
  if (flags & CHILDREN_INDEXED) {
    tableInsert(childTable, childKey(parent, local), c, 0);
  } else if (nchild > CHILD_LIST_MAX) {
    for (let k = first; k != 0; k = load<u32>(nodeAt(k), NEXT)) {
      tableInsert(childTable, childKey(parent, load<u64>(nodeAt(k), LOCAL)), k, 0);
    }
    tableInsert(childTable, childKey(parent, local), c, 0);
    store<u32>(pp, flags | CHILDREN_INDEXED, FLAGS);
  }
  return c;
}

function childUnlink(c: u32): void {
  const cp = nodeAt(c);
  const parent = load<u32>(cp, PARENT);
  const next = load<u32>(cp, NEXT);
  const prev = load<u32>(cp, PREV);
  const pp = nodeAt(parent);
  if (prev != 0) store<u32>(nodeAt(prev), next, NEXT);
  else store<u32>(pp, next, FIRST);
  if (next != 0) store<u32>(nodeAt(next), prev, PREV);
  const nchild = load<u32>(pp, NCHILD) - 1;
  store<u32>(pp, nchild, NCHILD);
  const flags = load<u32>(pp, FLAGS);
  if (flags & CHILDREN_INDEXED) {
    unindexChild(parent, c);
    if (nchild <= CHILD_LIST_BACK) {
      for (let k = load<u32>(pp, FIRST); k != 0; k = load<u32>(nodeAt(k), NEXT)) unindexChild(parent, k);
      store<u32>(pp, flags & ~CHILDREN_INDEXED, FLAGS);
    }
  }
}

function unindexChild(parent: u32, c: u32): void {
  const key = childKey(parent, load<u64>(nodeAt(c), LOCAL));
  let e = tableFind(childTable, key);
  while (e != 0 && load<u32>(e, 8) != c) e = tableFindNext(childTable, e, key);
  if (e == 0) unreachable(); // the table lost an indexed child: trap, never loop
  tableDelete(childTable, e);
}

/** Frees n and then each ancestor left with neither members nor children. */
export function pruneUp(n: u32): void {
  while (n != ROOT) {
    const p = nodeAt(n);
    if (load<u32>(p, COUNT) != 0 || load<u32>(p, NCHILD) != 0) return;
    const parent = load<u32>(p, PARENT);
    childUnlink(n);
    freeNode(n);
    n = parent;
  }
}

// ---- members --------------------------------------------------------------

@inline
export function memberKey(n: u32, slot: u32): u64 {
  return (<u64>n << 32) | <u64>slot;
}

/**
 * The member slots of n: `count` u32 in a row, so a node's workers copy out
 * in one go. The array is cap slots, then cap (exts, kids) pairs.
 */
@inline
export function memberSlots(n: u32): usize {
  const p = nodeAt(n);
  return load<u32>(p, WCAP) == 1 ? p + MEMBERS : <usize>load<u32>(p, MEMBERS);
}

/** The (exts u32, kids u32) pair of n's member at pos. */
@inline
export function memberMeta(n: u32, pos: u32): usize {
  const p = nodeAt(n);
  const cap = load<u32>(p, WCAP);
  const base = cap == 1 ? p + MEMBERS : <usize>load<u32>(p, MEMBERS);
  return base + (<usize>cap << 2) + (<usize>pos << 3);
}

/** The position of slot among n's members, or NONE. */
export function memberFind(n: u32, slot: u32): u32 {
  const p = nodeAt(n);
  if (load<u32>(p, FLAGS) & MEMBERS_INDEXED) {
    const e = tableFind(memberTable, memberKey(n, slot));
    return e == 0 ? NONE : load<u32>(e, 8);
  }
  const count = load<u32>(p, COUNT);
  const base = load<u32>(p, WCAP) == 1 ? p + MEMBERS : <usize>load<u32>(p, MEMBERS);
  for (let i: u32 = 0; i < count; i++) {
    if (load<u32>(base + (<usize>i << 2)) == slot) return i;
  }
  return NONE;
}

function memberAppend(n: u32, slot: u32): u32 {
  const p = nodeAt(n);
  const pos = load<u32>(p, COUNT);
  const cap = load<u32>(p, WCAP);
  if (pos == cap) moveMembers(p, cap, cap << 1, pos);
  store<u32>(memberSlots(n) + (<usize>pos << 2), slot);
  store<u64>(memberMeta(n, pos), 0);
  const count = pos + 1;
  store<u32>(p, count, COUNT);
  const flags = load<u32>(p, FLAGS);
  if (flags & MEMBERS_INDEXED) {
    tableInsert(memberTable, memberKey(n, slot), pos, 0);
  } else if (count > MEMBER_SCAN_MAX) {
    const slots = memberSlots(n);
    for (let i: u32 = 0; i < count; i++) tableInsert(memberTable, memberKey(n, load<u32>(slots + (<usize>i << 2))), i, 0);
    store<u32>(p, flags | MEMBERS_INDEXED, FLAGS);
  }
  memberships++;
  return pos;
}

function memberRemoveAt(n: u32, pos: u32): void {
  const p = nodeAt(n);
  const slots = memberSlots(n);
  const last = load<u32>(p, COUNT) - 1;
  const flags = load<u32>(p, FLAGS);
  const at = slots + (<usize>pos << 2);
  if (flags & MEMBERS_INDEXED) tableDelete(memberTable, tableFind(memberTable, memberKey(n, load<u32>(at))));
  if (pos != last) {
    store<u32>(at, load<u32>(slots + (<usize>last << 2)));
    store<u64>(memberMeta(n, pos), load<u64>(memberMeta(n, last)));
    if (flags & MEMBERS_INDEXED) store<u32>(tableFind(memberTable, memberKey(n, load<u32>(at))), pos, 8);
  }
  store<u32>(p, last, COUNT);
  if ((flags & MEMBERS_INDEXED) && last <= MEMBER_SCAN_BACK) {
    for (let i: u32 = 0; i < last; i++) {
      tableDelete(memberTable, tableFind(memberTable, memberKey(n, load<u32>(slots + (<usize>i << 2)))));
    }
    store<u32>(p, flags & ~MEMBERS_INDEXED, FLAGS);
  }
  const cap = load<u32>(p, WCAP);
  if (cap > 1) {
    if (last <= 1) moveMembers(p, cap, 1, last);
    else if (last * 4 <= cap) moveMembers(p, cap, cap >> 1, last);
  }
  memberships--;
}

// Moves n's member array to a new capacity (1 = inline in the record).
function moveMembers(p: usize, cap: u32, next: u32, count: u32): void {
  const from = cap == 1 ? p + MEMBERS : <usize>load<u32>(p, MEMBERS);
  const to = next == 1 ? p + MEMBERS : alloc(<usize>next * MEMBER_BYTES);
  memory.copy(to + (<usize>next << 2), from + (<usize>cap << 2), <usize>count << 3);
  memory.copy(to, from, <usize>count << 2);
  if (next > 1) store<u32>(p, <u32>to, MEMBERS);
  if (cap > 1) release(from, <usize>cap * MEMBER_BYTES);
  store<u32>(p, next, WCAP);
}

// ---- membership with orphans and kids kept exact ---------------------------
//
// The orphan registry holds one entry per orphan membership (w holds c but
// not c's parent p): key p << 32 | w, a = c. Joining p then finds the
// children to un-orphan directly, however many children p has.

@inline
function orphanKey(parent: u32, slot: u32): u64 {
  return (<u64>parent << 32) | <u64>slot;
}

function orphanAdd(c: u32, parent: u32, slot: u32): void {
  const p = nodeAt(c);
  store<u32>(p, load<u32>(p, ORPHANS) + 1, ORPHANS);
  addSlotOrphans(slot, 1);
  tableInsert(orphanTable, orphanKey(parent, slot), c, 0);
}

/** Ends the orphan membership (slot, c), c's parent being `parent`. */
export function orphanEnd(c: u32, parent: u32, slot: u32): void {
  const p = nodeAt(c);
  store<u32>(p, load<u32>(p, ORPHANS) - 1, ORPHANS);
  addSlotOrphans(slot, -1);
  const key = orphanKey(parent, slot);
  let e = tableFind(orphanTable, key);
  while (e != 0 && load<u32>(e, 8) != c) e = tableFindNext(orphanTable, e, key);
  if (e == 0) unreachable(); // the registry lost an orphan: trap, never loop
  tableDelete(orphanTable, e);
}

/**
 * Makes slot a member of n (it must not be one) and returns its position.
 * parentPos: the slot's position among the parent's members when the caller
 * knows it holds the parent (a chain being stored), else NONE.
 */
export function memberJoin(n: u32, slot: u32, parentPos: u32): u32 {
  const parent = load<u32>(nodeAt(n), PARENT);
  const hadOrphans = slotOrphans(slot) != 0;
  if (parent != ROOT) {
    const pp = parentPos != NONE ? parentPos : memberFind(parent, slot);
    if (pp == NONE) {
      orphanAdd(n, parent, slot);
    } else {
      const e = memberMeta(parent, pp);
      store<u32>(e, load<u32>(e, M_KIDS) + 1, M_KIDS);
    }
  }
  const pos = memberAppend(n, slot);
  // Children of n this worker already held stop being orphans.
  if (hadOrphans) {
    const key = orphanKey(n, slot);
    let kids: u32 = 0;
    for (let e = tableFind(orphanTable, key); e != 0; e = tableFind(orphanTable, key)) {
      const c = load<u32>(e, 8);
      tableDelete(orphanTable, e);
      const cp = nodeAt(c);
      store<u32>(cp, load<u32>(cp, ORPHANS) - 1, ORPHANS);
      addSlotOrphans(slot, -1);
      kids++;
    }
    store<u32>(memberMeta(n, pos), kids, M_KIDS);
  }
  return pos;
}

/** Removes the member at pos from n, then frees what is left unused. */
export function memberLeave(n: u32, pos: u32): void {
  const slot = load<u32>(memberSlots(n) + (<usize>pos << 2));
  let kids = load<u32>(memberMeta(n, pos), M_KIDS);
  const parent = load<u32>(nodeAt(n), PARENT);
  if (parent != ROOT) {
    const pp = memberFind(parent, slot);
    if (pp == NONE) {
      orphanEnd(n, parent, slot);
    } else {
      const pe = memberMeta(parent, pp);
      store<u32>(pe, load<u32>(pe, M_KIDS) - 1, M_KIDS);
    }
  }
  memberRemoveAt(n, pos);
  // A removal in the middle of the worker's chain orphans the children it
  // holds below. Engines evict tails first, so this walk is rare; it stops
  // once it has found them all.
  for (let c = load<u32>(nodeAt(n), FIRST); kids != 0 && c != 0; c = load<u32>(nodeAt(c), NEXT)) {
    if (memberFind(c, slot) != NONE) {
      orphanAdd(c, n, slot);
      kids--;
    }
  }
  pruneUp(n);
}

/**
 * Removes the member at pos without touching orphans or kids: for clearSlot,
 * which settles those for the whole worker before removing anything.
 */
export function memberDrop(n: u32, pos: u32): void {
  memberRemoveAt(n, pos);
  pruneUp(n);
}
