// Prompts' hash lists carved out of shared buffers: a typed array over a new
// ArrayBuffer costs about a microsecond (its memory is allocated outside the
// JS heap), several times the copy of a prompt's hashes, so the lists of many
// prompts share one buffer. A buffer is collected once no list in it is
// referenced; lists too large for a share of a slab get a buffer of their
// own, so a long-lived request pins at most one slab.

/** Bytes per shared buffer: the hash lists of 16 prompts of 8,192 tokens at block size 64. */
const SLAB_BYTES = 32 * 1024;
/** Lists of more bytes than this get a buffer of their own. */
const OWN_BUFFER_BYTES = SLAB_BYTES / 4;

export class HashSlab {
  private slab = new ArrayBuffer(SLAB_BYTES);
  private used = 0;

  /** Two lists of `count` u64 each, contiguous (the second right after the first), and the view over both. */
  pair(count: number): { both: BigUint64Array; first: BigUint64Array; second: BigUint64Array } {
    const bytes = 16 * count;
    let buffer: ArrayBuffer;
    let at = 0;
    if (bytes > OWN_BUFFER_BYTES) {
      buffer = new ArrayBuffer(bytes);
    } else {
      if (this.used + bytes > SLAB_BYTES) {
        this.slab = new ArrayBuffer(SLAB_BYTES);
        this.used = 0;
      }
      buffer = this.slab;
      at = this.used;
      this.used += bytes;
    }
    return {
      both: new BigUint64Array(buffer, at, 2 * count),
      first: new BigUint64Array(buffer, at, count),
      second: new BigUint64Array(buffer, at + 8 * count, count),
    };
  }
}
