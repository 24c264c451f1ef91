// Pure-TS twin of bindings/bpe.ts: tiktoken's encode as written, for
// differential tests. Each match of the pattern is one piece; a piece that is
// a token is that token, otherwise adjacent parts are merged, lowest rank
// first (the leftmost of equal ranks), while some pair is a token. Quadratic
// in a piece's length; obviously right rather than fast.
import { vocabularyProblem, type BpeVocabulary } from '../bpe-vocabulary.js';

const utf8 = new TextEncoder();

/** A byte string as a map key: one char per byte. */
function keyOf(bytes: Uint8Array, start: number, end: number): string {
  let key = '';
  for (let i = start; i < end; i++) key += String.fromCharCode(bytes[i]!);
  return key;
}

export class BytePairEncoderReference {
  private readonly ranks = new Map<string, number>();
  private readonly pattern: RegExp;

  constructor(vocab: BpeVocabulary) {
    const problem = vocabularyProblem(vocab);
    if (problem !== undefined) throw new RangeError(`byte-pair vocabulary: ${problem}`);
    for (let i = 0; i < vocab.ranks.length; i++) {
      const key = keyOf(vocab.bytes, vocab.offsets[i]!, vocab.offsets[i + 1]!);
      if (this.ranks.has(key)) throw new RangeError('byte-pair vocabulary: two tokens have the same bytes');
      this.ranks.set(key, vocab.ranks[i]!);
    }
    this.pattern = new RegExp(vocab.pattern, 'ug');
  }

  encode(text: string): Uint32Array {
    if (typeof text !== 'string') throw new TypeError('text must be a string');
    const out: number[] = [];
    for (const match of text.matchAll(this.pattern)) {
      const piece = utf8.encode(match[0]);
      const whole = this.ranks.get(keyOf(piece, 0, piece.length));
      if (whole !== undefined) out.push(whole);
      else for (const rank of this.merge(piece)) out.push(rank);
    }
    return Uint32Array.from(out);
  }

  private rank(piece: Uint8Array, start: number, end: number): number | undefined {
    return this.ranks.get(keyOf(piece, start, end));
  }

  private merge(piece: Uint8Array): number[] {
    // Part i spans starts[i]..starts[i + 1].
    const starts = Array.from({ length: piece.length + 1 }, (_, i) => i);
    while (starts.length > 2) {
      let best: number | undefined;
      let at = -1;
      for (let i = 0; i + 2 < starts.length; i++) {
        const r = this.rank(piece, starts[i]!, starts[i + 2]!);
        if (r !== undefined && (best === undefined || r < best)) {
          best = r;
          at = i;
        }
      }
      if (at < 0) break;
      starts.splice(at + 1, 1);
    }
    const ranks: number[] = [];
    for (let i = 0; i + 1 < starts.length; i++) ranks.push(this.rank(piece, starts[i]!, starts[i + 1]!)!);
    return ranks;
  }
}
