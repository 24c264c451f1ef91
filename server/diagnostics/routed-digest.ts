// Whether a worker rank's engine tokenizes like the router: the router keeps
// the block hashes of prompts it routed to the rank (a bounded set), and the
// engine's stored blocks, re-hashed at the router's block size, must hit one
// of them sooner or later. An engine whose tokenizer or chat template differs
// stores blocks that never do. Once a hit is seen the rank is confirmed and
// the digest stops costing anything.

/** Prompt blocks remembered per routed request (a prompt's head is where its blocks are stored first). */
const BLOCKS_PER_REQUEST = 256;
/** Block hashes remembered per rank, oldest forgotten first. */
const DIGEST_LIMIT = 8192;
/** Routed requests and checked stores it takes, with no hit, to call the tokenizer different. */
export const MIN_ROUTED = 4;
export const MIN_CHECKED_STORES = 8;

export class RoutedDigest {
  private readonly hashes = new Set<bigint>();
  private routedCount = 0;
  private checked = 0;
  private hit = false;

  /** True once an engine store reproduced a routed block: nothing more to check. */
  get confirmed(): boolean {
    return this.hit;
  }

  /** Requests routed (while unconfirmed) and stores checked without a hit. */
  get evidence(): { routed: number; unmatchedStores: number } {
    return { routed: this.routedCount, unmatchedStores: this.checked };
  }

  /** Whether the engine's stores, so far, say its tokens differ from the router's. */
  get differs(): boolean {
    return !this.hit && this.routedCount >= MIN_ROUTED && this.checked >= MIN_CHECKED_STORES;
  }

  /** Whether a store should be hashed and checked: only while unconfirmed and after something was routed. */
  get wantsStores(): boolean {
    return !this.hit && this.routedCount > 0;
  }

  routed(local: BigUint64Array): void {
    if (this.hit) return;
    this.routedCount++;
    const n = Math.min(local.length, BLOCKS_PER_REQUEST);
    for (let i = 0; i < n; i++) this.hashes.add(local[i]!);
    if (this.hashes.size > DIGEST_LIMIT) {
      let excess = this.hashes.size - DIGEST_LIMIT;
      for (const h of this.hashes) {
        if (excess-- <= 0) break;
        this.hashes.delete(h);
      }
    }
  }

  /** One stored event's blocks, hashed as the router hashes prompts. */
  stored(local: BigUint64Array): void {
    if (!this.wantsStores) return;
    for (let i = 0; i < local.length; i++) {
      if (this.hashes.has(local[i]!)) {
        this.hit = true;
        this.hashes.clear();
        return;
      }
    }
    this.checked++;
  }
}
