// Where a pre-tokenizer pattern, run by V8, ends each piece of a text: the
// reference the core's own pre-tokenizers are checked against.
import { expect } from 'vitest';

const utf8 = new TextEncoder();

/** Piece ends (UTF-8 byte offsets) of the pattern's matches; asserts no text lies between them. */
export function patternEnds(pattern: string, text: string): number[] {
  const ends: number[] = [];
  let at = 0;
  let unit = 0;
  for (const match of text.matchAll(new RegExp(pattern, 'ug'))) {
    expect(match.index).toBe(unit);
    unit += match[0].length;
    at += utf8.encode(match[0]).length;
    ends.push(at);
  }
  expect(unit).toBe(text.length);
  return ends;
}
