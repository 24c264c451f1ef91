// The engine blocks an infinite cache holds, for prompts made of trace
// blocks, read from their hash ids without writing a token. Such a prompt is
// a function of its ids: the tokens of engine block j (tokens [j*bs,
// (j+1)*bs)) are fixed by j and by the ids of every trace block up to the
// one holding its last token. So two prompts share their first j+1 engine
// blocks exactly when they share j and those ids. And a prompt computing
// engine block j computes every block before it, so per chain of ids the
// cache need only remember the highest engine block computed under it. The
// ideal-reuse pass over a long trace then reads a few hundred thousand ids
// instead of a few hundred million tokens.
import { U64Map } from '../mocker/u64-map.js';
import { mix32 as fmix } from './random.js';
import type { TraceBlocks } from './workload.js';

const TWO_32 = 4294967296;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

// The chain hash runs two independent 32-bit lanes, each absorbing 32-bit words murmur-style.
function absorb1(h: number, word: number): number {
  return Math.imul(rotl(h ^ Math.imul(word, 0xcc9e2d51), 15), 5) + 0xe6546b64;
}

function absorb2(h: number, word: number): number {
  return Math.imul(rotl(h ^ Math.imul(word, 0x1b873593), 13), 0x27d4eb2f) + 0x165667b1;
}

/**
 * Walks a trace prompt's engine blocks in order, holding the chain hash
 * (lo, hi) of the namespace, the trace block size and the ids of every trace
 * block up to the one that holds the current engine block's last token.
 */
class TraceChain {
  lo: number;
  hi: number;
  /** The trace block the chain ends at. */
  group = -1;
  private readonly ids: readonly number[];
  private readonly traceBlock: number;

  constructor(
    trace: TraceBlocks,
    private readonly blockSize: number,
  ) {
    this.ids = trace.hashIds;
    this.traceBlock = trace.blockSize;
    // The same ids cut at another trace block size are other tokens.
    this.lo = fmix(trace.namespace ^ 0x74726163 ^ Math.imul(this.traceBlock, 0x9e3779b1));
    this.hi = fmix(trace.namespace ^ 0x626c6b73 ^ Math.imul(this.traceBlock, 0x85ebca6b));
  }

  /** Moves to engine block j (called with j ascending); true when the chain moved on to a later trace block. */
  advance(j: number): boolean {
    const last = Math.floor(((j + 1) * this.blockSize - 1) / this.traceBlock);
    if (last === this.group) return false;
    while (this.group < last) {
      const id = this.ids[++this.group]!;
      const idLo = id >>> 0;
      const idHi = Math.floor(id / TWO_32) >>> 0;
      const a = absorb1(absorb1(this.lo, idLo), idHi);
      const c = absorb2(absorb2(this.hi, idLo), idHi);
      this.lo = fmix(a ^ rotl(c, 11));
      this.hi = fmix(c ^ Math.imul(this.group + 1, 0x9e3779b1));
    }
    return true;
  }
}

export class TracePrefixes {
  /** Chain of (namespace, trace block size, ids 0..b) -> the highest engine block computed whose last token is in block b. */
  private readonly highest = new U64Map(1 << 14);

  constructor(private readonly blockSize: number) {}

  /**
   * The engine blocks of the prompt (its first `length` tokens) found
   * computed, as a leading run of at most `limit`; then records every full
   * engine block of the prompt as computed.
   */
  take(trace: TraceBlocks, length: number, limit: number): number {
    const blocks = Math.floor(length / this.blockSize);
    const chain = new TraceChain(trace, this.blockSize);
    let hits = 0;
    let matching = true;
    let known = -1; // the highest engine block an earlier prompt computed under the chain
    for (let j = 0; j < blocks; j++) {
      const { lo, hi } = chain;
      if (chain.advance(j)) {
        if (j > 0) this.record(lo, hi, j - 1);
        known = this.highest.get(chain.lo, chain.hi);
      }
      if (matching && j < limit && j <= known) hits++;
      else matching = false;
    }
    if (blocks > 0) this.record(chain.lo, chain.hi, blocks - 1);
    return hits;
  }

  private record(lo: number, hi: number, block: number): void {
    if (this.highest.get(lo, hi) < block) this.highest.set(lo, hi, block);
  }
}

/**
 * Chained hashes of the prompt's full engine blocks, from its ids: block j's
 * hash names j and the chain its last token falls in, so equal hashes mean
 * equal prefixes, as the engine needs. The engine would otherwise write out
 * and hash every prompt token.
 */
export function traceBlockHashes(trace: TraceBlocks, length: number, blockSize: number): BigUint64Array {
  const blocks = Math.floor(length / blockSize);
  const out = new BigUint64Array(blocks);
  const halves = new Uint32Array(out.buffer);
  const chain = new TraceChain(trace, blockSize);
  for (let j = 0; j < blocks; j++) {
    chain.advance(j);
    halves[2 * j] = fmix(absorb1(chain.lo, j) ^ blockSize);
    halves[2 * j + 1] = fmix(absorb2(chain.hi, j) ^ Math.imul(blockSize, 0x85ebca6b));
  }
  return out;
}
