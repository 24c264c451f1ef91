// A small seeded generator for workload generators: the same seed gives the
// same workload on every machine, which Math.random cannot promise.

/** Finalising mix of 32-bit hashes: a bijection on u32 that spreads every input bit. */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Inclusive integer range [min, max]; a single number n means [n, n]. */
export type IntRange = number | readonly [number, number];

export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
    this.state = mix32(seed >>> 0 ^ 0x6a09e667) || 1;
  }

  /** Uniform u32 (splitmix32 step). */
  nextU32(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    return mix32(this.state);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform integer in the range. */
  int(range: IntRange): number {
    const [min, max] = typeof range === 'number' ? [range, range] : range;
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Exponentially distributed with the given mean (Poisson arrivals). */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** Standard normal (Box-Muller; one value per call, so the stream stays one draw pattern). */
  normal(): number {
    const u = 1 - this.next(); // (0, 1]: the logarithm stays finite
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  /** Log-normal with the given median and shape sigma (0: always the median); the heavier tail the larger sigma. */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** At least 1, geometrically distributed with the given mean (>= 1). */
  geometric(mean: number): number {
    if (mean <= 1) return 1;
    return 1 + Math.floor(Math.log(1 - this.next()) / Math.log(1 - 1 / mean));
  }

  /** An index into weights, drawn in proportion to them. */
  pick(weights: readonly number[]): number {
    let total = 0;
    for (const w of weights) total += w;
    let x = this.next() * total;
    for (let i = 0; i < weights.length - 1; i++) {
      x -= weights[i]!;
      if (x < 0) return i;
    }
    return weights.length - 1;
  }
}

/** Checks a range option: integers with min <= max, both >= lowest. */
export function checkIntRange(name: string, range: IntRange, lowest: number): void {
  const [min, max] = typeof range === 'number' ? [range, range] : range;
  if (!Number.isInteger(min) || !Number.isInteger(max) || min < lowest || max < min) {
    throw new RangeError(`${name} must be an integer >= ${lowest} or a range [min, max] of such integers with min <= max, got ${JSON.stringify(range)}`);
  }
}
