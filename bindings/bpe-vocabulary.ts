// A byte-pair vocabulary as the encoders take it: every token's bytes and
// rank, and the pre-tokenizer pattern that cuts text into pieces.

export interface BpeVocabulary {
  /** Every token's bytes, back to back. */
  bytes: Uint8Array;
  /** Token i is bytes[offsets[i]..offsets[i + 1]); length = tokens + 1, offsets[0] = 0. */
  offsets: Uint32Array;
  /** Token i's rank, which is its id. */
  ranks: Uint32Array;
  /** The pre-tokenizer: a regular expression source, run with the `u` flag. */
  pattern: string;
  /**
   * Text between the pattern's matches: skipped, as tiktoken does (default),
   * or encoded as pieces of its own, as a Hugging Face Split with behavior
   * "Isolated" does.
   */
  gaps?: 'skip' | 'encode';
  /**
   * The merge-list rule (Hugging Face BPE) instead of tiktoken's: parts merge
   * only as listed, at the listed merge's index. Ranks are then merge indices
   * (see MergeList), not the model's ids.
   */
  merges?: MergeList;
}

/**
 * A model's merges, for a vocabulary whose ranks are merge indices: a token
 * one merge makes has that merge's index as its rank; a token no merge makes
 * ranks after every merge.
 */
export interface MergeList {
  /** u32 x 3 per merge: the rank of the token it makes, the bytes of its left part, its index. */
  entries: Uint32Array;
  /** Whether a piece that is a token is that token without merging (ignore_merges). */
  wholeWords: boolean;
}

/** Why a vocabulary cannot be used, or undefined; the core checks the same (bpeVocabBuild). */
export function vocabularyProblem(v: BpeVocabulary): string | undefined {
  const count = v.ranks.length;
  if (v.offsets.length !== count + 1) return `offsets must hold one entry per token plus one (${count + 1}), got ${v.offsets.length}`;
  if (v.offsets[0] !== 0) return 'offsets[0] must be 0';
  if (v.offsets[count] !== v.bytes.length) return `offsets[${count}] must be the byte count ${v.bytes.length}`;
  const singles = new Set<number>();
  for (let i = 0; i < count; i++) {
    const length = v.offsets[i + 1]! - v.offsets[i]!;
    if (length <= 0) return `token ${i} is empty or out of order`;
    if (v.ranks[i] === 0xffffffff) return `token ${i} has rank 0xffffffff, which means "no token"`;
    if (length === 1) singles.add(v.bytes[v.offsets[i]!]!);
  }
  if (singles.size !== 256) return 'every byte value must be a token by itself';
  return undefined;
}
