import { alloc, resize } from './alloc';

// Growable flat arrays for kernel state (per-slot columns, record pools,
// staging buffers). New elements are zeroed so a grown column reads as
// "nothing booked yet" without a separate pass.

/** Grows (or first allocates) an array of `width`-byte elements; returns its new address. */
export function regrow(ptr: usize, oldCount: u32, newCount: u32, width: usize): usize {
  const oldBytes = <usize>oldCount * width;
  const newBytes = <usize>newCount * width;
  const p = ptr == 0 ? alloc(newBytes) : resize(ptr, oldBytes, newBytes);
  if (newBytes > oldBytes) memory.fill(p + oldBytes, 0, newBytes - oldBytes);
  return p;
}

/** The next capacity at least `needed`, doubling from `current` (minimum 16). */
export function grownCapacity(current: u32, needed: u32): u32 {
  let cap = current < 16 ? <u32>16 : current;
  while (cap < needed) cap <<= 1;
  return cap;
}
