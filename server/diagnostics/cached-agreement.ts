// Whether an engine's reported cached tokens (usage.prompt_tokens_details.
// cached_tokens) agree with the overlap the router predicted when it chose the
// worker, over a window of recent responses. Some disagreement is normal (an
// event still in flight when the next request was routed, an eviction since);
// most of a window disagreeing is not.

/** Responses judged together. */
const WINDOW = 32;
/** Responses it takes before the window says anything. */
export const MIN_SAMPLES = 8;

/**
 * The difference allowed: one block (engines count whole blocks, and recompute
 * at least the last prompt token when all of it is cached) plus a fraction of
 * the prompt.
 */
export function tolerance(promptTokens: number, blockSize: number, fraction: number): number {
  return blockSize + Math.ceil(fraction * promptTokens);
}

export class CachedAgreement {
  private readonly disagreed: boolean[] = [];
  private next = 0;
  /** Responses that reported cached tokens, and how many of them disagreed beyond the tolerance. */
  samples = 0;
  disagreements = 0;

  constructor(
    private readonly blockSize: number,
    private readonly fraction: number,
  ) {}

  /** Records one response; returns whether it disagreed. */
  add(predicted: number, reported: number, promptTokens: number): boolean {
    const off = Math.abs(predicted - reported) > tolerance(promptTokens, this.blockSize, this.fraction);
    if (this.disagreed.length < WINDOW) this.disagreed.push(off);
    else this.disagreed[this.next] = off;
    this.next = (this.next + 1) % WINDOW;
    this.samples++;
    if (off) this.disagreements++;
    return off;
  }

  /** More than half of the recent window disagreed (with enough of a window to say). */
  get differs(): boolean {
    if (this.disagreed.length < MIN_SAMPLES) return false;
    return this.disagreed.filter(Boolean).length * 2 > this.disagreed.length;
  }
}
