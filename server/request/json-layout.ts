// Where things are in a chat request's JSON bytes, found without decoding
// them: the top-level keys, and where each element of the `messages` array
// ends. Strings are skipped with a native search for the next quote, so a
// scan costs about one step per string, not per byte. The scanner does not
// validate: it reads text JSON.parse has accepted, or answers null (or a
// layout the caller checks by parsing) on text that is not JSON.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

export interface MessagesLayout {
  /** The decoded top-level keys before `messages`, in order. */
  keysBefore: string[];
  /** Byte offset just past each element of the messages array (at most the elements asked for). */
  ends: number[];
  /** Byte offset of the array's closing bracket; -1 when the scan stopped before it. */
  close: number;
}

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The offset of the first byte at or after `i` that is not JSON whitespace. */
export function skipSpace(buf: Buffer, i: number): number {
  while (isSpace(buf[i])) i++;
  return i;
}

/** The offset just past the string whose opening quote is at `i`; -1 when it does not end. */
function skipString(buf: Buffer, i: number): number {
  for (;;) {
    const quote = buf.indexOf(QUOTE, i + 1);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (buf[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    // An odd run of backslashes escapes the quote.
    if ((backslashes & 1) === 0) return quote + 1;
    i = quote;
  }
}

/** The offset just past the value that starts at `i`; -1 when it does not end. */
export function skipValue(buf: Buffer, i: number): number {
  const first = buf[i];
  if (first === QUOTE) return skipString(buf, i);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let j = i; j < buf.length; ) {
      const c = buf[j]!;
      if (c === QUOTE) {
        j = skipString(buf, j);
        if (j < 0) return -1;
        continue;
      }
      if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) return j + 1;
      j++;
    }
    return -1;
  }
  // A number or a literal: up to the next delimiter.
  let j = i;
  while (j < buf.length) {
    const c = buf[j];
    if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || isSpace(c)) break;
    j++;
  }
  return j > i ? j : -1;
}

/** The member name whose opening quote is at `i`, decoded, and the offset of its value; null when there is none. */
function readKey(buf: Buffer, i: number): { key: string; value: number } | null {
  if (buf[i] !== QUOTE) return null;
  const end = skipString(buf, i);
  if (end < 0) return null;
  let key: string;
  try {
    key = JSON.parse(buf.toString('utf8', i, end)) as string;
  } catch {
    return null;
  }
  const colon = skipSpace(buf, end);
  return buf[colon] === COLON ? { key, value: skipSpace(buf, colon + 1) } : null;
}

/**
 * Scans the elements of an array from `i` (just past its opening bracket, or
 * just past an element) into `ends`, stopping after `limit` of them. Returns
 * the offset of the closing bracket, -1 when stopped at the limit, or null
 * when the text is not an array there.
 */
export function scanElements(buf: Buffer, i: number, ends: number[], limit: number, afterElement: boolean): number | null {
  i = skipSpace(buf, i);
  if (buf[i] === CLOSE_BRACKET) return i;
  if (afterElement) {
    if (buf[i] !== COMMA) return null;
    i = skipSpace(buf, i + 1);
  }
  for (;;) {
    if (ends.length >= limit) return -1;
    const end = skipValue(buf, i);
    if (end < 0) return null;
    ends.push(end);
    i = skipSpace(buf, end);
    if (buf[i] === CLOSE_BRACKET) return i;
    if (buf[i] !== COMMA) return null;
    i = skipSpace(buf, i + 1);
  }
}

/**
 * The layout of a top-level object up to its `messages` array, with at most
 * `limit` elements; null when the text is no object or has no messages array.
 */
export function messagesLayout(buf: Buffer, limit = Infinity): MessagesLayout | null {
  let i = skipSpace(buf, 0);
  if (buf[i] !== OPEN_BRACE) return null;
  const keysBefore: string[] = [];
  for (;;) {
    const member = readKey(buf, skipSpace(buf, i + 1));
    if (member === null) return null;
    i = member.value;
    if (member.key === 'messages') {
      if (buf[i] !== OPEN_BRACKET) return null;
      const ends: number[] = [];
      const close = scanElements(buf, i + 1, ends, limit, false);
      return close === null ? null : { keysBefore, ends, close };
    }
    keysBefore.push(member.key);
    i = skipValue(buf, i);
    if (i < 0) return null;
    i = skipSpace(buf, i);
    if (buf[i] !== COMMA) return null;
  }
}

/**
 * Where the value of the top-level member `key` sits ([start, end)): the
 * last one when the key is repeated, as JSON.parse keeps; null when there is
 * none or the text is no object.
 */
export function memberValue(buf: Buffer, key: string): [number, number] | null {
  let i = skipSpace(buf, 0);
  if (buf[i] !== OPEN_BRACE) return null;
  let found: [number, number] | null = null;
  for (;;) {
    const member = readKey(buf, skipSpace(buf, i + 1));
    if (member === null) return found;
    const end = skipValue(buf, member.value);
    if (end < 0) return null;
    if (member.key === key) found = [member.value, end];
    i = skipSpace(buf, end);
    if (buf[i] !== COMMA) return found;
  }
}

/** The decoded keys of the top-level members after the array that closes at `close`; null when the object does not end well. */
export function keysAfter(buf: Buffer, close: number): string[] | null {
  const keys: string[] = [];
  let i = skipSpace(buf, close + 1);
  while (buf[i] === COMMA) {
    const member = readKey(buf, skipSpace(buf, i + 1));
    if (member === null) return null;
    keys.push(member.key);
    i = skipValue(buf, member.value);
    if (i < 0) return null;
    i = skipSpace(buf, i);
  }
  return buf[i] === CLOSE_BRACE ? keys : null;
}
