// A map from 64-bit block hashes to small integers (block slots, counts),
// keyed by the hash's (lo, hi) u32 halves in open addressing with linear
// probing, all in typed arrays. A replay looks up, stores and
// evicts millions of blocks; a Map<bigint, T> spends most of that time
// hashing BigInts and allocating one for every element read out of a
// BigUint64Array, while the halves can be read straight from the arrays.

const EMPTY_SHIFT = 32;
/** A slot's value when it holds no key. */
const NONE = -1;

/** The (lo, hi) halves of a bigint, through a scratch typed array (no BigInt arithmetic). */
const scratch64 = new BigUint64Array(1);
const scratch32 = new Uint32Array(scratch64.buffer);
export function halvesOf(hash: bigint): [number, number] {
  scratch64[0] = hash;
  return [scratch32[0]!, scratch32[1]!];
}

/** Each u64 of a BigUint64Array as its little-endian (lo, hi) halves. */
export function halvesView(hashes: BigUint64Array): Uint32Array {
  return new Uint32Array(hashes.buffer, hashes.byteOffset, hashes.length * 2);
}

export class U64Map {
  private keys: Uint32Array;
  private values: Int32Array;
  private mask: number;
  private shift: number;
  private count = 0;

  constructor(capacity = 1024) {
    let size = 16;
    while (size < capacity * 2) size *= 2;
    this.keys = new Uint32Array(size * 2);
    this.values = new Int32Array(size).fill(NONE);
    this.mask = size - 1;
    this.shift = EMPTY_SHIFT - Math.log2(size);
  }

  get size(): number {
    return this.count;
  }

  /** The key's value, or -1 when the key is not there. */
  get(lo: number, hi: number): number {
    const { keys, values, mask } = this;
    for (let i = this.slotOf(lo, hi); ; i = (i + 1) & mask) {
      const value = values[i]!;
      if (value === NONE || (keys[2 * i] === lo && keys[2 * i + 1] === hi)) return value;
    }
  }

  has(lo: number, hi: number): boolean {
    return this.get(lo, hi) !== NONE;
  }

  /** Sets the key's value (an integer in [0, 2^31)); false when the key was already there (its value is replaced). */
  set(lo: number, hi: number, value: number): boolean {
    const { keys, values, mask } = this;
    let i = this.slotOf(lo, hi);
    for (; values[i] !== NONE; i = (i + 1) & mask) {
      if (keys[2 * i] === lo && keys[2 * i + 1] === hi) {
        values[i] = value;
        return false;
      }
    }
    keys[2 * i] = lo;
    keys[2 * i + 1] = hi;
    values[i] = value;
    if (++this.count * 2 > mask + 1) this.grow();
    return true;
  }

  /** Removes the key; false when it was not there. */
  delete(lo: number, hi: number): boolean {
    const { keys, values, mask } = this;
    let i = this.slotOf(lo, hi);
    for (; ; i = (i + 1) & mask) {
      if (values[i] === NONE) return false;
      if (keys[2 * i] === lo && keys[2 * i + 1] === hi) break;
    }
    // Backward shift: pull later entries of the probe run into the hole, so lookups never need tombstones.
    for (let j = (i + 1) & mask; values[j] !== NONE; j = (j + 1) & mask) {
      const home = this.slotOf(keys[2 * j]!, keys[2 * j + 1]!);
      // Entry j may move to i only if its home slot is not inside (i, j] (cyclically).
      if (i <= j ? home > i && home <= j : home > i || home <= j) continue;
      keys[2 * i] = keys[2 * j]!;
      keys[2 * i + 1] = keys[2 * j + 1]!;
      values[i] = values[j]!;
      i = j;
    }
    values[i] = NONE;
    this.count--;
    return true;
  }

  clear(): void {
    this.values.fill(NONE);
    this.count = 0;
  }

  /** Every value, in slot order. */
  *valuesInSlots(): IterableIterator<number> {
    for (const value of this.values) if (value !== NONE) yield value;
  }

  private slotOf(lo: number, hi: number): number {
    // Fibonacci hashing of both halves: the top bits of the product spread every input bit.
    return Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> this.shift;
  }

  private grow(): void {
    const { keys, values } = this;
    const size = values.length * 2;
    this.keys = new Uint32Array(size * 2);
    this.values = new Int32Array(size).fill(NONE);
    this.mask = size - 1;
    this.shift = EMPTY_SHIFT - Math.log2(size);
    this.count = 0;
    for (let i = 0; i < values.length; i++) if (values[i] !== NONE) this.set(keys[2 * i]!, keys[2 * i + 1]!, values[i]!);
  }
}
