// Image sizes of http(s) image URLs, for a model whose config lets the
// router fetch them (`multimodal.fetch_images`): only the file's first bytes
// are read (a Range request, and the body cut as soon as the header gives
// the size or the byte limit is reached; redirects are not followed),
// within a time limit, and the
// answer is remembered per URL. A URL that fails is unsized (its run is the
// rest of the prompt) and is tried again after a while.
import { request } from 'undici';
import { imageSize, type PixelSize } from '../../router/multimodal/image-size.js';
import type { MultimodalConfig } from '../../router/multimodal/placeholders.js';

export interface ImageFetchLimits {
  /** Longest a fetch may take, headers and body. */
  timeoutMs: number;
  /** Most bytes read from one image. */
  maxBytes: number;
}

/**
 * A model's multimodal settings: the engine's placeholder runs, whether the
 * router fetches http(s) images to size them, and whether it gives images
 * without a uuid its own identifier as their uuid (null: when the model's
 * engine is vLLM; see image-uuids.ts).
 */
export type ModelMultimodal = MultimodalConfig & { fetchImages: ImageFetchLimits | null; injectUuid: boolean | null };

/** URLs remembered (least recently used dropped first). */
const CACHE_ENTRIES = 4096;
/** How long a failed URL stays unsized before it is fetched again. */
const RETRY_AFTER_MS = 60_000;

interface Known {
  size: PixelSize | null;
  at: number;
}

export class ImageSizeFetcher {
  private readonly known = new Map<string, Known>();
  private readonly pending = new Map<string, Promise<PixelSize | null>>();
  /** Fetches started (not answered from memory), for tests and stats. */
  fetches = 0;

  constructor(private readonly limits: ImageFetchLimits) {}

  /** The image's size, or null when it cannot be had within the limits. */
  size(url: string): Promise<PixelSize | null> {
    const known = this.known.get(url);
    if (known && (known.size !== null || performance.now() - known.at < RETRY_AFTER_MS)) {
      this.known.delete(url);
      this.known.set(url, known);
      return Promise.resolve(known.size);
    }
    let pending = this.pending.get(url);
    if (!pending) {
      this.fetches++;
      pending = this.read(url).then((size) => {
        this.pending.delete(url);
        this.known.delete(url);
        this.known.set(url, { size, at: performance.now() });
        if (this.known.size > CACHE_ENTRIES) this.known.delete(this.known.keys().next().value!);
        return size;
      });
      this.pending.set(url, pending);
    }
    return pending;
  }

  private async read(url: string): Promise<PixelSize | null> {
    const signal = AbortSignal.timeout(this.limits.timeoutMs);
    try {
      const res = await request(url, { method: 'GET', headers: { range: `bytes=0-${this.limits.maxBytes - 1}` }, signal });
      if (res.statusCode !== 200 && res.statusCode !== 206) {
        await res.body.dump();
        return null;
      }
      const chunks: Uint8Array[] = [];
      let length = 0;
      let size: PixelSize | null | undefined;
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        // Past the limit (a server that ignores the range): only the first maxBytes count.
        const part = chunk.subarray(0, this.limits.maxBytes - length);
        chunks.push(part);
        length += part.length;
        size = imageSize(chunks.length === 1 ? part : Buffer.concat(chunks, length));
        // A size, or bytes that are no image: done. A JPEG cut before its frame header: read on, within the limit.
        if (size !== undefined || length >= this.limits.maxBytes) break;
      }
      res.body.destroy();
      return size ?? null;
    } catch {
      return null; // refused, reset, timed out, or no valid URL: unsized
    }
  }
}

const fetchers = new WeakMap<ModelMultimodal, ImageSizeFetcher>();

/** The fetcher of a model's settings (one per model, so its memory is the model's). */
export function fetcherOf(settings: ModelMultimodal): ImageSizeFetcher | null {
  if (!settings.fetchImages) return null;
  let fetcher = fetchers.get(settings);
  if (!fetcher) fetchers.set(settings, (fetcher = new ImageSizeFetcher(settings.fetchImages)));
  return fetcher;
}
