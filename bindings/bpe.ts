// Byte-pair encoding on the wasm core (assembly/bpe.ts): tiktoken's encode of
// text that holds no special token, at a cost linear in the pieces plus
// O(n log n) in the length of the longest one.
//
// The pre-tokenizer runs here, as the encoding's own regular expression (so
// pieces are cut exactly where tiktoken cuts them); only where pieces end
// crosses into the core. Text goes in batches of whole pieces, so the core's
// buffers grow with the longest piece, not with the text.
import { Core, CoreAbort } from './core.js';
import { vocabularyProblem, type BpeVocabulary } from './bpe-vocabulary.js';

export type { BpeVocabulary } from './bpe-vocabulary.js';

/** The core's bpe* exports. */
export interface BpeExports {
  bpeVocabInput(count: number, bytes: number): number;
  bpeVocabBuild(count: number, bytes: number): number;
  bpeTextInput(bytes: number): number;
  bpePieceInput(count: number): number;
  bpeOutPtr(): number;
  bpeEncode(bytes: number, pieces: number): number;
  bpeTune(window: number, margin: number): void;
  bpeStats(which: number): number;
}

export interface BpeOptions {
  core?: Core;
  /**
   * Bytes per window (and bytes of context past it) that pieces longer than a
   * window are merged in; the ids never depend on them (default 16384, 512).
   * Tests shrink them to exercise the windowed path on short pieces.
   */
  window?: { bytes: number; margin: number };
}

export interface BpeStats {
  /** Windows long pieces were merged in. */
  windows: number;
  /** Long pieces merged again with wider windows because a cut failed its check. */
  widenings: number;
}

/** Pieces are handed over once this many UTF-16 units or pieces have gathered. */
const BATCH_UNITS = 1 << 16;
const BATCH_PIECES = 1 << 14;
/** Marks a stretch of text the pattern does not match (no tokens). */
const GAP = 0x80000000;

const utf8 = new TextEncoder();

export class BytePairEncoder {
  readonly core: Core;
  private readonly k: BpeExports;
  private readonly sticky: RegExp;
  private readonly search: RegExp;
  private readonly ends = new Uint32Array(BATCH_PIECES);

  constructor(vocab: BpeVocabulary, options: BpeOptions = {}) {
    const problem = vocabularyProblem(vocab);
    if (problem !== undefined) throw new RangeError(`byte-pair vocabulary: ${problem}`);
    // The sticky twin of the pattern reports where each piece ends without building a match
    // object; the searching one finds the next piece after text no alternative matches.
    this.sticky = new RegExp(vocab.pattern, 'uy');
    this.search = new RegExp(vocab.pattern, 'ug');
    this.core = options.core ?? new Core();
    this.core.claim('bpe');
    this.k = this.core.kernel<BpeExports>();
    const count = vocab.ranks.length;
    const at = this.k.bpeVocabInput(count, vocab.bytes.length);
    this.core.u32(at, count + 1).set(vocab.offsets);
    this.core.u32(at + 4 * (count + 1), count).set(vocab.ranks);
    this.core.u8(at + 4 * (2 * count + 1), vocab.bytes.length).set(vocab.bytes);
    if (this.k.bpeVocabBuild(count, vocab.bytes.length) === 0) throw new RangeError('byte-pair vocabulary: two tokens have the same bytes');
    if (options.window !== undefined) {
      const { bytes, margin } = options.window;
      if (!Number.isInteger(bytes) || bytes < 1 || bytes > 1 << 24) throw new RangeError(`window.bytes must be an integer in 1..16777216 (got ${bytes})`);
      if (!Number.isInteger(margin) || margin < 0 || margin > 1 << 24) throw new RangeError(`window.margin must be an integer in 0..16777216 (got ${margin})`);
      this.k.bpeTune(bytes, margin);
    }
  }

  /** Counters of the windowed path since this encoder's core started. */
  stats(): BpeStats {
    return { windows: this.k.bpeStats(0) >>> 0, widenings: this.k.bpeStats(1) >>> 0 };
  }

  /** Token ids of `text`, which must hold no special token (they would be encoded as plain text). */
  encode(text: string): Uint32Array {
    if (typeof text !== 'string') throw new TypeError('text must be a string');
    let ids = new Uint32Array(Math.max(16, text.length >>> 1));
    let written = 0;
    let batchStart = 0;
    let pieces = 0;
    const flush = (end: number) => {
      const n = this.encodeBatch(text, batchStart, end, pieces);
      if (written + n > ids.length) {
        const grown = new Uint32Array(Math.max(written + n, 2 * ids.length));
        grown.set(ids.subarray(0, written));
        ids = grown;
      }
      ids.set(this.core.u32(this.k.bpeOutPtr(), n), written);
      written += n;
      batchStart = end;
      pieces = 0;
    };
    const sticky = this.sticky;
    let at = 0;
    while (at < text.length) {
      sticky.lastIndex = at;
      if (sticky.test(text)) {
        at = sticky.lastIndex;
        this.ends[pieces++] = at - batchStart;
      } else {
        // No alternative matches here: tiktoken skips to the next match.
        this.search.lastIndex = at;
        const next = this.search.exec(text);
        at = next === null ? text.length : next.index;
        this.ends[pieces++] = (at - batchStart) | GAP;
      }
      if (pieces === BATCH_PIECES || at - batchStart >= BATCH_UNITS) flush(at);
    }
    if (pieces > 0) flush(at);
    return ids.slice(0, written);
  }

  private encodeBatch(text: string, start: number, end: number, pieces: number): number {
    const units = end - start;
    // UTF-8 takes at most 3 bytes per UTF-16 unit (a surrogate pair: 4 for 2).
    const ptr = this.k.bpeTextInput(3 * units);
    const piecePtr = this.k.bpePieceInput(pieces);
    this.core.u32(piecePtr, pieces).set(this.ends.subarray(0, pieces));
    const { read, written } = utf8.encodeInto(start === 0 && end === text.length ? text : text.substring(start, end), this.core.u8(ptr, 3 * units));
    if (read !== units) throw new CoreAbort(`byte-pair text buffer took ${read} of ${units} units`);
    return this.k.bpeEncode(written, pieces);
  }
}
