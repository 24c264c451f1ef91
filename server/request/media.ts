// The media items (images) of a chat request and where their placeholder
// runs sit in its prompt ids, for the router's block hashes (and the embedded
// simulated engine's, which uses the same function). An item's identity is
// the `uuid` the client gives it (vLLM then uses that as the item's hash
// too), else a digest of its URL, so equal inline images (data URLs) and
// equal image addresses are one item. Its run is the tokens its message adds
// to the prompt: the conversation up to that message and up to the one
// before, rendered and counted. That is coarser than an engine's run (which
// covers only the image's own placeholder tokens), but the text before the
// message (the system prompt, earlier turns) stays shared across images, and
// no block from the image on can match a cache of another image.
import { createHash } from 'node:crypto';
import type { MediaSpan } from '../../router/media-keys.js';
import { imageUrlOf } from '../../router/tokenize/messages.js';
import type { ChatMessage, ChatOptions, PromptTokenizer } from '../../router/tokenize/index.js';
import type { PromptBasis } from './prompt.js';

/** Whether any message has an image part. */
export function hasImages(messages: readonly unknown[]): boolean {
  return messages.some((message) => {
    const content = (message as { content?: unknown } | null)?.content;
    return Array.isArray(content) && content.some((part) => typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'image_url');
  });
}

/** The identities of a message's image parts, in order (none for string content). */
function imagesOf(message: unknown): string[] {
  const content = (message as { content?: unknown } | null)?.content;
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const part of content) {
    if (typeof part !== 'object' || part === null || (part as { type?: unknown }).type !== 'image_url') continue;
    out.push(identityOf(part));
  }
  return out;
}

function identityOf(part: object): string {
  const given = (part as { uuid?: unknown }).uuid ?? ((part as { image_url?: { uuid?: unknown } }).image_url as { uuid?: unknown } | undefined)?.uuid;
  if (typeof given === 'string' && given.length > 0) return given;
  return createHash('sha256').update(imageUrlOf(part, 'image_url')).digest('hex');
}

/**
 * The media spans of a chat prompt whose messages were already validated
 * (tokenized). `ids` is the whole prompt: on a prompt routed on its bytes,
 * each item spans all of it.
 */
export function chatMedia(tokenizer: PromptTokenizer, messages: ChatMessage[], options: ChatOptions, ids: Uint32Array, basis: PromptBasis): MediaSpan[] {
  const spans: MediaSpan[] = [];
  const upTo = new Map<number, number>();
  const length = (count: number): number => {
    if (count === 0) return 0;
    let n = upTo.get(count);
    if (n === undefined) {
      n = Math.min(tokenizer.encodeChat(messages.slice(0, count), { ...options, addGenerationPrompt: false }).length, ids.length);
      upTo.set(count, n);
    }
    return n;
  };
  messages.forEach((message, m) => {
    const images = imagesOf(message);
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
