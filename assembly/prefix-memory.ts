import { release, tryAlloc } from './alloc';

// The prefix index's memory: every byte it holds (`held`) and how many of
// those sit in free pool records ready for reuse (`pooled`). held - pooled is
// what the memory bound is compared with: evicting frees pool records, which
// new blocks take before the index asks the heap for more.
//
// All of it is fallible (alloc.ts tryAlloc): 0 means no memory, and callers
// back out before changing anything.
//
// Member blocks (prefix-members.ts) come from slabs: 64 KiB chunks carved into
// blocks of one size class each, so a two-member set costs its 12 bytes and
// not a heap header and alignment on top. A block is a u32 header (capacity
// in u32 words, the top bit left to the member code) and `capacity` words.
// Larger blocks come from the heap directly.
//
//   class capacity (words): 2 3 4 6 8 12 16 24 32 48 64 96 128 192 256 384 512 768 1024
//   block bytes:            4 + 4 x capacity
//   per class: free list (u32 link in the header word), bump pointer into its
//   newest slab. Slabs are listed (u32 each, a growable array) and freed when
//   the index is empty.

let held: usize = 0;
let pooled: usize = 0;

export function heldBytes(): usize {
  return held;
}

export function usedBytes(): usize {
  return held - pooled;
}

/** Heap memory for the index; 0 when there is none. */
export function take(bytes: usize): usize {
  const p = tryAlloc(bytes);
  if (p != 0) held += bytes;
  return p;
}

export function give(ptr: usize, bytes: usize): void {
  release(ptr, bytes);
  held -= bytes;
}

/** Pool records became free (positive) or were handed out (negative). */
@inline
export function pooledChange(bytes: isize): void {
  pooled += bytes;
}

// ---- slabs --------------------------------------------------------------------

const CLASSES: u32 = 19;
const CLASS_CAPS: usize = memory.data<u32>([2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]);
/** Largest capacity served from slabs. */
const SLAB_MAX_CAP: u32 = 1024;
const SLAB_BYTES: usize = 65536;
const CAP_MASK: u32 = 0x7fffffff;

const freeHeads: usize = memory.data(<i32>CLASSES * 4, 4);
const bumpAt: usize = memory.data(<i32>CLASSES * 4, 4);
const bumpEnd: usize = memory.data(<i32>CLASSES * 4, 4);
let slabs: usize = 0;
let slabCount: u32 = 0;
let slabCapacity: u32 = 0;

/** The capacity a block for `words` words gets: its class's, or exactly `words` past the slabs. */
export function blockCapacity(words: u32): u32 {
  if (words > SLAB_MAX_CAP) return words;
  for (let c: u32 = 0; c < CLASSES; c++) {
    const cap = load<u32>(CLASS_CAPS + (<usize>c << 2));
    if (cap >= words) return cap;
  }
  unreachable();
  return 0;
}

function classOf(cap: u32): u32 {
  for (let c: u32 = 0; c < CLASSES; c++) if (load<u32>(CLASS_CAPS + (<usize>c << 2)) == cap) return c;
  unreachable();
  return 0;
}

@inline
function blockBytes(cap: u32): usize {
  return 4 + (<usize>cap << 2);
}

/**
 * A block of at least `words` words (capacity = blockCapacity(words)) with
 * its header set to the capacity; 0 when there is no memory.
 */
export function blockTake(words: u32): usize {
  const cap = blockCapacity(words);
  let p: usize;
  if (cap > SLAB_MAX_CAP) {
    p = take(blockBytes(cap));
    if (p == 0) return 0;
  } else {
    const c = <usize>classOf(cap) << 2;
    const size = blockBytes(cap);
    p = <usize>load<u32>(freeHeads + c);
    if (p != 0) {
      store<u32>(freeHeads + c, load<u32>(p));
    } else {
      p = <usize>load<u32>(bumpAt + c);
      if (p == 0 || p + size > <usize>load<u32>(bumpEnd + c)) {
        const slab = newSlab();
        if (slab == 0) return 0;
        p = slab;
        store<u32>(bumpEnd + c, <u32>(slab + SLAB_BYTES));
      }
      store<u32>(bumpAt + c, <u32>(p + size));
    }
    pooled -= size;
  }
  store<u32>(p, cap);
  return p;
}

export function blockGive(p: usize): void {
  const cap = load<u32>(p) & CAP_MASK;
  if (cap > SLAB_MAX_CAP) {
    give(p, blockBytes(cap));
    return;
  }
  const c = <usize>classOf(cap) << 2;
  store<u32>(p, load<u32>(freeHeads + c));
  store<u32>(freeHeads + c, <u32>p);
  pooled += blockBytes(cap);
}

/** The capacity in a block's header (the member code's flag masked off). */
@inline
export function blockCap(p: usize): u32 {
  return load<u32>(p) & CAP_MASK;
}

function newSlab(): usize {
  if (slabCount == slabCapacity) {
    const next: u32 = slabCapacity == 0 ? 16 : slabCapacity << 1;
    const list = take(<usize>next << 2);
    if (list == 0) return 0;
    if (slabs != 0) {
      memory.copy(list, slabs, <usize>slabCount << 2);
      give(slabs, <usize>slabCapacity << 2);
    }
    slabs = list;
    slabCapacity = next;
  }
  const slab = take(SLAB_BYTES);
  if (slab == 0) return 0;
  store<u32>(slabs + (<usize>(slabCount++) << 2), <u32>slab);
  pooled += SLAB_BYTES;
  return slab;
}

/** Frees every slab; only once no block is in use. */
export function releaseSlabs(): void {
  for (let i: u32 = 0; i < slabCount; i++) {
    give(<usize>load<u32>(slabs + (<usize>i << 2)), SLAB_BYTES);
    pooled -= SLAB_BYTES;
  }
  if (slabs != 0) give(slabs, <usize>slabCapacity << 2);
  slabs = 0;
  slabCount = slabCapacity = 0;
  memory.fill(freeHeads, 0, <usize>CLASSES << 2);
  memory.fill(bumpAt, 0, <usize>CLASSES << 2);
  memory.fill(bumpEnd, 0, <usize>CLASSES << 2);
}

/** Forgets every index allocation without freeing it (the state is abandoned after a trap). */
export function abandonMemory(): void {
  held = pooled = 0;
  slabs = 0;
  slabCount = slabCapacity = 0;
  memory.fill(freeHeads, 0, <usize>CLASSES << 2);
  memory.fill(bumpAt, 0, <usize>CLASSES << 2);
  memory.fill(bumpEnd, 0, <usize>CLASSES << 2);
}
