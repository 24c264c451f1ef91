// Samples of the last few minutes (TTFT, inter-token latency, decisions), for
// the dashboard's live percentiles and rates. Bounded in time and in count;
// percentiles are computed when asked, not per sample.

export interface Percentiles {
  count: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export class RecentSamples {
  private times: number[] = [];
  private values: number[] = [];
  private head = 0;

  constructor(
    private readonly windowMs: number,
    private readonly maxSamples: number,
  ) {}

  add(now: number, value: number): void {
    this.times.push(now);
    this.values.push(value);
    if (this.times.length - this.head > this.maxSamples) this.head++;
    this.compact();
  }

  /** Samples since `since` (ms). */
  countSince(now: number, sinceMs: number): number {
    this.expire(now);
    let n = 0;
    for (let i = this.times.length - 1; i >= this.head && this.times[i]! >= now - sinceMs; i--) n++;
    return n;
  }

  percentiles(now: number): Percentiles {
    this.expire(now);
    const sorted = this.values.slice(this.head).sort((a, b) => a - b);
    const at = (q: number) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!);
    return { count: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99) };
  }

  private expire(now: number): void {
    while (this.head < this.times.length && this.times[this.head]! < now - this.windowMs) this.head++;
    this.compact();
  }

  // Drops the expired front once it is half the arrays, so each sample is moved O(1) times.
  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.values = this.values.slice(this.head);
      this.head = 0;
    }
  }
}
