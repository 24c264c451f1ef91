// Turning an OpenAI request body into prompt token ids for the mock server.
// The server is given a real tokenizer by whoever starts it; without one it
// falls back to a placeholder: the UTF-8 bytes of the text (completions) or
// of a stable JSON rendering of the messages (chat), one token per byte.
// That keeps prefix caching meaningful (equal prefixes give equal bytes) but
// its token counts are not a real model's.

import type { MediaSpan } from '../../router/media-keys.js';

export type PromptKind = 'chat' | 'completion';

/** A prompt's ids with its images' runs in them (folded into its blocks as an engine does). */
export interface PromptWithMedia {
  ids: Uint32Array;
  media?: readonly MediaSpan[];
}

/** Returns the prompt's token ids (and its media, when it knows them) for a validated request body. */
export type PromptTokens = (
  body: Record<string, unknown>,
  kind: PromptKind,
) => Uint32Array | readonly number[] | PromptWithMedia | Promise<Uint32Array | readonly number[] | PromptWithMedia>;

/** JSON with object keys sorted at every level, so equal values render equally. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    const fields = keys
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const utf8 = new TextEncoder();

/** The placeholder tokenizer: one token per UTF-8 byte (see the module comment). */
export const bytePromptTokens: PromptTokens = (body, kind) => {
  const text = kind === 'chat' ? stableJson(body.messages) : String(body.prompt);
  return Uint32Array.from(utf8.encode(text));
};

/** Checks a tokenizer's output and returns it as a Uint32Array. */
export function toTokenIds(ids: Uint32Array | readonly number[]): Uint32Array {
  if (ids instanceof Uint32Array) return ids;
  if (!Array.isArray(ids)) throw new TypeError('the prompt tokenizer must return a Uint32Array or an array of token ids');
  const out = new Uint32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!Number.isInteger(id) || id < 0 || id > 0xffffffff) {
      throw new RangeError(`token id at index ${i} must be an integer in 0..4294967295, got ${String(id)}`);
    }
    out[i] = id;
  }
  return out;
}
