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

export function packBytes(text: string): Uint32Array {
  // encodeInto needs room for up to 3 bytes per UTF-16 unit; whole u32s, zero-filled, pad the tail.
  const bytes = new Uint8Array((text.length * 3 + 4) & ~3);
  const length = utf8.encodeInto(text, bytes).written;
  const count = Math.ceil(length / 4);
  if (LITTLE_ENDIAN) return new Uint32Array(bytes.buffer, 0, count).slice();
  const out = new Uint32Array(count);
  for (let i = 0, w = 0; i < length; i += 4, w++) {
    out[w] = (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)) >>> 0;
  }
  return out;
}
