// The pre-tokenizer of Qwen2/Qwen3 (digits one at a time) and Llama 3 (up to
// three digits), written out by hand as bpe-split.ts writes out o200k_base's:
// where each piece of UTF-8 text ends under the Split regex
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// as Oniguruma (which the engine compiles it with) matches it: \s is Unicode
// White_Space, which differs from the class table's V8 \s in two code points
// (U+0085 is whitespace, U+FEFF is not), and (?i:'s) also takes U+017F (long
// s, which folds to s). Alternatives are tried in order with the choices
// backtracking makes; every character starts some match (a letter the
// second, a digit the third, whitespace the last three, anything else the
// fourth), so no text is skipped.
import { BOTH, LOWER, MARK, NEWLINE, NUMBER, OTHER, SPACE, UPPER } from './bpe-classes';
import { byteAt, charAt, digitsEnd, END, inSet, lengthOf, NONE, runEnd } from './bpe-split';

/** \p{L} */
const IN_L: u32 = (1 << UPPER) | (1 << LOWER) | (1 << BOTH);
/** [^\r\n\p{L}\p{N}] (no whitespace question: the table's classes serve) */
const IN_X: u32 = (1 << OTHER) | (1 << MARK) | (1 << SPACE);
/** [^\s\p{L}\p{N}], on classes corrected to White_Space (hfChar) */
const IN_Q: u32 = (1 << OTHER) | (1 << MARK);
/** \s, on corrected classes */
const IN_S: u32 = (1 << SPACE) | (1 << NEWLINE);

/** charAt with the class of U+0085 and U+FEFF as White_Space has them. */
@inline
function hfChar(p: usize): u32 {
  const c = charAt(p);
  const cp = c >> 8;
  if (cp == 0x85) return (c & ~15) | SPACE;
  if (cp == 0xfeff) return (c & ~15) | OTHER;
  return c;
}

/** Past the contraction at `s` (an apostrophe), or NONE. */
function contraction(s: usize): usize {
  const a = byteAt(s + 1);
  // ASCII letters to lower case; no other byte becomes one.
  const lower = a | 0x20;
  if (lower == 0x73 || lower == 0x74 || lower == 0x6d || lower == 0x64) return s + 2;
  // U+017F, long s: C5 BF.
  if (a == 0xc5) return byteAt(s + 2) == 0xbf ? s + 3 : NONE;
  if (lower != 0x72 && lower != 0x76 && lower != 0x6c) return NONE;
  const b = byteAt(s + 2) | 0x20;
  return (lower == 0x6c ? b == 0x6c : b == 0x65) ? s + 3 : NONE;
}

/** Where the match at `s` (< the text's end) ends, with up to `digits` digits a piece. */
@inline
function matchEnd(s: usize, digits: u32): usize {
  const c0 = hfChar(s);
  if (c0 >> 8 == 0x27) {
    const e = contraction(s);
    if (e != NONE) return e;
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+ (the two sets are disjoint: one way at most)
  if (inSet(c0, IN_L)) return runEnd(s + lengthOf(c0), IN_L);
  if (inSet(c0, IN_X)) {
    const n = s + lengthOf(c0);
    const c1 = charAt(n);
    if (inSet(c1, IN_L)) return runEnd(n + lengthOf(c1), IN_L);
  }
  if ((c0 & 15) == NUMBER) return digitsEnd(s, c0, digits);
  // ' '?[^\s\p{L}\p{N}]+[\r\n]*
  let x = NONE;
  if (c0 >> 8 == 0x20) {
    if (inSet(hfChar(s + 1), IN_Q)) x = s + 1;
  } else if (inSet(c0, IN_Q)) x = s;
  if (x != NONE) {
    let e = x;
    while (true) {
      const c = hfChar(e);
      if (!inSet(c, IN_Q)) break;
      e += lengthOf(c);
    }
    while (true) {
      const b = byteAt(e);
      if (b != 0x0d && b != 0x0a) return e;
      e++;
    }
  }
  // Whitespace: \s*[\r\n]+ through the run's last line break; else \s+(?!\S)
  // leaves the run's last character to what follows (unless the text ends
  // there, or the run is that one character: \s+).
  let p = s;
  let last = s;
  let newline = NONE;
  let c = hfChar(p);
  while (inSet(c, IN_S)) {
    if ((c & 15) == NEWLINE) newline = p;
    last = p;
    p += lengthOf(c);
    c = hfChar(p);
  }
  if (newline != NONE) return newline + 1;
  if (c == END || last == s) return p;
  return last;
}

/** Qwen2/Qwen3: one digit a piece. */
export function matchQwen(s: usize): usize {
  return matchEnd(s, 1);
}

/** Llama 3: up to three digits a piece. */
export function matchLlama3(s: usize): usize {
  return matchEnd(s, 3);
}
