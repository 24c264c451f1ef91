// Sizing http(s) images by reading their first bytes, over real HTTP from a
// local server: the Range request, the byte and time limits, redirects not
// followed, and one fetch per URL however many requests ask.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageSizeFetcher } from '../../server/request/image-fetch.js';
import { jpegHeader, pngHeader } from '../helpers/image-headers.js';

let server: Server;
let base: string;
const hits = new Map<string, number>();
const seen: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    hits.set(req.url!, (hits.get(req.url!) ?? 0) + 1);
    seen.push(req.headers);
    if (req.url === '/cat.png') {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end(Buffer.concat([pngHeader(640, 480), Buffer.alloc(200_000)]));
    } else if (req.url === '/exif.jpg') {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.end(jpegHeader(1920, 1080, { app1Bytes: 60_000 }));
    } else if (req.url === '/moved.png') {
      res.writeHead(302, { location: '/cat.png' });
      res.end();
    } else if (req.url === '/slow.png') {
      // Never answers: the fetch must give up on its own.
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('ImageSizeFetcher', () => {
  it('reads the size from the first bytes, asking for a range, and remembers it', async () => {
    const fetcher = new ImageSizeFetcher({ timeoutMs: 10_000, maxBytes: 65536 });
    const [a, b] = await Promise.all([fetcher.size(`${base}/cat.png`), fetcher.size(`${base}/cat.png`)]);
    expect(a).toEqual({ width: 640, height: 480 });
    expect(b).toEqual(a);
    expect(await fetcher.size(`${base}/cat.png`)).toEqual(a);
    expect(hits.get('/cat.png')).toBe(1);
    expect(fetcher.fetches).toBe(1);
    expect(seen.find((h) => h.range)?.range).toBe('bytes=0-65535');
  });

  it('reads a JPEG past a large EXIF block within the byte limit, and gives up past it', async () => {
    expect(await new ImageSizeFetcher({ timeoutMs: 10_000, maxBytes: 1 << 20 }).size(`${base}/exif.jpg`)).toEqual({ width: 1920, height: 1080 });
    expect(await new ImageSizeFetcher({ timeoutMs: 10_000, maxBytes: 4096 }).size(`${base}/exif.jpg`)).toBeNull();
  });

  it('knows no size for a missing image, a redirect, an unreachable host or one that never answers', async () => {
    const fetcher = new ImageSizeFetcher({ timeoutMs: 300, maxBytes: 65536 });
    expect(await fetcher.size(`${base}/gone.png`)).toBeNull();
    expect(await fetcher.size(`${base}/moved.png`)).toBeNull();
    expect(await fetcher.size('http://127.0.0.1:1/x.png')).toBeNull();
    expect(await fetcher.size(`${base}/slow.png`)).toBeNull();
    // A failure is remembered for a while too: no second fetch.
    expect(await fetcher.size(`${base}/gone.png`)).toBeNull();
    expect(hits.get('/gone.png')).toBe(1);
  });
});
