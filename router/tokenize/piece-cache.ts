// A bounded LRU from text (a prompt piece or a rendered message) to a value,
// bounded by the summed weight of its values (token ids, or characters).
//
// Lookups are keyed by a fingerprint of the text: its length and a strided
// sample of its characters, so hashing a 100 KB piece reads ~100 characters
// instead of all of them. A fingerprint is only a bucket: a hit is confirmed
// by comparing the stored text with `===` (a native memcmp), so two texts that
// share a fingerprint never share a value. Buckets hold a few texts at most.
// An optional short tag qualifies the text (e.g. the role of a message), so a
// long text can be keyed without concatenating a copy of it.

interface Entry<V> {
  text: string;
  tag: string;
  value: V;
  weight: number;
}

/** Texts kept per fingerprint; more only happens with crafted input. */
const BUCKET_LIMIT = 4;
/** Characters sampled across the text, plus every one of the last TAIL. */
const SAMPLES = 64;
const TAIL = 16;

export function fingerprint(text: string): number {
  const n = text.length;
  let h = Math.imul(n ^ 0x9e3779b9, 0x85ebca6b);
  const step = n > SAMPLES ? Math.floor(n / SAMPLES) : 1;
  for (let i = 0; i < n; i += step) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  for (let i = Math.max(0, n - TAIL); i < n; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x5bd1e995);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return h ^ (h >>> 13);
}

/**
 * A copy of `text` that does not keep its parent alive: substrings of a
 * rendered prompt are slices that would otherwise pin the whole prompt in
 * the cache. Concatenating forces a flat copy, and the slice of that copy
 * retains only the copy.
 */
export function detached(text: string): string {
  return (text + ' ').slice(0, -1);
}

export class TextCache<V> {
  private readonly buckets = new Map<number, Entry<V>[]>();
  private total = 0;
  hits = 0;
  misses = 0;

  constructor(
    private readonly capacity: number,
    private readonly weigh: (value: V) => number,
  ) {
    if (!Number.isFinite(capacity) || capacity < 0) throw new RangeError(`cache capacity must be a non-negative number (got ${capacity})`);
  }

  /** Summed weight of the cached values. */
  get weight(): number {
    return this.total;
  }

  /** Drops every entry and zeroes the counters. */
  clear(): void {
    this.buckets.clear();
    this.total = 0;
    this.hits = 0;
    this.misses = 0;
  }

  get(text: string, tag = ''): V | undefined {
    const fp = fingerprint(text) ^ fingerprint(tag);
    const bucket = this.buckets.get(fp);
    if (bucket !== undefined) {
      for (const entry of bucket) {
        if (entry.text === text && entry.tag === tag) {
          // Re-insert to make the bucket the most recently used.
          this.buckets.delete(fp);
          this.buckets.set(fp, bucket);
          this.hits++;
          return entry.value;
        }
      }
    }
    this.misses++;
    return undefined;
  }

  /**
   * Stores a value; one heavier than the whole capacity is not kept. The text
   * is copied (see detached) unless `owned`: a caller that hands over a text
   * no other string lives inside, and looks it up again by that same string,
   * gets a hit without its characters being compared.
   */
  set(text: string, value: V, tag = '', owned = false): void {
    const weight = this.weigh(value);
    if (weight > this.capacity) return;
    const fp = fingerprint(text) ^ fingerprint(tag);
    let bucket = this.buckets.get(fp);
    if (bucket === undefined) bucket = [];
    else this.buckets.delete(fp);
    const same = bucket.findIndex((e) => e.text === text && e.tag === tag);
    if (same >= 0) this.total -= bucket.splice(same, 1)[0]!.weight;
    bucket.unshift({ text: owned ? text : detached(text), tag, value, weight });
    while (bucket.length > BUCKET_LIMIT) this.total -= bucket.pop()!.weight;
    this.buckets.set(fp, bucket);
    this.total += weight;
    this.evict();
  }

  private evict(): void {
    for (const [fp, bucket] of this.buckets) {
      if (this.total <= this.capacity) return;
      this.buckets.delete(fp);
      for (const e of bucket) this.total -= e.weight;
    }
  }
}
