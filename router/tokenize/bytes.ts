// Tokenizer-free routing for engines that publish no KV events: the rendered
// prompt's UTF-8 bytes are packed 4 per u32 "token id", little-endian (byte
// k of a group lands in bits 8k..8k+7), the last group zero-padded. Blocks
// of these ids hash the prompt's byte prefix, so prompts sharing a prefix
// share leading blocks, which is all prefix routing needs. Zero padding
// makes "ab" and "ab\0\0" pack alike; NUL bytes never end a chat prompt in
// practice.

const utf8 = new TextEncoder();
/** Whether this platform stores a u32 little-endian: then the bytes are the packed ids already. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/** UTF-16 units encoded per step: the buffer grows with the text's real UTF-8 size, not 3 bytes per unit. */
const CHUNK = 1 << 16;

/** The UTF-8 bytes of text in a buffer whose length is a multiple of 4, zero-padded; and how many are text. */
function utf8Words(text: string): { bytes: Uint8Array; length: number } {
  let bytes = new Uint8Array((text.length + 7) & ~3);
  let length = 0;
  for (let at = 0; at < text.length; ) {
    let end = Math.min(text.length, at + CHUNK);
    // A surrogate pair split across steps would encode as two replacement characters.
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last < 0xdc00) end--;
    if (length + 3 * (end - at) > bytes.length) {
      const grown = new Uint8Array((Math.max(length + 3 * (end - at), 2 * bytes.length) + 7) & ~3);
      grown.set(bytes.subarray(0, length));
      bytes = grown;
    }
    length += utf8.encodeInto(end - at === text.length ? text : text.substring(at, end), bytes.subarray(length)).written;
    at = end;
  }
  return { bytes, length };
}

export function packBytes(text: string): Uint32Array {
  const { bytes, length } = utf8Words(text);
  const count = Math.ceil(length / 4);
  if (LITTLE_ENDIAN) return new Uint32Array(bytes.buffer, 0, count);
  const out = new Uint32Array(count);
  for (let i = 0, w = 0; i < length; i += 4, w++) {
    out[w] = (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)) >>> 0;
  }
  return out;
}
