// Image sizes read from file headers (no pixels decoded), for each format an
// engine takes inline, and from data: URLs.
import { describe, expect, it } from 'vitest';
import { dataUrlImageSize, imageSize } from '../../router/multimodal/image-size.js';
import { dataUrl, gifHeader, jpegHeader, pngHeader, webpExtendedHeader, webpLosslessHeader, webpLossyHeader } from '../helpers/image-headers.js';

describe('imageSize', () => {
  it.each([
    ['PNG', pngHeader(640, 480)],
    ['JPEG baseline', jpegHeader(640, 480)],
    ['JPEG progressive', jpegHeader(640, 480, { frameMarker: 0xc2 })],
    ['GIF', gifHeader(640, 480)],
    ['WebP lossy', webpLossyHeader(640, 480)],
    ['WebP lossless', webpLosslessHeader(640, 480)],
    ['WebP extended', webpExtendedHeader(640, 480)],
  ])('reads width 640 and height 480 from a %s header', (_, bytes) => {
    expect(imageSize(bytes)).toEqual({ width: 640, height: 480 });
  });

  it('reads sides past 16 bits (PNG) and up to the formats\' own limits (WebP lossless 16384)', () => {
    expect(imageSize(pngHeader(70_000, 3))).toEqual({ width: 70_000, height: 3 });
    expect(imageSize(webpLosslessHeader(16384, 1))).toEqual({ width: 16384, height: 1 });
    expect(imageSize(webpExtendedHeader(20_000, 9_000))).toEqual({ width: 20_000, height: 9_000 });
  });

  it('skips a JPEG\'s segments before its frame header, and says when the bytes end first', () => {
    const long = jpegHeader(1920, 1080, { app1Bytes: 10_000 });
    expect(imageSize(long)).toEqual({ width: 1920, height: 1080 });
    expect(imageSize(long.subarray(0, 4096))).toBeUndefined();
  });

  it('knows no size for other bytes, a cut header or a zero side', () => {
    expect(imageSize(new TextEncoder().encode('not an image at all, just text'))).toBeNull();
    expect(imageSize(pngHeader(640, 480).subarray(0, 20))).toBeNull();
    expect(imageSize(pngHeader(0, 480))).toBeNull();
    expect(imageSize(webpLossyHeader(640, 480).subarray(0, 25))).toBeNull();
  });
});

describe('dataUrlImageSize', () => {
  it('reads the size from a base64 data URL, a JPEG whose frame header is past the first 4 KiB included', () => {
    expect(dataUrlImageSize(dataUrl(pngHeader(224, 224)))).toEqual({ width: 224, height: 224 });
    expect(dataUrlImageSize(dataUrl(jpegHeader(1920, 1080, { app1Bytes: 20_000 }), 'image/jpeg'))).toEqual({ width: 1920, height: 1080 });
  });

  it('reads the URL-safe base64 alphabet too', () => {
    const url = dataUrl(gifHeader(1023, 4095)).replace(/\+/g, '-').replace(/\//g, '_');
    expect(dataUrlImageSize(url)).toEqual({ width: 1023, height: 4095 });
  });

  it('knows no size for a URL it cannot read the image from', () => {
    expect(dataUrlImageSize('https://example.com/cat.png')).toBeNull();
    expect(dataUrlImageSize('data:image/png,%89PNG')).toBeNull();
    expect(dataUrlImageSize('data:image/png;base64,!!!!')).toBeNull();
    expect(dataUrlImageSize('data:image/png;base64')).toBeNull();
  });
});
