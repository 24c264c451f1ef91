// Media items (images) in a prompt's block hashes. An engine that serves
// multimodal prompts fills each image's place in the prompt with a run of
// placeholder tokens that are the same for every image, so it folds the
// image's identity into the hash of every block the run overlaps: per block,
// the items it overlaps, each as (identifier, offset of the run's start
// relative to the block's first token). The router folds the same keys into
// its own local hash of such a block, from the engine's KV events and from a
// request's images alike, so a prompt with an image matches only blocks
// cached for that image. Pure: used by the router's index, its requests and
// the simulated engine.
import type { MediaKey } from './kv-events.js';

/** One media item's placeholder run in a prompt's tokens. */
export interface MediaSpan {
  id: string;
  /** Index of the run's first token. */
  offset: number;
  /** Tokens in the run (at least 1). */
  length: number;
}

/** What folding needs of a block hasher (the wasm one and its twin both fit). */
export interface MediaHasher {
  localHashes(tokens: ArrayLike<number>, blockSize: number, seed?: bigint): BigUint64Array;
  xxh3(bytes: Uint8Array, seed?: bigint): bigint;
}

/**
 * Per full block of a prompt, the media keys of the spans it overlaps (null
 * where none does), or null when no block has any. Spans must be in prompt
 * order.
 */
export function blockMedia(spans: readonly MediaSpan[], blocks: number, blockSize: number): (MediaKey[] | null)[] | null {
  if (spans.length === 0 || blocks === 0) return null;
  const out: (MediaKey[] | null)[] = new Array(blocks).fill(null);
  let any = false;
  for (const span of spans) {
    const first = Math.floor(span.offset / blockSize);
    const last = Math.min(blocks - 1, Math.floor((span.offset + span.length - 1) / blockSize));
    for (let b = first; b <= last; b++) {
      (out[b] ??= []).push({ id: span.id, offset: span.offset - b * blockSize });
      any = true;
    }
  }
  return any ? out : null;
}

const utf8 = new TextEncoder();

/**
 * The local hashes with each block that has media keys hashed again under a
 * seed that folds them in (block 0's from `firstSeed`: a salted prompt's
 * first block keeps its salt); blocks without keep theirs. `local` is not changed.
 */
export function foldMedia(
  hasher: MediaHasher,
  tokens: ArrayLike<number>,
  local: BigUint64Array,
  media: readonly (readonly MediaKey[] | null)[],
  blockSize: number,
  seed: bigint,
  firstSeed: bigint = seed,
): BigUint64Array {
  const out = local.slice();
  const n = Math.min(local.length, media.length);
  for (let b = 0; b < n; b++) {
    const keys = media[b];
    if (!keys || keys.length === 0) continue;
    const block = Array.prototype.slice.call(tokens, b * blockSize, (b + 1) * blockSize) as number[];
    out[b] = hasher.localHashes(block, blockSize, mediaSeed(hasher, keys, b === 0 ? firstSeed : seed))[0]!;
  }
  return out;
}

function mediaSeed(hasher: MediaHasher, keys: readonly MediaKey[], seed: bigint): bigint {
  const text = keys.map((k) => `${k.id}\u0000${k.offset}`).join('\u0001');
  return hasher.xxh3(utf8.encode(text), seed);
}
