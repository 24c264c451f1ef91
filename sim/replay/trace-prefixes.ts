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
    const { hashIds, namespace } = trace;
    const traceBlock = trace.blockSize;
    const bs = this.blockSize;
    const blocks = Math.floor(length / bs);
    // The same ids cut at another trace block size are other tokens.
    let lo = fmix(namespace ^ 0x74726163 ^ Math.imul(traceBlock, 0x9e3779b1));
    let hi = fmix(namespace ^ 0x626c6b73 ^ Math.imul(traceBlock, 0x85ebca6b));
    let hits = 0;
    let matching = true;
    let group = -1; // the trace block whose chain (lo, hi) is
    let known = -1; // the highest engine block an earlier prompt computed under that chain
    for (let j = 0; j < blocks; j++) {
      const last = Math.floor(((j + 1) * bs - 1) / traceBlock);
      if (last !== group) {
        if (group >= 0) this.record(lo, hi, j - 1);
        for (; group < last; ) {
          const id = hashIds[++group]!;
          const idLo = id >>> 0;
          const idHi = Math.floor(id / TWO_32) >>> 0;
          const a = absorb1(absorb1(lo, idLo), idHi);
          const c = absorb2(absorb2(hi, idLo), idHi);
          lo = fmix(a ^ rotl(c, 11));
          hi = fmix(c ^ Math.imul(group + 1, 0x9e3779b1));
        }
        known = this.highest.get(lo, hi);
      }
      if (matching && j < limit && j <= known) hits++;
      else matching = false;
    }
    if (group >= 0) this.record(lo, hi, blocks - 1);
    return hits;
  }

  private record(lo: number, hi: number, block: number): void {
    if (this.highest.get(lo, hi) < block) this.highest.set(lo, hi, block);
  }
}
