// Turns prompt text into token ids, either piece by piece through the piece
// cache (incremental) or in one call to the tokenizer (whole). The mode is
// chosen once at load by comparing both on probe texts.
import { TextCache } from './piece-cache.js';
import type { Segment, SpecialSplitter } from './special-split.js';
import type { TokenizeMode } from './types.js';

/** What a concrete tokenizer (tiktoken, Hugging Face) provides. */
export interface TextCodec {
  readonly splitter: SpecialSplitter;
  /** Token ids of text that holds no special token. */
  encodePiece(piece: string): number[];
  /** Token ids of a whole prompt, special tokens recognized. */
  encodeWhole(text: string): number[];
}

export class PromptEncoder {
  readonly cache: TextCache<Uint32Array>;
  private current: TokenizeMode = 'incremental';

  constructor(
    private readonly codec: TextCodec,
    cacheTokens: number,
  ) {
    this.cache = new TextCache<Uint32Array>(cacheTokens, (ids) => ids.length);
  }

  get mode(): TokenizeMode {
    return this.current;
  }

  /**
   * Compares piecewise and whole tokenization on each probe; any difference
   * (a normalizer or pre-tokenizer that looks across pieces) selects `whole`.
   * Returns the first probe that differed, for diagnostics.
   */
  selfCheck(probes: readonly string[]): string | undefined {
    for (const probe of probes) {
      const whole = this.codec.encodeWhole(probe);
      const pieces = this.encodeIncremental(probe);
      if (!sameIds(whole, pieces)) {
        this.current = 'whole';
        return probe;
      }
    }
    this.current = 'incremental';
    return undefined;
  }

  encode(text: string): Uint32Array {
    return this.current === 'incremental' ? this.encodeIncremental(text) : Uint32Array.from(this.codec.encodeWhole(text));
  }

  /**
   * Token ids of parts.join(''). When every part after the first starts with
   * a special token, each part tokenizes alone, so a part is looked up in the
   * cache whole (message segments repeat turn after turn: one lookup per
   * message instead of one scan of the whole prompt). A new part is
   * tokenized piece by piece but stored only as a whole, so its tokens are
   * not cached twice.
   */
  encodeParts(parts: readonly string[]): Uint32Array {
    if (this.current === 'whole' || parts.length === 1 || !this.separable(parts)) return this.encode(parts.join(''));
    const ids: Uint32Array[] = new Array(parts.length);
    let total = 0;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      let partIds = this.cache.get(part);
      if (partIds === undefined) {
        partIds = this.encodeIncremental(part, false);
        this.cache.set(part, partIds);
      }
      ids[i] = partIds;
      total += partIds.length;
    }
    const out = new Uint32Array(total);
    let at = 0;
    for (const p of ids) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  private separable(parts: readonly string[]): boolean {
    const splitter = this.codec.splitter;
    for (let i = 1; i < parts.length; i++) if (parts[i]!.length > 0 && !splitter.startsWithSpecial(parts[i]!)) return false;
    return true;
  }

  private encodeIncremental(text: string, cachePieces = true): Uint32Array {
    const segments: Segment[] = this.codec.splitter.split(text);
    const parts: (Uint32Array | number)[] = new Array(segments.length);
    let total = 0;
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i]!;
      if (typeof s === 'number') {
        parts[i] = s;
        total++;
        continue;
      }
      let ids = cachePieces ? this.cache.get(s) : undefined;
      if (ids === undefined) {
        ids = Uint32Array.from(this.codec.encodePiece(s));
        if (cachePieces) this.cache.set(s, ids);
      }
      parts[i] = ids;
      total += ids.length;
    }
    const out = new Uint32Array(total);
    let at = 0;
    for (const p of parts) {
      if (typeof p === 'number') out[at++] = p;
      else {
        out.set(p, at);
        at += p.length;
      }
    }
    return out;
  }
}

export function sameIds(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
