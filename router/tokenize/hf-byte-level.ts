// A tokenizer.json whose model is byte-level BPE, encoded by the wasm core's
// byte-pair kernel under the merge-list rule (bpe-vocab.ts) instead of by
// @huggingface/tokenizers, which merges in JS (0.1 MB/s on a run of spaces).
//
// Only shapes this file reproduces exactly are taken; byteLevelProblem says
// why any other is not, and the caller keeps those on the JS library:
//   normalizer     none, or NFC (String.prototype.normalize), alone or as a sequence of one
//   pre_tokenizer  ByteLevel with its own (GPT-2) regex, or Split regexes with
//                  behavior Isolated (one, as Qwen and Llama 3, or several, as
//                  DeepSeek V3) followed by ByteLevel without one; no prefix
//                  space. The regexes are Oniguruma's, rewritten for V8
//                  (onig-pattern.ts); text between matches is a piece too
//   model          BPE without dropout, byte fallback, subword prefix or
//                  suffix; every byte is a token; merges name tokens that
//                  exist and none repeats; ignore_merges is honoured
//   added tokens   all matched on raw text (the special splitter takes them out)
//
// Byte level: every byte is spelled as one character (GPT-2's table: the
// printable bytes as themselves, the others from U+0100 on), so a token's
// characters are its bytes and the kernel works on UTF-8 directly.
//
// Ranks: the kernel orders merges by rank and names parts by rank, so the
// vocabulary it gets ranks a token by the index of the first merge that makes
// it; other merges making the same token are extra merges at their own
// index, and tokens no merge makes rank after every merge. `idOfRank` maps
// ranks back to the model's ids.
import { BytePairEncoder, type BpeOptions, type BpeVocabulary } from '../../bindings/bpe.js';
import { onigToJs, UnsupportedPattern } from './onig-pattern.js';

/** The regex ByteLevel splits with when use_regex is set (Oniguruma syntax). */
const GPT2_PATTERN = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;

/** Byte of each character of the byte-level alphabet (by UTF-16 unit; -1: none). */
const BYTE_OF_CHAR = new Int16Array(0x144).fill(-1);
{
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    BYTE_OF_CHAR[printable ? b : 0x100 + extra++] = b;
  }
}

interface Json {
  [key: string]: unknown;
}

export interface ByteLevelModel {
  /** The pre-tokenizer's regexes in order, V8 sources for the `u` flag. */
  patterns: string[];
  normalize: boolean;
  vocab: BpeVocabulary;
  idOfRank: Uint32Array;
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const unset = (v: unknown) => v === undefined || v === null;
const noAffix = (v: unknown) => unset(v) || v === '';

/** Whether the normalizer is NFC (true) or none (false), or why it is neither. */
function normalizerProblem(n: unknown): string | boolean {
  if (unset(n)) return false;
  if (isObject(n) && n.type === 'NFC') return true;
  // A sequence of at most one of them (DeepSeek V3 writes an empty one).
  if (isObject(n) && n.type === 'Sequence' && Array.isArray(n.normalizers) && n.normalizers.length <= 1) {
    return n.normalizers.length === 0 ? false : normalizerProblem(n.normalizers[0]);
  }
  return `normalizer ${isObject(n) ? String(n.type) : JSON.stringify(n)}`;
}

/**
 * The Oniguruma patterns the pre-tokenizer splits with, one after another
 * (each splits the pieces of the one before), or why it is not one this
 * path takes.
 */
function preTokenizerPatterns(p: unknown): string[] | string {
  const byteLevel = (b: unknown, regex: boolean) =>
    isObject(b) && b.type === 'ByteLevel' && b.add_prefix_space === false && (b.use_regex ?? true) === regex;
  if (byteLevel(p, true)) return [GPT2_PATTERN];
  if (isObject(p) && p.type === 'Sequence' && Array.isArray(p.pretokenizers) && p.pretokenizers.length >= 2) {
    const steps = p.pretokenizers as unknown[];
    const patterns = steps.slice(0, -1).map((split) => {
      const isolated = isObject(split) && split.type === 'Split' && split.behavior === 'Isolated' && split.invert === false;
      const pattern = isolated ? (split.pattern as Json | undefined)?.Regex : undefined;
      return typeof pattern === 'string' ? pattern : undefined;
    });
    if (byteLevel(steps.at(-1), false) && patterns.every((x) => x !== undefined)) return patterns as string[];
  }
  return `pre_tokenizer ${JSON.stringify(p).slice(0, 120)}`;
}

/**
 * Piece ends (UTF-16 offsets) of `text` under Split "Isolated" steps, each
 * run on every piece of the step before as a text of its own: matches and
 * the text between them are pieces; an empty match only marks a boundary.
 */
function chainEnds(text: string, steps: readonly RegExp[]): number[] {
  let ends = text.length === 0 ? [] : [text.length];
  for (const step of steps) {
    const cut: number[] = [];
    let start = 0;
    for (const end of ends) {
      const piece = text.slice(start, end);
      let prev = 0;
      for (const m of piece.matchAll(step)) {
        if (m.index > prev) cut.push(start + m.index);
        if (m[0].length > 0) cut.push(start + m.index + m[0].length);
        prev = m.index + m[0].length;
      }
      if (prev < piece.length) cut.push(end);
      start = end;
    }
    ends = cut;
  }
  return ends;
}

/** Whether every character of `token` is in the byte alphabet (each stands for one byte). */
function spelledInBytes(token: string): boolean {
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c >= BYTE_OF_CHAR.length || BYTE_OF_CHAR[c]! < 0) return false;
  }
  return true;
}

/** A vocab entry's id; the vocab is parsed JSON, so inherited properties are no tokens. */
function idIn(vocab: Json, token: string): number | undefined {
  const id = vocab[token];
  return typeof id === 'number' && Object.hasOwn(vocab, token) ? id : undefined;
}

function mergePair(m: unknown): [string, string] | undefined {
  if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') return [m[0], m[1]];
  if (typeof m === 'string') {
    const parts = m.split(' ');
    if (parts.length === 2) return [parts[0]!, parts[1]!];
  }
  return undefined;
}

/** The kernel's vocabulary and merge list for a byte-level BPE model, or why it cannot have one. */
function kernelVocabulary(model: Json, pattern: string): { vocab: BpeVocabulary; idOfRank: Uint32Array } | string {
  const vocab = model.vocab;
  const merges = model.merges;
  if (!isObject(vocab) || !Array.isArray(merges)) return 'model without vocab and merges';
  const count = merges.length;
  const rankOf = new Map<string, number>();
  const entries = new Uint32Array(3 * count);
  const idOfRank: number[] = new Array<number>(count);
  // A merge listed twice, or two merges splitting a token alike, the kernel refuses.
  for (let k = 0; k < count; k++) {
    const pair = mergePair(merges[k]);
    if (pair === undefined) return `merge ${k} is not a pair`;
    const [a, b] = pair;
    const token = a + b;
    const id = idIn(vocab, token);
    if (id === undefined || idIn(vocab, a) === undefined || idIn(vocab, b) === undefined || !spelledInBytes(token)) return `merge ${k} (${a} ${b}) names no byte-level token`;
    let rank = rankOf.get(token);
    if (rank === undefined) rankOf.set(token, (rank = k));
    entries[3 * k] = rank;
    entries[3 * k + 1] = a.length;
    entries[3 * k + 2] = k;
    idOfRank[k] = id;
  }
  // A token not spelled in the byte alphabet is no text's bytes: the kernel never needs it.
  const tokens = Object.keys(vocab).filter(spelledInBytes);
  let size = 0;
  for (const token of tokens) size += token.length;
  const bytes = new Uint8Array(size);
  const starts = new Uint32Array(tokens.length + 1);
  const ranks = new Uint32Array(tokens.length);
  let at = 0;
  for (const [i, token] of tokens.entries()) {
    for (let j = 0; j < token.length; j++) bytes[at++] = BYTE_OF_CHAR[token.charCodeAt(j)]!;
    starts[i + 1] = at;
    let rank = rankOf.get(token);
    if (rank === undefined) {
      const id = idIn(vocab, token);
      if (id === undefined) return `vocab entry ${JSON.stringify(token)} has no numeric id`;
      rank = idOfRank.length;
      idOfRank.push(id);
    }
    ranks[i] = rank;
  }
  return {
    vocab: {
      bytes,
      offsets: starts,
      ranks,
      pattern,
      gaps: 'encode',
      merges: { entries, wholeWords: model.ignore_merges === true },
    },
    idOfRank: Uint32Array.from(idOfRank),
  };
}

/** Why the model of this tokenizer.json cannot run on the kernel, or undefined. */
export function byteLevelModel(json: Json): ByteLevelModel | string {
  const model = json.model;
  if (!isObject(model) || model.type !== 'BPE') return `model ${isObject(model) ? String(model.type) : 'missing'}`;
  if (!(unset(model.dropout) || model.dropout === 0)) return 'BPE dropout';
  if (model.byte_fallback === true) return 'BPE byte_fallback';
  if (!noAffix(model.continuing_subword_prefix) || !noAffix(model.end_of_word_suffix)) return 'BPE subword prefix or suffix';
  const normalize = normalizerProblem(json.normalizer);
  if (typeof normalize === 'string') return normalize;
  const split = preTokenizerPatterns(json.pre_tokenizer);
  if (typeof split === 'string') return split;
  const added = Array.isArray(json.added_tokens) ? (json.added_tokens as Json[]) : [];
  // Tokens matched after normalizing would have to be split out of normalized text.
  if (normalize && added.some((t) => (t.normalized ?? !(t.special ?? false)) === true)) return 'added tokens matched on normalized text';
  let patterns: string[];
  try {
    patterns = split.map(onigToJs);
  } catch (err) {
    if (err instanceof UnsupportedPattern) return `pre_tokenizer regex: ${err.message}`;
    throw err;
  }
  // With several steps the kernel's own pattern goes unused: the pieces are cut here (chainEnds).
  const built = kernelVocabulary(model, patterns[0]!);
  if (typeof built === 'string') return built;
  return { patterns, normalize, ...built };
}

/** Token ids of text holding no added token, on the kernel (`options` tune how; the ids never depend on them). */
export function byteLevelEncoder(model: ByteLevelModel, options?: BpeOptions): (text: string) => Uint32Array {
  const bpe = new BytePairEncoder(model.vocab, options);
  const idOfRank = model.idOfRank;
  const steps = model.patterns.length > 1 ? model.patterns.map((p) => new RegExp(p, 'gu')) : undefined;
  const encode = steps === undefined ? (t: string) => bpe.encode(t) : (t: string) => bpe.encodePieces(t, chainEnds(t, steps));
  return (text) => {
    const ids = encode(model.normalize ? text.normalize('NFC') : text);
    for (let i = 0; i < ids.length; i++) ids[i] = idOfRank[ids[i]!]!;
    return ids;
  };
}
