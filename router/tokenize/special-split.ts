// Splits prompt text at special (added) tokens, the boundaries tokenizers
// never merge across: text between two special tokens is tokenized on its
// own by tiktoken and by Hugging Face tokenizers alike, which is what makes
// per-piece tokenization (and caching) possible.

export interface SpecialToken {
  content: string;
  id: number;
  /** Strips whitespace from the text before it (HF added-token flag). */
  lstrip?: boolean;
  /** Strips whitespace from the text after it (HF added-token flag). */
  rstrip?: boolean;
}

/** A split prompt: text pieces (strings) and special token ids (numbers), in order. */
export type Segment = string | number;

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}

/**
 * Whether some special token's proper suffix is a prefix of a special token
 * (or the reverse): only then can a match that starts in one text run on into
 * a special token that begins the next.
 */
function overlapping(contents: readonly string[]): boolean {
  for (const t of contents) {
    for (let k = 1; k < t.length; k++) {
      const tail = t.slice(k);
      if (contents.some((s) => s.startsWith(tail) || tail.startsWith(s))) return true;
    }
  }
  return false;
}

export class SpecialSplitter {
  private readonly pattern: RegExp | null;
  private readonly leading: RegExp | null;
  private readonly byContent = new Map<string, SpecialToken>();
  /** See `overlapping`; when true no text can be cut before a special token. */
  readonly overlaps: boolean;
  private readonly anyLstrip: boolean;

  constructor(tokens: readonly SpecialToken[]) {
    for (const t of tokens) {
      if (t.content.length === 0) throw new RangeError(`special token ${t.id} has empty content`);
      this.byContent.set(t.content, t);
    }
    // Longest first, so at any position the alternation takes the longest
    // token that matches there (leftmost-longest, as HF's added-token trie does).
    const alternatives = [...this.byContent.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
    this.pattern = alternatives.length > 0 ? new RegExp(alternatives.join('|'), 'g') : null;
    this.leading = alternatives.length > 0 ? new RegExp(alternatives.join('|'), 'y') : null;
    this.overlaps = overlapping([...this.byContent.keys()]);
    this.anyLstrip = [...this.byContent.values()].some((t) => t.lstrip === true);
  }

  /**
   * Whether text begins with a special token that strips nothing before it.
   * Then, special tokens not overlapping, the text tokenizes the same on its
   * own as after any other text: the split at its start is certain.
   */
  startsWithSpecial(text: string): boolean {
    const re = this.leading;
    if (re === null || this.overlaps) return false;
    re.lastIndex = 0;
    // Without lstrip tokens any match will do: test() builds no match.
    if (!this.anyLstrip) return re.test(text);
    const m = re.exec(text);
    return m !== null && this.byContent.get(m[0])!.lstrip !== true;
  }

  get tokens(): SpecialToken[] {
    return [...this.byContent.values()];
  }

  idOf(content: string): number | undefined {
    return this.byContent.get(content)?.id;
  }

  /** Splits text into pieces and special ids; empty pieces are dropped. */
  split(text: string): Segment[] {
    const out: Segment[] = [];
    const re = this.pattern;
    if (re === null) {
      if (text.length > 0) out.push(text);
      return out;
    }
    re.lastIndex = 0;
    let start = 0;
    let stripNext = false;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      const token = this.byContent.get(m[0])!;
      let piece = text.substring(start, m.index);
      if (stripNext) piece = piece.trimStart();
      if (token.lstrip) piece = piece.trimEnd();
      if (piece.length > 0) out.push(piece);
      out.push(token.id);
      stripNext = token.rstrip === true;
      start = m.index + m[0].length;
    }
    let tail = text.substring(start);
    if (stripNext) tail = tail.trimStart();
    if (tail.length > 0) out.push(tail);
    return out;
  }
}
