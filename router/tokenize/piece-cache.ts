// A bounded cache from text (a prompt piece or a rendered message) to a
// value, bounded by the summed weight of its values (token ids, or
// characters), evicting what has not been hit since the eviction hand last
// passed it (CLOCK, an approximation of least recently used).
//
// Lookups are keyed by a fingerprint of the text: every character of a short
// one, a strided sample of a long one's, so hashing a 100 KB piece reads a few
// hundred characters instead of all of them. A fingerprint is only a bucket: a
// hit is confirmed by comparing the stored text with `===` (a native memcmp),
// so two texts that share a fingerprint never share a value. Buckets hold a
// few texts at most. An optional short tag qualifies the text (e.g. the role
// of a message), so a long text can be keyed without concatenating a copy of
// it.
//
// A hit only marks its entry: moving it to the back of the map (delete, then
// set) would leave a deleted entry in its hash chain on every hit, and a hot
// key's chain would grow with every lookup until the map is next rebuilt.

interface Entry<V> {
  text: string;
  tag: string;
  value: V;
  weight: number;
  /** Hit since the eviction hand last passed it. */
  used: boolean;
  /** Still in the cache (an entry dropped stays in `recent` until written over). */
  live: boolean;
}

/**
 * Entries last hit, checked by comparing texts before any fingerprint: a
 * prompt's recurring parts (a system prompt, the generation prompt) come back
 * as equal or identical strings request after request, and comparing them
 * costs less than hashing them.
 */
const RECENT = 4;
/** Only texts this short are kept in `recent`: comparing two long texts of one length may read all of them. */
const RECENT_CHARS = 2048;

/** Texts kept per fingerprint; more only happens with crafted input. */
const BUCKET_LIMIT = 4;
/** Texts up to this long are hashed whole. */
const WHOLE = 512;
/** Characters sampled across the text, plus every one of the last TAIL. */
const SAMPLES = 256;
const TAIL = 16;

export function fingerprint(text: string): number {
  const n = text.length;
  let a = Math.imul(n ^ 0x9e3779b9, 0x85ebca6b);
  let b = a ^ 0x27d4eb2f;
  if (n <= WHOLE) {
    // Two lanes (even and odd characters) halve the chain of dependent multiplies.
    let i = 0;
    for (; i + 1 < n; i += 2) {
      a = Math.imul(a ^ text.charCodeAt(i), 0x01000193);
      b = Math.imul(b ^ text.charCodeAt(i + 1), 0x01000193);
    }
    if (i < n) a = Math.imul(a ^ text.charCodeAt(i), 0x01000193);
  } else {
    const step = Math.floor(n / SAMPLES);
    for (let i = 0; i < n; i += step) a = Math.imul(a ^ text.charCodeAt(i), 0x01000193);
    for (let i = n - TAIL; i < n; i++) b = Math.imul(b ^ text.charCodeAt(i), 0x5bd1e995);
  }
  let h = a ^ Math.imul(b ^ (b >>> 16), 0x5bd1e995);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return h ^ (h >>> 13);
}

/** The bucket of a text under a tag; the empty tag (most lookups) costs nothing to hash. */
function keyOf(text: string, tag: string): number {
  return tag.length === 0 ? fingerprint(text) : fingerprint(text) ^ fingerprint(tag);
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
  /** The eviction hand: a live iterator over the buckets, oldest first. */
  private hand: Iterator<[number, Entry<V>[]]> | null = null;
  private readonly recent: (Entry<V> | undefined)[] = new Array<Entry<V> | undefined>(RECENT).fill(undefined);
  private recentAt = 0;
  private total = 0;
  /**
   * The bucket key of the last short text missed: a miss is usually followed
   * by a set of the same text, which then needs no second fingerprint.
   * Texts of at most WHOLE characters only, so a long text is never pinned.
   */
  private missText: string | null = null;
  private missTag = '';
  private missKey = 0;
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
    this.hand = null;
    this.missText = null;
    this.recent.fill(undefined);
    this.total = 0;
    this.hits = 0;
    this.misses = 0;
  }

  get(text: string, tag = ''): V | undefined {
    for (const entry of this.recent) {
      if (entry !== undefined && entry.live && entry.text === text && entry.tag === tag) {
        entry.used = true;
        this.hits++;
        return entry.value;
      }
    }
    const key = keyOf(text, tag);
    const bucket = this.buckets.get(key);
    if (bucket !== undefined) {
      for (const entry of bucket) {
        if (entry.text === text && entry.tag === tag) {
          entry.used = true;
          this.hits++;
          if (text.length <= RECENT_CHARS) this.recent[this.recentAt++ % RECENT] = entry;
          return entry.value;
        }
      }
    }
    this.misses++;
    if (text.length <= WHOLE) {
      this.missText = text;
      this.missTag = tag;
      this.missKey = key;
    }
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
    const fp = this.missText === text && this.missTag === tag ? this.missKey : keyOf(text, tag);
    this.missText = null;
    let bucket = this.buckets.get(fp);
    if (bucket === undefined) {
      bucket = [];
      this.buckets.set(fp, bucket);
    }
    for (let i = 0; i < bucket.length; i++) {
      const e = bucket[i]!;
      if (e.text === text && e.tag === tag) {
        e.live = false;
        this.total -= e.weight;
        bucket.splice(i, 1);
        break;
      }
    }
    bucket.unshift({ text: owned ? text : detached(text), tag, value, weight, used: false, live: true });
    while (bucket.length > BUCKET_LIMIT) {
      const dropped = bucket.pop()!;
      dropped.live = false;
      this.total -= dropped.weight;
    }
    this.total += weight;
    this.evict();
  }

  /**
   * Moves the hand on until the weight is within bounds: an entry hit since
   * the hand last passed is spared (and unmarked), any other is dropped.
   */
  private evict(): void {
    // Every entry is spared at most once per turn of the hand, so this ends.
    while (this.total > this.capacity) {
      this.hand ??= this.buckets.entries();
      const next = this.hand.next();
      if (next.done === true) {
        this.hand = null;
        continue;
      }
      const [fp, bucket] = next.value;
      for (let i = bucket.length - 1; i >= 0; i--) {
        const e = bucket[i]!;
        if (e.used) e.used = false;
        else {
          e.live = false;
          bucket.splice(i, 1);
          this.total -= e.weight;
        }
      }
      if (bucket.length === 0) this.buckets.delete(fp);
    }
  }
}
