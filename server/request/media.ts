// The media items (images) of a chat request and where their placeholder
// runs sit in its prompt ids, for the router's block hashes (and the
// simulated engine's, which uses the same function). An item's identity is
// the `uuid` the client gives it, read where and as vLLM reads it (a member
// of the content part, beside `type`; vLLM then uses it as the item's hash),
// else a digest of its URL, so equal inline images (data URLs) and equal
// image addresses are one item.
//
// A model with a `multimodal` config gets the engine's own runs: each image
// part renders as the model's placeholder text, and its image token is
// expanded into the run the model's processor gives the image (sized from
// the data URL's header, or an http(s) URL's when the model lets the router
// fetch it; see router/multimodal). An image whose size cannot be known
// keeps its one image token, and its run is the rest of the prompt: the
// blocks before it still match, none from it on can.
//
// Without one, an image renders as `<image>` and its run is the tokens its
// message adds to the prompt: coarser than an engine's, but the text before
// the message stays shared across images, and no block from the image on
// can match a cache of another image.
import { createHash } from 'node:crypto';
import { RouterError } from '../../router/errors.js';
import type { MediaSpan } from '../../router/media-keys.js';
import { dataUrlImageSize, type PixelSize } from '../../router/multimodal/image-size.js';
import { imageTokenCount, needsSize, type MultimodalConfig } from '../../router/multimodal/placeholders.js';
import { imageUrlOf } from '../../router/tokenize/messages.js';
import type { ChatMessage, ChatOptions, PromptTokenizer } from '../../router/tokenize/index.js';
import { fetcherOf, type ModelMultimodal } from './image-fetch.js';
import type { PromptBasis } from './prompt.js';

export const isImagePart = (part: unknown): part is object => typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'image_url';

/**
 * Whether any message has an image part. An index loop: the messages are
 * often a frozen array (body-parser.ts), on which Array.prototype.some takes
 * V8's slow generic path.
 */
export function hasImages(messages: readonly unknown[]): boolean {
  for (let i = 0; i < messages.length; i++) {
    const content = (messages[i] as { content?: unknown } | null)?.content;
    if (!Array.isArray(content)) continue;
    for (let j = 0; j < content.length; j++) if (isImagePart(content[j])) return true;
  }
  return false;
}

/** The image parts of a message, in order (none for string content). */
export function imagePartsOf(message: unknown): object[] {
  const content = (message as { content?: unknown } | null)?.content;
  return Array.isArray(content) ? content.filter(isImagePart) : [];
}

/**
 * The uuid a client gave an image part, as vLLM takes it: the part's own
 * `uuid` member (one inside `image_url` is not read), any string (the empty
 * one too), and an integer as its decimal text (vLLM applies str() to it);
 * null when there is none the router can follow.
 */
export function givenUuid(part: object): string | null {
  const given = (part as { uuid?: unknown }).uuid;
  if (typeof given === 'string') return given;
  if (typeof given === 'number' && Number.isSafeInteger(given)) return String(given);
  return null;
}

/** The router's own identifier of an image: a digest of its URL (a data: URL holds the image's bytes). */
function imageDigest(part: object): string {
  return createHash('sha256').update(imageUrlOf(part, 'image_url')).digest('hex');
}

function identityOf(part: object): string {
  return givenUuid(part) ?? imageDigest(part);
}

function invalid(message: string): RouterError {
  return new RouterError('KVR_ERR_INVALID_REQUEST', message, { param: 'messages' });
}

/** A message's parts as its template's text, the model's way (see ContentFormat). */
function renderParts(parts: unknown[], config: MultimodalConfig, at: string): string {
  const texts: string[] = [];
  const images: string[] = [];
  parts.forEach((part, j) => {
    if (typeof part !== 'object' || part === null) throw invalid(`${at}.content[${j}] must be an object`);
    const { type, text } = part as { type?: unknown; text?: unknown };
    if (type === 'image_url') {
      try {
        imageUrlOf(part, `${at}.content[${j}]`);
      } catch (error) {
        throw invalid((error as Error).message);
      }
      (config.contentFormat === 'openai' ? texts : images).push(config.placeholder);
      return;
    }
    if (type !== 'text') throw invalid(`${at}.content[${j}].type must be "text" or "image_url" (got ${JSON.stringify(type)}): only text and images can be routed`);
    if (typeof text !== 'string') throw invalid(`${at}.content[${j}].text must be a string`);
    texts.push(text);
  });
  return config.contentFormat === 'openai' ? texts.join('') : [...images, texts.join('\n')].join('\n');
}

/**
 * Messages with image parts, by identity, rendered for one model's config:
 * a conversation's earlier messages come back turn after turn as the same
 * frozen objects, and keep one frozen rendering, so the tokenizer's caches
 * keyed by message stay valid for them.
 */
const rendered = new WeakMap<MultimodalConfig, WeakMap<object, ChatMessage>>();

/**
 * The messages with each image-bearing message's content rendered to the
 * text its template sees for the model (other messages as given).
 */
export function renderImages(messages: readonly unknown[], config: MultimodalConfig): unknown[] {
  let cache = rendered.get(config);
  if (!cache) rendered.set(config, (cache = new WeakMap()));
  return messages.map((message, m) => {
    if (imagePartsOf(message).length === 0) return message;
    const known = cache.get(message as object);
    if (known) return known;
    const out = { ...(message as ChatMessage), content: renderParts((message as { content: unknown[] }).content, config, `messages[${m}]`) };
    if (Object.isFrozen(message)) cache.set(message as object, Object.freeze(out));
    return out;
  });
}

/** The id of the one token a text encodes to, or null when it is not one token of the tokenizer. */
function soleToken(tokenizer: PromptTokenizer, text: string): number | null {
  const ids = tokenizer.encodeText(text);
  const empty = tokenizer.encodeText('');
  // encodeText adds the tokenizer's BOS/EOS: what it gives the empty text is around the token.
  let head = 0;
  while (head < empty.length && ids[head] === empty[head]) head++;
  const tail = empty.length - head;
  return ids.length - head - tail === 1 ? ids[head]! : null;
}

const imageTokens = new WeakMap<PromptTokenizer, Map<string, number | null>>();

function imageTokenOf(tokenizer: PromptTokenizer, token: string): number | null {
  let known = imageTokens.get(tokenizer);
  if (!known) imageTokens.set(tokenizer, (known = new Map()));
  if (!known.has(token)) known.set(token, soleToken(tokenizer, token));
  return known.get(token)!;
}

export interface ExpandedPrompt {
  ids: Uint32Array;
  spans: MediaSpan[];
}

/** The pixel sizes of a prompt's images, in order (null where unknown), when the model's runs need them. */
async function imageSizes(parts: readonly object[], settings: ModelMultimodal): Promise<(PixelSize | null)[]> {
  if (!needsSize(settings)) return parts.map(() => null);
  const fetcher = fetcherOf(settings);
  return Promise.all(
    parts.map((part) => {
      const url = imageUrlOf(part, 'image_url');
      if (fetcher && /^https?:\/\//i.test(url)) return fetcher.size(url);
      return dataUrlImageSize(url);
    }),
  );
}

/**
 * The prompt ids with each image's token expanded into its run, and the
 * runs; null when the model's image token is not one token of its tokenizer
 * (the coarse runs of chatMedia apply then). `sizes` are the images' pixel
 * sizes in prompt order (null where unknown). Throws a RouterError (400) when
 * the prompt's image tokens do not pair with its images (text that contains
 * the image token), or an image's size is one the processor refuses.
 */
export function expandImages(
  tokenizer: PromptTokenizer,
  messages: readonly unknown[],
  ids: Uint32Array,
  config: MultimodalConfig,
  sizes: readonly (PixelSize | null)[],
): ExpandedPrompt | null {
  const token = imageTokenOf(tokenizer, config.imageToken);
  if (token === null) return null;
  const parts = messages.flatMap(imagePartsOf);
  const at: number[] = [];
  for (let i = 0; i < ids.length; i++) if (ids[i] === token) at.push(i);
  if (at.length !== parts.length) {
    throw invalid(`the prompt has ${at.length} image tokens ${JSON.stringify(config.imageToken)} for ${parts.length} images: message text must not contain the image token`);
  }
  const counts = parts.map((_, k) => {
    try {
      return imageTokenCount(config, sizes[k] ?? null);
    } catch (error) {
      if (error instanceof RangeError) throw invalid(error.message);
      throw error;
    }
  });
  let length = ids.length;
  for (const n of counts) if (n !== null) length += n - 1;
  const out = new Uint32Array(length);
  const spans: MediaSpan[] = [];
  let from = 0;
  let to = 0;
  parts.forEach((part, k) => {
    const pos = at[k]!;
    out.set(ids.subarray(from, pos), to);
    to += pos - from;
    const n = counts[k] ?? 1;
    out.fill(token, to, to + n);
    // Unsized, the run is the rest of the prompt: no block from the image on can match.
    spans.push({ id: identityOf(part), offset: to, length: counts[k] === null ? length - to : n });
    to += n;
    from = pos + 1;
  });
  out.set(ids.subarray(from), to);
  return { ids: out, spans };
}

/**
 * The coarse media spans of a chat prompt whose messages were already
 * validated (tokenized): each image's run is its message's tokens. `ids` is
 * the whole prompt: on a prompt routed on its bytes, each item spans all of it.
 * `shown` are the messages as tokenized (default: as given).
 */
export function chatMedia(tokenizer: PromptTokenizer, messages: ChatMessage[], options: ChatOptions, ids: Uint32Array, basis: PromptBasis, shown: ChatMessage[] = messages): MediaSpan[] {
  const spans: MediaSpan[] = [];
  const upTo = new Map<number, number>();
  const length = (count: number): number => {
    if (count === 0) return 0;
    let n = upTo.get(count);
    if (n === undefined) {
      n = Math.min(tokenizer.encodeChat(shown.slice(0, count), { ...options, addGenerationPrompt: false }).length, ids.length);
      upTo.set(count, n);
    }
    return n;
  };
  messages.forEach((message, m) => {
    const images = imagePartsOf(message).map(identityOf);
    if (images.length === 0) return;
    let offset = 0;
    let end = ids.length;
    if (basis === 'tokens') {
      try {
        offset = length(m);
        end = length(m + 1);
      } catch {
        // A template that cannot render the shorter conversation: the item spans the prompt.
        offset = 0;
        end = ids.length;
      }
    }
    for (const id of images) spans.push({ id, offset, length: Math.max(1, end - offset) });
  });
  return spans;
}

/**
 * A chat prompt's ids and media: the engine's runs for a model with a
 * multimodal config (the ids expanded), else the coarse ones. `shown` are the
 * messages as tokenized (renderImages' output for such a model).
 */
export async function withMedia(
  tokenizer: PromptTokenizer,
  messages: ChatMessage[],
  shown: ChatMessage[],
  options: ChatOptions,
  prompt: { ids: Uint32Array; basis: PromptBasis },
  settings: ModelMultimodal | null,
): Promise<{ ids: Uint32Array; media: MediaSpan[] }> {
  let expanded: ExpandedPrompt | null = null;
  if (settings && prompt.basis === 'tokens') {
    const sizes = await imageSizes(messages.flatMap(imagePartsOf), settings);
    expanded = expandImages(tokenizer, messages, prompt.ids, settings, sizes);
  }
  if (expanded) return { ids: expanded.ids, media: expanded.spans };
  return { ids: prompt.ids, media: chatMedia(tokenizer, messages, options, prompt.ids, prompt.basis, shown) };
}
