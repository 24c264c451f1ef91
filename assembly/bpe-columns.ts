// Element access to the flat u32 and u64 arrays the byte-pair kernel keeps
// its state in (index i of the array at `base`).

@inline
export function u32At(base: usize, i: u32): u32 {
  return load<u32>(base + (<usize>i << 2));
}

@inline
export function setU32(base: usize, i: u32, value: u32): void {
  store<u32>(base + (<usize>i << 2), value);
}

@inline
export function u64At(base: usize, i: u32): u64 {
  return load<u64>(base + (<usize>i << 3));
}

@inline
export function setU64(base: usize, i: u32, value: u64): void {
  store<u64>(base + (<usize>i << 3), value);
}
