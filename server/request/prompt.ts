// The prompt a request is routed on: the token ids the engine will see. A chat
// request is the whole conversation (every message, and the tools when
// present) rendered with the model's chat template; a completion is its text,
// or its token ids as given (no tokenization). The embedded mock workers use
// the same function, so they cache exactly the blocks the router hashes.
//
// Tokenizing is planned first (render, cache lookups), so the text left to
// tokenize is known before any of it is encoded: over the model's limit the
// request is routed on its prompt's bytes or rejected; a short remainder is
// encoded on the event loop, a long one on the tokenizer threads.
import { RouterError } from '../../router/errors.js';
import { packBytes, type ChatMessage, type PromptTokenizer, type TokenizePlan } from '../../router/tokenize/index.js';
import type { MediaSpan } from '../../router/media-keys.js';
import type { ModelMultimodal } from './image-fetch.js';
import { hasImages, renderImages, withMedia } from './media.js';
import { sharedTokenizePool, TokenizePoolError, type TokenizePool } from './tokenize-pool.js';

export type PromptKind = 'chat' | 'completion';

/** What the prompt's ids are: the model's tokens, or its rendered bytes packed 4 per id (the `bytes` tokenizer's ids). */
export type PromptBasis = 'tokens' | 'bytes';

export interface PromptIds {
  ids: Uint32Array;
  basis: PromptBasis;
  /** A chat prompt's images and their runs in `ids` (absent: none). */
  media?: MediaSpan[];
}

export interface TokenizeLimit {
  /** Most characters one request may have tokenized (cached text is free). */
  maxChars: number;
  /** Past it: route on the prompt's bytes, or answer 400. */
  over: 'bytes' | 'reject';
}

export interface PromptOptions {
  /** None: any amount of text is tokenized. */
  limit?: TokenizeLimit;
  /** Where long remainders are encoded; null: on the event loop. Default: the process's pool. */
  pool?: TokenizePool | null;
  /** Remainders up to this many characters are encoded on the event loop (default INLINE_CHARS). */
  inlineChars?: number;
  /** How the model's engine puts images into the prompt (absent: the coarse runs of server/request/media.ts). */
  multimodal?: ModelMultimodal | null;
}

/**
 * Remainders up to this many characters are encoded on the event loop: a new
 * chat turn is usually shorter, and the thread round trip would cost more
 * than the encoding. At worst (8 MB/s on 3-byte characters) about 3 ms.
 */
export const INLINE_CHARS = 8192;

function invalid(param: string, message: string): RouterError {
  return new RouterError('KVR_ERR_INVALID_REQUEST', `${param}: ${message}`, { param });
}

/** Token ids from a completions prompt given as ids; throws naming the bad element. */
function idsOf(prompt: unknown[]): Uint32Array {
  const out = new Uint32Array(prompt.length);
  for (let i = 0; i < prompt.length; i++) {
    const id = prompt[i];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0xffffffff) {
      throw invalid(`prompt[${i}]`, `a token id must be an integer in 0..4294967295, got ${JSON.stringify(id)}`);
    }
    out[i] = id;
  }
  return out;
}

/** A completion's prompt: text to plan, or ids as given. */
function completionPrompt(tokenizer: PromptTokenizer, body: Record<string, unknown>): TokenizePlan | Uint32Array {
  let prompt = body.prompt;
  if (prompt === undefined || prompt === null) throw invalid('prompt', 'is required');
  // A batch of one is unwrapped; larger batches would need one routing decision per prompt.
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) prompt = prompt[0];
  if (typeof prompt === 'string') {
    if (prompt.length === 0) throw invalid('prompt', 'is empty');
    return tokenizer.planText(prompt);
  }
  if (Array.isArray(prompt)) {
    if (prompt.length === 0) throw invalid('prompt', 'is empty');
    if (typeof prompt[0] === 'string' || Array.isArray(prompt[0])) throw invalid('prompt', 'batched prompts are not supported: send one prompt per request');
    return idsOf(prompt);
  }
  throw invalid('prompt', 'must be a string or a list of token ids');
}

function chatPlan(tokenizer: PromptTokenizer, body: Record<string, unknown>): TokenizePlan {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages', 'must be a non-empty list of messages');
  const tools = body.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) throw invalid('tools', 'must be a list');
  const generation = body.add_generation_prompt;
  if (generation !== undefined && typeof generation !== 'boolean') throw invalid('add_generation_prompt', 'must be true or false');
  return tokenizer.planChat(messages as ChatMessage[], { tools: (tools as unknown[] | null) ?? undefined, addGenerationPrompt: generation ?? true });
}

function planOf(tokenizer: PromptTokenizer, body: Record<string, unknown>, kind: PromptKind): TokenizePlan | Uint32Array {
  try {
    return kind === 'chat' ? chatPlan(tokenizer, body) : completionPrompt(tokenizer, body);
  } catch (error) {
    // The tokenizer reports malformed messages and template failures as TypeErrors naming the field.
    if (error instanceof TypeError) throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message);
    throw error;
  }
}

async function encode(tokenizer: PromptTokenizer, plan: TokenizePlan, options: PromptOptions): Promise<PromptIds> {
  const pool = options.pool === undefined ? sharedTokenizePool() : options.pool;
  if (pool !== null && tokenizer.spec !== 'bytes') pool.warm(tokenizer.spec);
  if (pool === null || plan.chars <= (options.inlineChars ?? INLINE_CHARS)) return { ids: plan.run(), basis: 'tokens' };
  let encoded: Uint32Array[];
  try {
    encoded = await pool.encode(tokenizer.spec, plan.texts, plan.whole);
  } catch (error) {
    // A failed thread is no fault of the request: it is routed on its bytes.
    if (error instanceof TokenizePoolError) return { ids: packBytes(plan.prompt()), basis: 'bytes' };
    throw error;
  }
  return { ids: plan.finish(encoded), basis: 'tokens' };
}

/** The request's prompt ids and what they are; a RouterError (400) names a bad field or a prompt over the limit. */
export async function promptIds(tokenizer: PromptTokenizer, body: Record<string, unknown>, kind: PromptKind, options: PromptOptions = {}): Promise<PromptIds> {
  const param = kind === 'chat' ? 'messages' : 'prompt';
  const images = kind === 'chat' && Array.isArray(body.messages) && hasImages(body.messages);
  const multimodal = images ? (options.multimodal ?? null) : null;
  const shown = multimodal ? { ...body, messages: renderImages(body.messages as unknown[], multimodal) } : body;
  const plan = planOf(tokenizer, shown, kind);
  let result: PromptIds;
  if (plan instanceof Uint32Array) result = { ids: plan, basis: 'tokens' };
  else if (options.limit !== undefined && plan.chars > options.limit.maxChars) {
    if (options.limit.over === 'reject') {
      throw new RouterError(
        'KVR_ERR_INVALID_REQUEST',
        `${param}: the prompt has ${plan.chars} characters to tokenize, over this model's limit of ${options.limit.maxChars} (tokenize_limit.max_chars)`,
        { param, limit: 'tokenize_limit.max_chars' },
      );
    }
    result = { ids: packBytes(plan.prompt()), basis: 'bytes' };
  } else result = await encode(tokenizer, plan, options);
  if (result.ids.length === 0) throw invalid(param, 'the prompt tokenized to no tokens');
  if (images) {
    const tools = (body.tools as unknown[] | null | undefined) ?? undefined;
    const { ids, media } = await withMedia(tokenizer, body.messages as ChatMessage[], shown.messages as ChatMessage[], { tools }, result, multimodal);
    result.ids = ids;
    result.media = media;
  }
  return result;
}

/** The request's prompt token ids, with no limit; a RouterError (400) names a bad field. */
export async function promptTokens(tokenizer: PromptTokenizer, body: Record<string, unknown>, kind: PromptKind, options: PromptOptions = {}): Promise<Uint32Array> {
  return (await promptIds(tokenizer, body, kind, options)).ids;
}
