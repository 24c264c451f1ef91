// Image file headers written byte by byte from the formats' specifications
// (PNG IHDR, JPEG segments, GIF logical screen, WebP VP8/VP8L/VP8X chunks):
// what the router reads an image's size from. Only the header is real; no
// pixels follow, as the router reads none.

const u32be = (n: number) => [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
const u16be = (n: number) => [(n >>> 8) & 255, n & 255];
const u16le = (n: number) => [n & 255, (n >>> 8) & 255];
const u24le = (n: number) => [n & 255, (n >>> 8) & 255, (n >>> 16) & 255];
const text = (s: string) => [...s].map((c) => c.charCodeAt(0));

export function pngHeader(width: number, height: number): Uint8Array {
  // Signature, then the IHDR chunk: length 13, type, width, height, depth 8, colour type 2 (RGB), 3 zero bytes, a CRC (not checked).
  return Uint8Array.from([0x89, ...text('PNG\r\n\x1a\n'), ...u32be(13), ...text('IHDR'), ...u32be(width), ...u32be(height), 8, 2, 0, 0, 0, 0, 0, 0, 0]);
}

/** SOI, an APP0 (JFIF) segment, an APP1 segment of `app1Bytes` payload bytes, then a start-of-frame of the given marker. */
export function jpegHeader(width: number, height: number, options: { app1Bytes?: number; frameMarker?: number } = {}): Uint8Array {
  const app0 = [0xff, 0xe0, ...u16be(16), ...text('JFIF'), 0, 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const app1 = options.app1Bytes ? [0xff, 0xe1, ...u16be(options.app1Bytes + 2), ...new Array(options.app1Bytes).fill(0x45)] : [];
  // SOFn: length 17, precision 8, height, width, 3 components of 3 bytes.
  const sof = [0xff, options.frameMarker ?? 0xc0, ...u16be(17), 8, ...u16be(height), ...u16be(width), 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1];
  return Uint8Array.from([0xff, 0xd8, ...app0, ...app1, ...sof, 0xff, 0xd9]);
}

export function gifHeader(width: number, height: number): Uint8Array {
  return Uint8Array.from([...text('GIF89a'), ...u16le(width), ...u16le(height), 0xf7, 0, 0]);
}

function riff(chunk: string, payload: number[]): Uint8Array {
  return Uint8Array.from([...text('RIFF'), ...u32be(0).reverse(), ...text('WEBP'), ...text(chunk), ...u32be(payload.length).reverse(), ...payload]);
}

/** Lossy: a key-frame tag, the start code, then 14-bit width and height. */
export function webpLossyHeader(width: number, height: number): Uint8Array {
  return riff('VP8 ', [0x30, 0x01, 0x00, 0x9d, 0x01, 0x2a, ...u16le(width), ...u16le(height), 0, 0]);
}

/** Lossless: signature 0x2f, then width - 1 and height - 1 in 14 bits each, LSB first. */
export function webpLosslessHeader(width: number, height: number): Uint8Array {
  const bits = ((width - 1) | ((height - 1) << 14)) >>> 0;
  return riff('VP8L', [0x2f, bits & 255, (bits >>> 8) & 255, (bits >>> 16) & 255, (bits >>> 24) & 255, 0, 0, 0, 0]);
}

/** Extended: flags, 3 reserved bytes, then canvas width - 1 and height - 1 in 24 bits each. */
export function webpExtendedHeader(width: number, height: number): Uint8Array {
  return riff('VP8X', [0x10, 0, 0, 0, ...u24le(width - 1), ...u24le(height - 1)]);
}

export function dataUrl(bytes: Uint8Array, mime = 'image/png'): string {
  return `data:${mime};base64,${Buffer.from(bytes).toString('base64')}`;
}
