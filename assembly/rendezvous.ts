import { grownCapacity, regrow } from './grow';

// Rendezvous (highest-random-weight) hashing: the k members of a set of
// workers that rank highest for a key. Export prefix `hrw`.
//
// Each worker id (its stable u64 routing id) scores
//   mix(id ^ mix(key + 0x9e3779b97f4a7c15))
// with mix the SplitMix64 finalizer; higher wins, ties go to the smaller id.
// A worker's score depends only on its own id and the key, so the result does
// not depend on input order, and removing a worker changes only the places it
// held.
//
// Buffers: `hrwReserve(n)` sizes them and returns the address of the input,
// n u64 ids; `hrwTopK(n, key, k)` writes min(k, n) input indices, best first,
// to `hrwOutPtr()` (u32) and returns how many.

let ids: usize = 0;
let scores: usize = 0;
let out: usize = 0;
let capacity: u32 = 0;

export function hrwReserve(n: u32): usize {
  if (n > capacity) {
    const cap = grownCapacity(capacity, n);
    ids = regrow(ids, capacity, cap, 8);
    scores = regrow(scores, capacity, cap, 8);
    out = regrow(out, capacity, cap, 4);
    capacity = cap;
  }
  return ids;
}

export function hrwOutPtr(): usize {
  return out;
}

@inline
function mix(z: u64): u64 {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

@inline
function scoreOf(i: u32): u64 {
  return load<u64>(scores + (<usize>i << 3));
}

@inline
function idOf(i: u32): u64 {
  return load<u64>(ids + (<usize>i << 3));
}

@inline
function better(a: u32, b: u32): bool {
  const sa = scoreOf(a);
  const sb = scoreOf(b);
  return sa > sb || (sa == sb && idOf(a) < idOf(b));
}

@inline
function heapAt(i: u32): u32 {
  return load<u32>(out + (<usize>i << 2));
}

@inline
function heapSet(i: u32, v: u32): void {
  store<u32>(out + (<usize>i << 2), v);
}

// The heap keeps the worst kept member at its root: a parent is never better
// than its children.
function siftDown(at: u32, size: u32): void {
  const item = heapAt(at);
  let i = at;
  while (true) {
    const left: u32 = (i << 1) + 1;
    if (left >= size) break;
    let child = left;
    if (left + 1 < size && better(heapAt(child), heapAt(left + 1))) child = left + 1;
    if (!better(item, heapAt(child))) break;
    heapSet(i, heapAt(child));
    i = child;
  }
  heapSet(i, item);
}

function siftUp(at: u32): void {
  const item = heapAt(at);
  let i = at;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!better(heapAt(parent), item)) break;
    heapSet(i, heapAt(parent));
    i = parent;
  }
  heapSet(i, item);
}

export function hrwTopK(n: u32, key: u64, k: u32): u32 {
  if (n > capacity) return 0;
  if (k > n) k = n;
  if (k == 0) return 0;
  const salt = mix(key + 0x9e3779b97f4a7c15);
  for (let i: u32 = 0; i < n; i++) store<u64>(scores + (<usize>i << 3), mix(idOf(i) ^ salt));
  for (let i: u32 = 0; i < k; i++) {
    heapSet(i, i);
    siftUp(i);
  }
  for (let i = k; i < n; i++) {
    if (better(i, heapAt(0))) {
      heapSet(0, i);
      siftDown(0, k);
    }
  }
  // Heap sort: move the worst to the end until the kept members run best first.
  for (let end = k - 1; end > 0; end--) {
    const worst = heapAt(0);
    heapSet(0, heapAt(end));
    heapSet(end, worst);
    siftDown(0, end);
  }
  return k;
}
