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
