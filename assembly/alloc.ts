import { ROOT } from 'rt/tlsf';

// Every allocation the kernels make goes through here, so the core can report
// how many bytes it holds (leak tests assert it returns to the empty state, and
// /metrics exposes it). Callers free with the size they allocated.

let live: usize = 0;

@inline
export function alloc(bytes: usize): usize {
  live += bytes;
  return heap.alloc(bytes);
}

@inline
export function release(ptr: usize, bytes: usize): void {
  live -= bytes;
  heap.free(ptr);
}

/** Grows or shrinks a block, keeping its contents up to the smaller size. */
@inline
export function resize(ptr: usize, oldBytes: usize, newBytes: usize): usize {
  live += newBytes - oldBytes;
  return heap.realloc(ptr, newBytes);
}

export function liveBytes(): usize {
  return live;
}

// ---- fallible allocation ------------------------------------------------------
//
// The heap traps when it must grow memory and cannot, which would stop a
// kernel in the middle of an update. Kernels that must stay consistent (the
// prefix index) allocate through tryAlloc instead: it refuses, returning 0,
// when the heap has no free block for the request and growing would take
// memory past what a wasm32 memory can have, so the caller can back out
// before changing anything.

/** A wasm32 memory holds at most 65,536 pages of 64 KiB. */
const MAX_PAGES: usize = 65536;

// Test hook (coreFailAllocation): tryAlloc calls that succeed before one fails;
// -1 when none is set to fail. failTraps makes that one trap instead.
let failAfter: i32 = -1;
let failTraps = false;

export function tryAlloc(bytes: usize): usize {
  if (failAfter >= 0) {
    if (failAfter == 0) {
      failAfter = -1;
      if (failTraps) unreachable();
      return 0;
    }
    failAfter--;
  }
  return allocIfRoom(bytes);
}

/** tryAlloc without the test hook: for buffers of the host's, not the index's (the KV-event wire buffer). */
export function allocIfRoom(bytes: usize): usize {
  if (!heapHasRoom(bytes)) {
    // The heap must grow: the pages it would add for this block (the block,
    // its rounding and header, and a spare page) must fit the memory.
    const pages = (bytes + (bytes >> 4) + 0x1ffff) >> 16;
    if (<usize>memory.size() + pages > MAX_PAGES) return 0;
  }
  live += bytes;
  return heap.alloc(bytes);
}

// Whether the heap (AssemblyScript 0.28's TLSF, ~lib/rt/tlsf) holds a free
// block it would hand out for `bytes` without growing memory: its own search,
// read only. The heap doubles memory when it grows, so a large core reaches
// the 4 GiB limit with much of it free; this lets allocations go on there.
// Constants as in ~lib/rt/common and tlsf: 16-byte alignment, a 4-byte block
// header, 16 second-level lists per first level.
function heapHasRoom(bytes: usize): bool {
  const root = changetype<usize>(ROOT);
  if (root == 0 || bytes > (1 << 30) - 4) return false;
  const size = bytes <= 12 ? <usize>12 : ((bytes + 4 + 15) & ~(<usize>15)) - 4;
  let fl: usize;
  let sl: u32;
  if (size < 256) {
    fl = 0;
    sl = <u32>(size >> 4);
  } else {
    const rounded = size < (1 << 29) - 2 ? size + (<usize>1 << (27 - clz<usize>(size))) - 1 : size;
    fl = 31 - clz<usize>(rounded);
    sl = <u32>((rounded >> (fl - 4)) ^ 16);
    fl -= 7;
    if (fl >= 23) return false;
  }
  if ((load<u32>(root + (fl << 2), 4) & (<u32>0xffffffff << sl)) != 0) return true;
  return (load<usize>(root) & (<usize>0xffffffff << (fl + 1))) != 0;
}

/** Test-only: whether the heap would serve `bytes` without growing memory. */
export function coreHeapHasRoom(bytes: usize): bool {
  return heapHasRoom(bytes);
}

/**
 * Test-only: the next `after` fallible allocations succeed and the one after
 * fails (returns 0, or traps when `trap` is set); -1 clears it.
 */
export function coreFailAllocation(after: i32, trap: bool): void {
  failAfter = after;
  failTraps = trap;
}
