// The o200k_base pre-tokenizer, written out by hand: finds where each piece
// of UTF-8 text ends exactly as the encoding's regular expression,
//
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'s|'t|'re|'ve|'m|'ll|'d)?
//   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'s|'t|'re|'ve|'m|'ll|'d)?
//   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (contractions in any case), matches it at the start of the text and then
// where each match ends: every alternative is tried in order, with the
// choices its backtracking would make, so the first match is the one found.
// Every character starts some match (a letter the first two, a digit the
// third, whitespace the last, anything else the fourth), so no text is
// skipped. Characters are told apart by class (bpe-classes.ts, generated at build
// from Node's own \p{..} and \s): the sets of the pattern are unions of them.
//
// Text may come in parts: in a part that is not the last (`open`), a piece
// whose match read up to the part's end is not settled (more text could
// change it), and splitting stops before it.
import { BOTH, CLASS_BLOCKS, CLASS_INDEX, LOWER, MARK, NEWLINE, NUMBER, OTHER, SPACE, UPPER } from './bpe-classes';

/** No position: an alternative that does not match, or a piece not settled. */
export const NONE: usize = <usize>-1;

/** The class of a position at or past the end of the text: in no set. */
export const END: u32 = 15;
const IN_U: u32 = (1 << UPPER) | (1 << BOTH) | (1 << MARK);
const IN_W: u32 = (1 << LOWER) | (1 << BOTH) | (1 << MARK);
const IN_L: u32 = (1 << UPPER) | (1 << LOWER) | (1 << BOTH);
/** [^\r\n\p{L}\p{N}] */
const IN_P: u32 = (1 << OTHER) | (1 << MARK) | (1 << SPACE);
/** [^\s\p{L}\p{N}] */
const IN_Q: u32 = (1 << OTHER) | (1 << MARK);
/** \s */
const IN_S: u32 = (1 << SPACE) | (1 << NEWLINE);

let base: usize = 0;
let limit: usize = 0;
let open = false;
/** Whether the match being found read at or past the end of the text. */
let reachedEnd = false;
/** Where the last character of a set's run starts (see upperRun). */
let lastW: usize = NONE;

/** Splits the `bytes` bytes of UTF-8 at `text` from now on; `more`: further text follows them. */
export function splitBegin(text: usize, bytes: usize, more: bool): void {
  base = text;
  limit = bytes;
  open = more;
}

@inline
function classOf(cp: u32): u32 {
  const block = <usize>load<u16>(CLASS_INDEX + ((<usize>cp >> 8) << 1));
  return <u32>load<u8>(CLASS_BLOCKS + (block << 8) + (<usize>cp & 0xff));
}

/** The character at `p`: class (bits 0-3), byte length (bits 4-7), code point (bits 8 on); END past the text. */
@inline
export function charAt(p: usize): u32 {
  if (p >= limit) {
    reachedEnd = true;
    return END;
  }
  const b0 = <u32>load<u8>(base + p);
  // Block 0 holds the first 256 code points.
  if (b0 < 0x80) return <u32>load<u8>(CLASS_BLOCKS + <usize>b0) | (1 << 4) | (b0 << 8);
  const b1 = <u32>load<u8>(base + p + 1) & 0x3f;
  let cp: u32;
  let n: u32;
  if (b0 < 0xe0) {
    cp = ((b0 & 0x1f) << 6) | b1;
    n = 2;
  } else if (b0 < 0xf0) {
    cp = ((b0 & 0x0f) << 12) | (b1 << 6) | (<u32>load<u8>(base + p + 2) & 0x3f);
    n = 3;
  } else {
    cp = ((b0 & 0x07) << 18) | (b1 << 12) | ((<u32>load<u8>(base + p + 2) & 0x3f) << 6) | (<u32>load<u8>(base + p + 3) & 0x3f);
    n = 4;
  }
  return classOf(cp) | (n << 4) | (cp << 8);
}

@inline
export function byteAt(p: usize): u32 {
  if (p >= limit) {
    reachedEnd = true;
    return 0;
  }
  return <u32>load<u8>(base + p);
}

@inline
export function inSet(c: u32, set: u32): bool {
  return ((<u32>1 << (c & 15)) & set) != 0;
}

@inline
export function lengthOf(c: u32): usize {
  return <usize>((c >> 4) & 15);
}

/**
 * Past the ASCII letters from `p` that are in `set`, 16 bytes at a time
 * (long letter runs are what the pre-tokenizer spends its time on): a-z are
 * the only ASCII characters in [\p{Ll}\p{Lm}\p{Lo}\p{M}], A-Z the only ones in
 * [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]. Stops 16 bytes before the text's end.
 */
@inline
function skipAsciiLetters(p: usize, set: u32): usize {
  if (set != IN_W && set != IN_U) return p;
  const first = i8x16.splat(set == IN_W ? 0x61 : 0x41);
  const last = i8x16.splat(set == IN_W ? 0x7a : 0x5a);
  while (p + 16 <= limit) {
    const v = v128.load(base + p);
    const inside = i8x16.bitmask(v128.and(i8x16.ge_u(v, first), i8x16.le_u(v, last)));
    if (inside != 0xffff) return p + <usize>ctz(~inside);
    p += 16;
  }
  return p;
}

/** \p{N}{1,most} at `s`, whose character `c0` is a digit: where it ends. */
@inline
export function digitsEnd(s: usize, c0: u32, most: u32): usize {
  let e = s + lengthOf(c0);
  for (let k: u32 = 1; k < most; k++) {
    const c = charAt(e);
    if ((c & 15) != NUMBER) break;
    e += lengthOf(c);
  }
  return e;
}

/** Where the run of characters in `set` from `p` ends. */
export function runEnd(p: usize, set: u32): usize {
  while (true) {
    p = skipAsciiLetters(p, set);
    const c = charAt(p);
    if (!inSet(c, set)) return p;
    p += lengthOf(c);
  }
}

/** Where the run of [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] from `p` ends; lastW: its last character also in [\p{Ll}\p{Lm}\p{Lo}\p{M}], or NONE. */
function upperRun(p: usize): usize {
  lastW = NONE;
  while (true) {
    // A-Z are in the first set only, so lastW stays.
    p = skipAsciiLetters(p, IN_U);
    const c = charAt(p);
    if (!inSet(c, IN_U)) return p;
    if (inSet(c, IN_W)) lastW = p;
    p += lengthOf(c);
  }
}

/**
 * [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from `x`, or NONE.
 * The first set's run, given back one character at a time until the second
 * set matches: all of it when an \p{Ll} follows (then the second set's run
 * from there), else up to its last character in both sets (which the second
 * set then takes alone: what follows it is in neither).
 */
function upperThenLower(x: usize): usize {
  const y = upperRun(x);
  const w = lastW;
  const c = charAt(y);
  if ((c & 15) == LOWER) return runEnd(y + lengthOf(c), IN_W);
  if (w != NONE) return w + lengthOf(charAt(w));
  return NONE;
}

/** `e`, or past the contraction ('s 't 're 've 'm 'll 'd, any case) that starts there. */
function contraction(e: usize): usize {
  if (byteAt(e) != 0x27) return e;
  // ASCII letters to lower case; no other byte becomes one.
  const a = byteAt(e + 1) | 0x20;
  if (a == 0x73 || a == 0x74 || a == 0x6d || a == 0x64) return e + 2;
  if (a != 0x72 && a != 0x76 && a != 0x6c) return e;
  const b = byteAt(e + 2) | 0x20;
  return (a == 0x6c ? b == 0x6c : b == 0x65) ? e + 3 : e;
}

/** The first two alternatives (letters, with an optional leading character) at `s`, whose character is `c0`; or NONE. */
function letters(s: usize, c0: u32): usize {
  const skip = inSet(c0, IN_P) ? s + lengthOf(c0) : NONE;
  if (skip != NONE) {
    const e = upperThenLower(skip);
    if (e != NONE) return contraction(e);
  }
  const e = upperThenLower(s);
  if (e != NONE) return contraction(e);
  if (skip != NONE && inSet(charAt(skip), IN_U)) return contraction(runEnd(runEnd(skip, IN_U), IN_W));
  if (inSet(c0, IN_U)) return contraction(runEnd(runEnd(s, IN_U), IN_W));
  return NONE;
}

/** Where the match at `s` (< the text's end) ends. */
function matchEnd(s: usize): usize {
  const c0 = charAt(s);
  const kind = c0 & 15;
  if (inSet(c0, IN_L | IN_P)) {
    const e = letters(s, c0);
    if (e != NONE) return e;
  }
  if (kind == NUMBER) return digitsEnd(s, c0, 3);
  // ' '?[^\s\p{L}\p{N}]+[\r\n/]*
  let x = NONE;
  if (c0 >> 8 == 0x20) {
    if (inSet(charAt(s + 1), IN_Q)) x = s + 1;
  } else if (inSet(c0, IN_Q)) x = s;
  if (x != NONE) {
    let e = runEnd(x, IN_Q);
    while (true) {
      const b = byteAt(e);
      if (b != 0x0d && b != 0x0a && b != 0x2f) return e;
      e++;
    }
  }
  // Whitespace: \s*[\r\n]+ through the run's last line break; else \s+(?!\S)
  // leaves the run's last character to what follows (unless the text ends
  // there, or the run is that one character: \s+).
  let p = s;
  let last = s;
  let newline = NONE;
  while (true) {
    const c = charAt(p);
    if (!inSet(c, IN_S)) break;
    if ((c & 15) == NEWLINE) newline = p;
    last = p;
    p += lengthOf(c);
  }
  if (newline != NONE) return newline + 1;
  if (p >= limit || last == s) return p;
  return last;
}

/** Where the piece from `s` (< the text's end) ends, or NONE when it is not settled. */
export function splitNext(s: usize): usize {
  reachedEnd = false;
  const e = matchEnd(s);
  return open && reachedEnd ? NONE : e;
}

/** Where the piece from `s` ends by another pattern's matcher (bpe-split-hf.ts), or NONE when it is not settled. */
export function splitNextBy(s: usize, match: (s: usize) => usize): usize {
  reachedEnd = false;
  const e = match(s);
  return open && reachedEnd ? NONE : e;
}
