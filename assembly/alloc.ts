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
// when the heap might need more memory than a wasm32 memory can have, so the
// caller can back out before changing anything.

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
  // Pages the heap would add for this block if it had no free one: the block,
  // its rounding and header, and a spare page.
  const pages = (bytes + (bytes >> 4) + 0x1ffff) >> 16;
  if (<usize>memory.size() + pages > MAX_PAGES) return 0;
  live += bytes;
  return heap.alloc(bytes);
}

/**
 * Test-only: the next `after` fallible allocations succeed and the one after
 * fails (returns 0, or traps when `trap` is set); -1 clears it.
 */
export function coreFailAllocation(after: i32, trap: bool): void {
  failAfter = after;
  failTraps = trap;
}
