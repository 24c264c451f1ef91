// The router's identifiers on the images it forwards. vLLM keys an image's
// KV blocks by the content part's `uuid` when the client gives one, and by
// its own blake3 digest of the image otherwise, which the router cannot
// reproduce: the router's keys for such an image never meet the engine's,
// and no block from the image on ever matches. So, for a model whose engine
// takes a uuid this way (vLLM, by default), each image part the client sent
// without one is forwarded with the router's own identifier for it (the
// digest of its URL, media.ts, which its media span already carries) as its
// `uuid`: the engine's KV events then
// carry the identifier the router computes for the same image next time.
// A uuid the client gave is left as it is (the router keys by it already).
//
// Only the messages that hold such a part are written anew; every other
// byte of the body is forwarded as it came (numbers keep their digits, keys
// their order), and a request without such a part keeps its body whole.
import type { EngineKind } from '../../router/disagg/roles.js';
import { memberValue, scanElements, skipSpace } from './json-layout.js';
import { imagePartsOf, isImagePart } from './media.js';
import type { ModelMultimodal } from './image-fetch.js';

/** Whether the router sets the uuid of a model's images: as configured, else when its engine is vLLM. */
export function injectsUuids(multimodal: ModelMultimodal | null, engine: EngineKind): boolean {
  if (multimodal === null) return false;
  return multimodal.injectUuid ?? engine === 'vllm';
}

/** An image part with no uuid for the engine to key by (vLLM reads a null one as none). */
const lacksUuid = (part: unknown): boolean => isImagePart(part) && ((part as { uuid?: unknown }).uuid ?? null) === null;

/**
 * The message with each image part that lacks a uuid given its identifier
 * (`ids` from `next`: the router's, in the order of the request's image
 * parts); null when none lacks one.
 */
function withUuids(message: unknown, ids: readonly string[], next: number): Record<string, unknown> | null {
  if (!imagePartsOf(message).some(lacksUuid)) return null;
  const { content } = message as { content: unknown[] };
  let k = next;
  const parts = content.map((part) => {
    if (!isImagePart(part)) return part;
    const id = ids[k++]!;
    return lacksUuid(part) ? { ...part, uuid: id } : part;
  });
  return { ...(message as Record<string, unknown>), content: parts };
}

/** Where each element of the top-level `messages` array sits in the body's bytes ([start, end) pairs); null when it is not found. */
function messageSpans(raw: Buffer): [number, number][] | null {
  const value = memberValue(raw, 'messages');
  if (value === null || raw[value[0]] !== 0x5b) return null;
  const ends: number[] = [];
  if (scanElements(raw, value[0] + 1, ends, Infinity, false) === null) return null;
  // An element starts at the first non-space past the bracket, or past the comma after the one before.
  return ends.map((end, k) => [skipSpace(raw, k === 0 ? value[0] + 1 : skipSpace(raw, ends[k - 1]!) + 1), end]);
}

export interface ForwardedBody {
  /** The bytes sent to the worker. */
  raw: Buffer;
  /** Their parse (for the bodies a prefill/decode handoff builds). */
  body: Record<string, unknown>;
}

/**
 * The chat request as forwarded with the router's identifier as the uuid of
 * each image part that has none; null when every image has one (or there
 * are none), and the body goes as it came. `body` is `raw`'s parse; neither
 * is changed. `ids` are the router's identifiers of the request's images,
 * in the order of its image parts (its media spans' ids): a data: URL is
 * not hashed twice.
 */
export function withImageUuids(raw: Buffer, body: Record<string, unknown>, ids: readonly string[]): ForwardedBody | null {
  if (!Array.isArray(body.messages)) return null;
  let next = 0;
  const rewritten = body.messages.map((message) => {
    const out = withUuids(message, ids, next);
    next += imagePartsOf(message).length;
    return out;
  });
  if (next !== ids.length) throw new Error(`${ids.length} image identifiers for ${next} image parts`);
  if (rewritten.every((message) => message === null)) return null;
  const spans = messageSpans(raw);
  // The body is text JSON.parse accepted, so its messages are where the scan finds them.
  if (spans === null || spans.length !== rewritten.length) throw new Error('the messages of a parsed body were not found in its bytes');
  const pieces: Buffer[] = [];
  let from = 0;
  rewritten.forEach((message, m) => {
    if (message === null) return;
    const [start, end] = spans[m]!;
    pieces.push(raw.subarray(from, start), Buffer.from(JSON.stringify(message)));
    from = end;
  });
  pieces.push(raw.subarray(from));
  const messages = body.messages.map((message, m) => rewritten[m] ?? message);
  return { raw: Buffer.concat(pieces), body: { ...body, messages } };
}
