// Oniguruma patterns (what Hugging Face tokenizers compile a tokenizer.json
// Split regex with) rewritten for V8, for the subset whose meaning both
// engines share once rewritten; anything else is refused, so the caller can
// keep the model on @huggingface/tokenizers.
//
// What differs and is rewritten (checked against libonig 6.9):
//   \s \S    Oniguruma: Unicode White_Space (U+0085 in, U+FEFF out); V8's \s is
//            not that set, so \p{White_Space} / \P{White_Space}
//   \d       Oniguruma: any decimal digit (\p{Nd}); V8's \d is ASCII only
//   (?i:..)  V8 (Node 20) has no inline flags: each ASCII letter becomes the
//            class of its case fold, which Oniguruma takes from Unicode's
//            CaseFolding: s also matches U+017F (long s), k U+212A (Kelvin)
//   .        Oniguruma: anything but \n; V8 also excludes \r, U+2028, U+2029
// Refused: anchors, word boundaries, \w \h, backreferences, atomic groups,
// possessive quantifiers, nested or non-ASCII letters under (?i:, letters in
// a class under (?i:, script properties (named differently in V8).

/** Extra members of an ASCII letter's case fold. */
const FOLDS: Record<string, string> = { s: '\u017f', k: '\u212a' };

const SYNTAX = new Set('^$\\.*+?()[]{}|/-'.split(''));

export class UnsupportedPattern extends Error {
  override name = 'UnsupportedPattern';
}

function escapeOne(c: string): string {
  if (c === 'n') return '\\n';
  if (c === 'r') return '\\r';
  if (c === 't') return '\\t';
  if (c === 'f') return '\\f';
  if (c === 'v') return '\\v';
  if (c === 's') return '\\p{White_Space}';
  if (c === 'S') return '\\P{White_Space}';
  if (c === 'd') return '\\p{Nd}';
  if (c === 'D') return '\\P{Nd}';
  if (/[A-Za-z0-9]/.test(c)) throw new UnsupportedPattern(`escape \\${c}`);
  return SYNTAX.has(c) ? `\\${c}` : c;
}

/** A \p{..} or \P{..} at source[i] (the backslash); returns it and where it ends. */
function property(source: string, i: number): [string, number] {
  const close = source.indexOf('}', i);
  if (source[i + 2] !== '{' || close < 0) throw new UnsupportedPattern(`\\${source[i + 1]} without {name}`);
  const name = source.slice(i + 3, close);
  // General categories have the same names in both engines; scripts do not.
  if (!/^(?:L[ultmo]?|M[nce]?|N[dlo]?|P[cdseifo]?|S[mcko]?|Z[slp]?|C[cfson]?)$/.test(name)) throw new UnsupportedPattern(`property \\p{${name}}`);
  return [`\\${source[i + 1]}{${name}}`, close + 1];
}

/** The escape at source[i] (the backslash), in classes and out; returns it rewritten and where it ends. */
function escapeAt(source: string, i: number): [string, number] {
  const e = source[i + 1];
  if (e === undefined) throw new UnsupportedPattern('trailing backslash');
  if (e === 'p' || e === 'P') return property(source, i);
  return [escapeOne(e), i + 2];
}

/** The class at source[i] ('['); returns it rewritten and where it ends. */
function characterClass(source: string, i: number, folding: boolean): [string, number] {
  let out = '[';
  let at = i + 1;
  if (source[at] === '^') {
    out += '^';
    at++;
  }
  let first = true;
  while (at < source.length && (source[at] !== ']' || first)) {
    first = false;
    const c = source[at]!;
    if (c === '[') throw new UnsupportedPattern('nested class');
    if (c === '&' && source[at + 1] === '&') throw new UnsupportedPattern('class intersection');
    if (c === '\\') {
      const [text, end] = escapeAt(source, at);
      out += text;
      at = end;
      continue;
    }
    if (folding && /[A-Za-z]/.test(c)) throw new UnsupportedPattern('letters in a class under (?i:');
    const char = String.fromCodePoint(source.codePointAt(at)!);
    out += char === '-' ? '-' : SYNTAX.has(char) ? `\\${char}` : char;
    at += char.length;
  }
  if (source[at] !== ']') throw new UnsupportedPattern('unterminated class');
  return [out + ']', at + 1];
}

/**
 * The V8 source (for the `u` flag) of an Oniguruma pattern; throws
 * UnsupportedPattern naming the first construct it cannot carry over exactly.
 */
export function onigToJs(source: string): string {
  let out = '';
  // Per open group: whether it folds case.
  const groups: boolean[] = [];
  let folding = false;
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (c === '\\') {
      const [text, end] = escapeAt(source, i);
      out += text;
      i = end;
      continue;
    }
    if (c === '[') {
      const [text, end] = characterClass(source, i, folding);
      out += text;
      i = end;
      continue;
    }
    if (c === '(') {
      const head = /^\((?:\?(?:i:|:|=|!|<=|<!))?/.exec(source.slice(i))![0];
      if (head === '(' && source[i + 1] === '?') throw new UnsupportedPattern(`group ${source.slice(i, i + 4)}`);
      if (head === '(?i:' && folding) throw new UnsupportedPattern('nested (?i:');
      groups.push(folding);
      if (head === '(?i:') folding = true;
      out += head === '(?i:' ? '(?:' : head;
      i += head.length;
      continue;
    }
    if (c === ')') {
      if (groups.length === 0) throw new UnsupportedPattern('unbalanced )');
      folding = groups.pop()!;
      out += ')';
      i++;
      continue;
    }
    if (c === '*' || c === '+' || c === '?') {
      if (source[i + 1] === '+') throw new UnsupportedPattern('possessive quantifier');
      out += c;
      i++;
      continue;
    }
    if (c === '{') {
      const quantifier = /^\{\d+(?:,\d*)?\}/.exec(source.slice(i));
      if (quantifier === null) throw new UnsupportedPattern('literal {');
      out += quantifier[0];
      i += quantifier[0].length;
      if (source[i] === '+') throw new UnsupportedPattern('possessive quantifier');
      continue;
    }
    if (c === '^' || c === '$') throw new UnsupportedPattern(`anchor ${c}`);
    if (c === '.') {
      out += '[^\\n]';
      i++;
      continue;
    }
    if (c === '|') {
      out += c;
      i++;
      continue;
    }
    const char = String.fromCodePoint(source.codePointAt(i)!);
    if (folding && /[A-Za-z]/.test(char)) {
      const lower = char.toLowerCase();
      out += `[${lower}${lower.toUpperCase()}${FOLDS[lower] ?? ''}]`;
    } else if (folding && char.toLowerCase() !== char.toUpperCase()) {
      throw new UnsupportedPattern(`non-ASCII letter ${char} under (?i:`);
    } else out += char === ']' || char === '}' ? `\\${char}` : char;
    i += char.length;
  }
  if (groups.length > 0) throw new UnsupportedPattern('unbalanced (');
  try {
    new RegExp(out, 'u');
  } catch (err) {
    throw new UnsupportedPattern(`does not compile in V8: ${(err as Error).message}`);
  }
  return out;
}
