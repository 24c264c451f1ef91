// An image's pixel size read from its file header, without decoding pixels:
// the number of placeholder tokens a vision model gives an image depends
// only on it. Covers the formats engines accept inline (PNG, JPEG, GIF,
// WebP), as the header states them (no EXIF orientation applied: the engines
// size the image as stored).

export interface PixelSize {
  width: number;
  height: number;
}

const be16 = (b: Uint8Array, i: number) => (b[i]! << 8) | b[i + 1]!;
const le16 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8);
const le24 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16);
const be32 = (b: Uint8Array, i: number) => ((b[i]! << 24) | (b[i + 1]! << 16) | (b[i + 2]! << 8) | b[i + 3]!) >>> 0;
const ascii = (b: Uint8Array, i: number, text: string) => {
  for (let k = 0; k < text.length; k++) if (b[i + k] !== text.charCodeAt(k)) return false;
  return true;
};

function sized(width: number, height: number): PixelSize | null {
  return width > 0 && height > 0 ? { width, height } : null;
}

function png(b: Uint8Array): PixelSize | null {
  if (b.length < 24 || !ascii(b, 12, 'IHDR')) return null;
  return sized(be32(b, 16), be32(b, 20));
}

function gif(b: Uint8Array): PixelSize | null {
  return b.length < 10 ? null : sized(le16(b, 6), le16(b, 8));
}

function webp(b: Uint8Array): PixelSize | null {
  if (b.length < 25) return null;
  if (ascii(b, 12, 'VP8 ')) {
    if (b.length < 30) return null;
    // Lossy: after the 3-byte frame tag, the start code 9d 01 2a, then 14-bit width and height.
    if (b[23] !== 0x9d || b[24] !== 0x01 || b[25] !== 0x2a) return null;
    return sized(le16(b, 26) & 0x3fff, le16(b, 28) & 0x3fff);
  }
  if (ascii(b, 12, 'VP8L')) {
    // Lossless: signature 0x2f, then width - 1 and height - 1 in 14 bits each, little-endian bit order.
    if (b[20] !== 0x2f) return null;
    const bits = b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24);
    return sized((bits & 0x3fff) + 1, ((bits >>> 14) & 0x3fff) + 1);
  }
  if (ascii(b, 12, 'VP8X')) return b.length < 30 ? null : sized(le24(b, 24) + 1, le24(b, 27) + 1);
  return null;
}

/** JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); not DHT (c4), JPG (c8) or DAC (cc). */
const isStartOfFrame = (marker: number) => marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;

/** undefined: the header runs past the bytes given (more may find it). */
function jpeg(b: Uint8Array): PixelSize | null | undefined {
  let i = 2;
  for (;;) {
    if (i + 4 > b.length) return undefined;
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1]!;
    if (marker === 0xff) {
      i++; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      i += 2; // markers without a length
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) return null; // end of image or scan data before any frame header
    if (isStartOfFrame(marker)) {
      if (i + 9 > b.length) return undefined;
      return sized(be16(b, i + 7), be16(b, i + 5));
    }
    i += 2 + be16(b, i + 2);
  }
}

/**
 * The size an image file's header states; null when the bytes are no
 * PNG, JPEG, GIF or WebP, or are cut before the size; undefined when they
 * are a JPEG cut before its frame header (more bytes may have it).
 */
export function imageSize(bytes: Uint8Array): PixelSize | null | undefined {
  if (bytes.length >= 8 && bytes[0] === 0x89 && ascii(bytes, 1, 'PNG\r\n\x1a\n')) return png(bytes);
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return jpeg(bytes);
  if (ascii(bytes, 0, 'GIF87a') || ascii(bytes, 0, 'GIF89a')) return gif(bytes);
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WEBP')) return webp(bytes);
  return null;
}

const BASE64 = new Int16Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) BASE64[c.charCodeAt(0)] = i;
BASE64['-'.charCodeAt(0)] = 62; // the URL-safe alphabet
BASE64['_'.charCodeAt(0)] = 63;

/** The first bytes of base64 text from `start`, at most about `maxBytes`; null on a character outside base64. */
function decodeBase64(text: string, start: number, maxBytes: number): Uint8Array | null {
  const out = new Uint8Array(Math.min(maxBytes, Math.ceil(((text.length - start) * 3) / 4)));
  let n = 0;
  let acc = 0;
  let bits = 0;
  for (let i = start; i < text.length && n < out.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 61) break; // "=": padding ends the data
    const v = c < 128 ? BASE64[c]! : -1;
    if (v < 0) return null;
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >>> bits) & 0xff;
    }
  }
  return out.subarray(0, n);
}

/** Header bytes read first; a JPEG whose frame header lies past them (a large EXIF block) is read whole. */
const HEADER_BYTES = 4096;

/**
 * The pixel size of a `data:` URL's image (base64 only), from its header;
 * null for any other URL or an image whose size cannot be read.
 */
export function dataUrlImageSize(url: string): PixelSize | null {
  if (!url.startsWith('data:')) return null;
  const comma = url.indexOf(',');
  if (comma < 0 || !url.slice(5, comma).split(';').includes('base64')) return null;
  const head = decodeBase64(url, comma + 1, HEADER_BYTES);
  if (head === null) return null;
  const size = imageSize(head);
  if (size !== undefined) return size;
  const whole = decodeBase64(url, comma + 1, Number.MAX_SAFE_INTEGER);
  return whole === null ? null : (imageSize(whole) ?? null);
}
