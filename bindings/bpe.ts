// Byte-pair encoding on the wasm core (assembly/bpe.ts): tiktoken's encode of
// text that holds no special token, at a cost linear in the pieces plus
// O(n log n) in the length of the longest one.
//
// The pre-tokenizer: o200k_base's, Qwen2/3's and Llama 3's are written out
// in the core (assembly/bpe-split.ts, bpe-split-hf.ts), so text goes in and
// token ids come out; any other pattern
// runs here as the encoding's own regular expression (so pieces are cut
// exactly where tiktoken cuts them), and only where pieces end crosses into
// the core. Text goes in batches of whole pieces, so the core's buffers grow
// with the longest piece, not with the text.
import { Core, CoreAbort } from './core.js';
import { vocabularyProblem, type BpeVocabulary, type MergeList } from './bpe-vocabulary.js';

export type { BpeVocabulary, MergeList } from './bpe-vocabulary.js';

/** The core's bpe* exports. */
export interface BpeExports {
  bpeVocabInput(count: number, bytes: number): number;
  bpeVocabBuild(count: number, bytes: number): number;
  bpeMergesInput(count: number): number;
  bpeMergesBuild(count: number, whole: number): number;
  bpeTextInput(bytes: number): number;
  bpePieceInput(count: number): number;
  bpeOutPtr(): number;
  bpeEncode(bytes: number, pieces: number): number;
  bpeEncodeText(bytes: number, more: number): number;
  bpeTakenUnits(): number;
  bpeSplit(bytes: number): number;
  bpeSplitPattern(which: number): void;
  bpeTune(window: number, margin: number): void;
  bpeSpliceTune(window: number, context: number): void;
  bpeLongPieces(mode: number): void;
  bpeStats(which: number): number;
}

export interface BpeOptions {
  core?: Core;
  /**
   * Bytes per window (and bytes of context past it) that pieces longer than a
   * window are merged in; the ids never depend on them (default 16384, 256).
   * Tests shrink them to exercise the windowed path on short pieces.
   */
  window?: { bytes: number; margin: number };
  /**
   * Bytes per window (2..128) and bytes of context past each window's cut
   * that long pieces are merged in when spliced (default 64, 8); the ids never
   * depend on them. Tests shrink them so cuts fail their check and windows
   * are merged again wider, or pieces refused.
   */
  splice?: { bytes: number; context: number };
  /**
   * UTF-16 units of text handed to the core's pre-tokenizer at a time (more
   * when one piece is longer); the ids never depend on it (default 65536).
   * Tests shrink it to cut text between batches often.
   */
  batchUnits?: number;
  /**
   * How pieces over 16 bytes are merged: `'chosen'` (default) each the way
   * that suits it (the backtracking encoder for pieces of few distinct byte
   * pairs, else spliced windows), `'heap'` all by the heap merge,
   * `'backtrack'` all by the backtracking encoder (where the vocabulary allows
   * it; else the heap), `'splice'` all in spliced windows. A piece the splice
   * refuses takes the heap. The ids never depend on it; tests force each way.
   */
  longPieces?: LongPieces;
}

export type LongPieces = 'chosen' | 'heap' | 'backtrack' | 'splice';
const LONG_PIECES: Record<LongPieces, number> = { chosen: 0, heap: 1, backtrack: 2, splice: 3 };

export interface BpeStats {
  /** Windows long pieces were merged in. */
  windows: number;
  /** Long pieces merged again with wider windows because a cut failed its check. */
  widenings: number;
  /** Pieces the backtracking encoder encoded. */
  backtracked: number;
  /** Whether the vocabulary passed the backtracking encoder's checks (else long pieces all take the heap). */
  backtracking: boolean;
  /** Pieces merged in spliced windows. */
  spliced: number;
  /** Pieces the splice refused (a cut failed its check again after widening), merged by the heap instead. */
  spliceRefused: number;
  /** Spliced windows merged again twice as wide (a cut failed its check, or found no boundary). */
  spliceWidenings: number;
}

/** Pieces are handed over once this many UTF-16 units or pieces have gathered. */
const BATCH_UNITS = 1 << 16;
const BATCH_PIECES = 1 << 14;
/** Marks a stretch of text the pattern does not match (no tokens). */
const GAP = 0x80000000;
/** The o200k_base pattern, which the core's own pre-tokenizer implements. */
export const O200K_PATTERN = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

/**
 * Qwen2/Qwen3's and Llama 3's Split regexes as router/tokenize/onig-pattern.ts
 * rewrites them from Oniguruma, which the core also implements
 * (assembly/bpe-split-hf.ts).
 */
export const QWEN_PATTERN = String.raw`(?:'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\p{White_Space}\p{L}\p{N}]+[\r\n]*|\p{White_Space}*[\r\n]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+`;
export const LLAMA3_PATTERN = QWEN_PATTERN.replace(String.raw`|\p{N}|`, String.raw`|\p{N}{1,3}|`);
/** The patterns the core cuts text by, by their bpeSplitPattern number. */
const CORE_PATTERNS = [O200K_PATTERN, QWEN_PATTERN, LLAMA3_PATTERN];

const utf8 = new TextEncoder();

export class BytePairEncoder {
  readonly core: Core;
  private readonly k: BpeExports;
  private readonly sticky: RegExp;
  private readonly search: RegExp;
  private readonly ends = new Uint32Array(BATCH_PIECES);
  /** Whether the core cuts the pieces (the pattern is one it implements: CORE_PATTERNS). */
  private readonly splitsInCore: boolean;
  private readonly batchUnits: number;
  /** What marks text between matches: GAP (skipped) or nothing (encoded as a piece). */
  private readonly gapMark: number;

  constructor(vocab: BpeVocabulary, options: BpeOptions = {}) {
    const problem = vocabularyProblem(vocab);
    if (problem !== undefined) throw new RangeError(`byte-pair vocabulary: ${problem}`);
    const batch = options.batchUnits ?? BATCH_UNITS;
    if (!Number.isInteger(batch) || batch < 2 || batch > 1 << 24) throw new RangeError(`batchUnits must be an integer in 2..16777216 (got ${batch})`);
    this.batchUnits = batch;
    // The sticky twin of the pattern reports where each piece ends without building a match
    // object; the searching one finds the next piece after text no alternative matches.
    this.sticky = new RegExp(vocab.pattern, 'uy');
    this.search = new RegExp(vocab.pattern, 'ug');
    this.gapMark = vocab.gaps === 'encode' ? 0 : GAP;
    // These patterns leave no text between matches, so the gaps setting does not matter.
    const corePattern = CORE_PATTERNS.indexOf(vocab.pattern);
    this.splitsInCore = corePattern >= 0;
    this.core = options.core ?? new Core();
    this.core.claim('bpe');
    this.k = this.core.kernel<BpeExports>();
    const count = vocab.ranks.length;
    const at = this.k.bpeVocabInput(count, vocab.bytes.length);
    this.core.u32(at, count + 1).set(vocab.offsets);
    this.core.u32(at + 4 * (count + 1), count).set(vocab.ranks);
    this.core.u8(at + 4 * (2 * count + 1), vocab.bytes.length).set(vocab.bytes);
    if (this.k.bpeVocabBuild(count, vocab.bytes.length) === 0) throw new RangeError('byte-pair vocabulary: two tokens have the same bytes');
    if (vocab.merges !== undefined) this.loadMerges(vocab.merges);
    if (this.splitsInCore) this.k.bpeSplitPattern(corePattern);
    if (options.window !== undefined) {
      const { bytes, margin } = options.window;
      if (!Number.isInteger(bytes) || bytes < 1 || bytes > 1 << 24) throw new RangeError(`window.bytes must be an integer in 1..16777216 (got ${bytes})`);
      if (!Number.isInteger(margin) || margin < 0 || margin > 1 << 24) throw new RangeError(`window.margin must be an integer in 0..16777216 (got ${margin})`);
      this.k.bpeTune(bytes, margin);
    }
    if (options.splice !== undefined) {
      const { bytes, context } = options.splice;
      if (!Number.isInteger(bytes) || bytes < 2 || bytes > 128) throw new RangeError(`splice.bytes must be an integer in 2..128 (got ${bytes})`);
      if (!Number.isInteger(context) || context < 0 || context >= bytes) throw new RangeError(`splice.context must be an integer in 0..splice.bytes - 1 (got ${context})`);
      this.k.bpeSpliceTune(bytes, context);
    }
    const longPieces = options.longPieces ?? 'chosen';
    if (!Object.hasOwn(LONG_PIECES, longPieces)) throw new RangeError(`longPieces must be 'chosen', 'heap', 'backtrack' or 'splice' (got ${String(longPieces)})`);
    this.k.bpeLongPieces(LONG_PIECES[longPieces]);
  }

  private loadMerges(merges: MergeList): void {
    const count = merges.entries.length / 3;
    if (!Number.isInteger(count)) throw new RangeError('merge list: entries must hold 3 numbers per merge');
    this.core.u32(this.k.bpeMergesInput(count), 3 * count).set(merges.entries);
    if (this.k.bpeMergesBuild(count, merges.wholeWords ? 1 : 0) === 0) {
      throw new RangeError('merge list: a merge names no token, splits one at 0 or 255+ bytes, has an index past the ranks or another token\'s, or repeats another merge');
    }
  }

  /** Counters of the long-piece paths since this encoder's core started. */
  stats(): BpeStats {
    const stat = (which: number) => this.k.bpeStats(which) >>> 0;
    return { windows: stat(0), widenings: stat(1), backtracked: stat(2), backtracking: stat(3) === 1, spliced: stat(4), spliceRefused: stat(5), spliceWidenings: stat(6) };
  }

  /** Token ids of `text`, which must hold no special token (they would be encoded as plain text). */
  encode(text: string): Uint32Array {
    if (typeof text !== 'string') throw new TypeError('text must be a string');
    const ids = new IdList(text.length);
    if (this.splitsInCore) this.encodeInCore(text, ids);
    else this.encodeByPattern(text, ids);
    return ids.take();
  }

  /**
   * Where the core's pre-tokenizer ends each piece of `text`, as UTF-8 byte
   * offsets (for checking it against the pattern); undefined for patterns the
   * core does not implement.
   */
  pieceEnds(text: string): Uint32Array | undefined {
    if (!this.splitsInCore) return undefined;
    const bytes = this.writeText(text, 0, text.length);
    const count = this.k.bpeSplit(bytes);
    return this.core.u32(this.k.bpePieceInput(0), count).slice();
  }

  private encodeInCore(text: string, ids: IdList): void {
    let from = 0;
    let units = this.batchUnits;
    while (from < text.length) {
      let end = Math.min(text.length, from + units);
      // A surrogate pair cut in two would encode as two replacement characters.
      if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end--;
      const more = end < text.length;
      const n = this.k.bpeEncodeText(this.writeText(text, from, end), more ? 1 : 0);
      ids.add(this.core.u32(this.k.bpeOutPtr(), n));
      const taken = more ? this.k.bpeTakenUnits() : end - from;
      // A piece longer than the batch: the next batch is much wider, so a long piece is scanned about once.
      units = taken === 0 ? 16 * units : this.batchUnits;
      from += taken;
    }
  }

  /** Writes text[from..end) as UTF-8 to the core's text buffer; returns its byte count. */
  private writeText(text: string, from: number, end: number): number {
    const units = end - from;
    // UTF-8 takes at most 3 bytes per UTF-16 unit (a surrogate pair: 4 for 2).
    const ptr = this.k.bpeTextInput(3 * units);
    const { read, written } = utf8.encodeInto(from === 0 && end === text.length ? text : text.substring(from, end), this.core.u8(ptr, 3 * units));
    if (read !== units) throw new CoreAbort(`byte-pair text buffer took ${read} of ${units} units`);
    return written;
  }

  /**
   * Token ids of `text` cut into pieces by the caller (a pre-tokenizer the
   * pattern cannot express): `ends` are the pieces' ends as UTF-16 offsets,
   * increasing, the last one text.length. Holds no special token.
   */
  encodePieces(text: string, ends: ArrayLike<number>): Uint32Array {
    const ids = new IdList(text.length);
    let k = 0;
    this.batchPieces(text, ids, () => ends[k++]!);
    return ids.take();
  }

  private encodeByPattern(text: string, ids: IdList): void {
    const sticky = this.sticky;
    this.batchPieces(text, ids, (at) => {
      sticky.lastIndex = at;
      const matched = sticky.test(text);
      if (matched && sticky.lastIndex > at) return sticky.lastIndex;
      // No alternative matches here: the text up to the next match is a gap. An empty
      // match only marks a boundary, so the next match is looked for a character on.
      this.search.lastIndex = matched ? at + (isHighSurrogate(text.charCodeAt(at)) ? 2 : 1) : at;
      const next = this.search.exec(text);
      return (next === null ? text.length : next.index) | this.gapMark;
    });
  }

  /**
   * Encodes `text` piece by piece into ids, the pieces handed to the core in
   * batches; `next(at)` is the end of the piece from `at` (GAP set: text no
   * piece covers).
   */
  private batchPieces(text: string, ids: IdList, next: (at: number) => number): void {
    let batchStart = 0;
    let pieces = 0;
    const flush = (end: number) => {
      const n = this.encodeBatch(text, batchStart, end, pieces);
      ids.add(this.core.u32(this.k.bpeOutPtr(), n));
      batchStart = end;
      pieces = 0;
    };
    let at = 0;
    while (at < text.length) {
      const end = next(at);
      const from = at;
      at = end & ~GAP;
      if (!(at > from && at <= text.length)) throw new RangeError(`piece ends must increase up to the text's length (got ${at} after ${from})`);
      this.ends[pieces++] = (at - batchStart) | (end & GAP);
      if (pieces === BATCH_PIECES || at - batchStart >= BATCH_UNITS) flush(at);
    }
    if (pieces > 0) flush(at);
  }

  private encodeBatch(text: string, start: number, end: number, pieces: number): number {
    const bytes = this.writeText(text, start, end);
    const piecePtr = this.k.bpePieceInput(pieces);
    this.core.u32(piecePtr, pieces).set(this.ends.subarray(0, pieces));
    return this.k.bpeEncode(bytes, pieces);
  }
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit < 0xdc00;
}

/** Token ids gathered batch by batch into one growing array. */
class IdList {
  private ids: Uint32Array;
  private length = 0;

  constructor(units: number) {
    this.ids = new Uint32Array(Math.max(16, units >>> 1));
  }

  /** Appends a copy of `batch` (a view of the core's memory, valid until the next core call). */
  add(batch: Uint32Array): void {
    if (this.length + batch.length > this.ids.length) {
      const grown = new Uint32Array(Math.max(this.length + batch.length, 2 * this.ids.length));
      grown.set(this.ids.subarray(0, this.length));
      this.ids = grown;
    }
    this.ids.set(batch, this.length);
    this.length += batch.length;
  }

  take(): Uint32Array {
    return this.ids.slice(0, this.length);
  }
}
