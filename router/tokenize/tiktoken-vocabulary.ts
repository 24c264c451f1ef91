// Reads a js-tiktoken rank file into a BpeVocabulary. The file's `bpe_ranks`
// holds lines "<tag> <first id> <token> <token> ...": tokens are base64 of
// their bytes, with ids counting up from the first id.
import type { TiktokenBPE } from 'js-tiktoken/lite';
import type { BpeVocabulary } from '../../bindings/bpe.js';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const SIXTETS = new Int8Array(128).fill(-1);
for (let i = 0; i < BASE64.length; i++) SIXTETS[BASE64.charCodeAt(i)] = i;

/** Decodes base64 `text[start..end)` into out at `at`; returns the bytes written. */
function decodeBase64(text: string, start: number, end: number, out: Uint8Array, at: number): number {
  let bits = 0;
  let held = 0;
  let n = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3d) break; // '=' padding
    const v = c < 128 ? SIXTETS[c]! : -1;
    if (v < 0) throw new RangeError(`tiktoken ranks: "${text.slice(start, end)}" is not base64`);
    bits = (bits << 6) | v;
    held += 6;
    if (held >= 8) {
      held -= 8;
      out[at + n++] = (bits >>> held) & 0xff;
    }
  }
  return n;
}

export function tiktokenVocabulary(ranks: TiktokenBPE): BpeVocabulary {
  const text = ranks.bpe_ranks;
  // Base64 takes at least 4 characters per 3 bytes, so the text length bounds the bytes.
  const bytes = new Uint8Array(text.length);
  const starts: number[] = [0];
  const ids: number[] = [];
  let used = 0;
  for (const line of text.split('\n')) {
    if (line.length === 0) continue;
    const fields = line.split(' ');
    const first = Number.parseInt(fields[1] ?? '', 10);
    if (!Number.isSafeInteger(first) || first < 0) throw new RangeError(`tiktoken ranks: bad first id in line "${line.slice(0, 40)}"`);
    let offset = fields[0]!.length + fields[1]!.length + 2;
    for (let i = 2; i < fields.length; i++) {
      const token = fields[i]!;
      used += decodeBase64(line, offset, offset + token.length, bytes, used);
      offset += token.length + 1;
      starts.push(used);
      ids.push(first + i - 2);
    }
  }
  return { bytes: bytes.slice(0, used), offsets: Uint32Array.from(starts), ranks: Uint32Array.from(ids), pattern: ranks.pat_str };
}
