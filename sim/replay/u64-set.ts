// A set of 64-bit block hashes kept as (lo, hi) u32 pairs in open addressing.
// The ideal-reuse pass checks about a million hashes per trace replay; a
// Set<bigint> spends most of its time hashing and allocating BigInts, this
// reads the halves straight from the hash arrays.
import { mix32 } from './random.js';

export class U64Set {
  private slots: Uint32Array;
  /** 1 where a slot holds a value (any pair of halves, zero included, is a valid hash). */
  private used: Uint8Array;
  private mask: number;
  private count = 0;

  constructor(capacity = 1024) {
    let size = 16;
    while (size < capacity * 2) size *= 2;
    this.slots = new Uint32Array(size * 2);
    this.used = new Uint8Array(size);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count;
  }

  has(lo: number, hi: number): boolean {
    for (let i = mix32((lo ^ Math.imul(hi, 0x9e3779b1)) >>> 0) & this.mask; this.used[i]; i = (i + 1) & this.mask) {
      if (this.slots[2 * i] === lo && this.slots[2 * i + 1] === hi) return true;
    }
    return false;
  }

  /** Adds the value; false when it was already there. */
  add(lo: number, hi: number): boolean {
    let i = mix32((lo ^ Math.imul(hi, 0x9e3779b1)) >>> 0) & this.mask;
    for (; this.used[i]; i = (i + 1) & this.mask) {
      if (this.slots[2 * i] === lo && this.slots[2 * i + 1] === hi) return false;
    }
    this.used[i] = 1;
    this.slots[2 * i] = lo;
    this.slots[2 * i + 1] = hi;
    if (++this.count * 2 > this.mask + 1) this.grow();
    return true;
  }

  private grow(): void {
    const { slots, used } = this;
    this.slots = new Uint32Array(slots.length * 2);
    this.used = new Uint8Array(used.length * 2);
    this.mask = used.length * 2 - 1;
    this.count = 0;
    for (let i = 0; i < used.length; i++) if (used[i]) this.add(slots[2 * i]!, slots[2 * i + 1]!);
  }
}
