// Validates the OpenAI request bodies the mock server accepts
// (/v1/chat/completions and /v1/completions). A bad field is a 400 naming it.
import { toTokenIds, type PromptKind } from './prompt-tokens.js';

/** A client error, answered with an OpenAI-style error body. */
export class RequestError extends Error {
  override name = 'RequestError';
  constructor(
    message: string,
    readonly status = 400,
    readonly code = 'invalid_request',
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

export interface MockRequest {
  kind: PromptKind;
  body: Record<string, unknown>;
  stream: boolean;
  /** stream_options.include_usage: a final usage chunk before [DONE]. */
  includeUsage: boolean;
  maxTokens: number;
  /** The model the client named; echoed back. */
  model: string | null;
  /** Token ids given directly as the completion prompt: no tokenizing needed. */
  promptIds: Uint32Array | null;
  /** `cache_salt`: the request's blocks are cached for requests with the same salt only, as vLLM does. */
  cacheSalt: string | null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function bad(param: string, message: string): RequestError {
  return new RequestError(`${param}: ${message}`, 400, 'invalid_request', param);
}

function parseJson(raw: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch (error) {
    throw new RequestError(`request body is not valid JSON: ${(error as Error).message}`, 400, 'invalid_json');
  }
  if (!isObject(body)) throw new RequestError('request body must be a JSON object', 400, 'invalid_json');
  return body;
}

function maxTokensOf(body: Record<string, unknown>, fallback: number): number {
  for (const param of ['max_completion_tokens', 'max_tokens']) {
    const value = body[param];
    if (value === undefined || value === null) continue;
    if (!Number.isInteger(value) || (value as number) < 1) throw bad(param, `must be an integer >= 1, got ${JSON.stringify(value)}`);
    return value as number;
  }
  return fallback;
}

function checkMessages(messages: unknown): void {
  if (!Array.isArray(messages) || messages.length === 0) throw bad('messages', 'must be a non-empty array');
  messages.forEach((m, i) => {
    if (!isObject(m) || typeof m.role !== 'string') throw bad(`messages[${i}]`, 'must be an object with a string role');
  });
}

// A completion prompt is text or token ids; a batch of one is unwrapped, larger batches are refused.
function promptIdsOf(prompt: unknown): Uint32Array | null {
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) {
    return promptIdsOf(prompt[0]);
  }
  if (typeof prompt === 'string') {
    if (prompt === '') throw bad('prompt', 'is empty');
    return null;
  }
  if (Array.isArray(prompt)) {
    if (prompt.length === 0) throw bad('prompt', 'is empty');
    if (prompt.some((p) => typeof p !== 'number')) throw bad('prompt', 'must be a string or an array of token ids (batched prompts are not supported)');
    try {
      return toTokenIds(prompt as number[]);
    } catch (error) {
      throw bad('prompt', (error as Error).message);
    }
  }
  throw bad('prompt', 'must be a string or an array of token ids');
}

/** Parses and validates a request body; throws RequestError. */
export function parseMockRequest(raw: string, kind: PromptKind, defaultMaxTokens: number): MockRequest {
  const body = parseJson(raw);
  let promptIds: Uint32Array | null = null;
  if (kind === 'chat') checkMessages(body.messages);
  else {
    if (body.prompt === undefined) throw bad('prompt', 'is required');
    promptIds = promptIdsOf(body.prompt);
    // A batch of one text is unwrapped, so tokenizers always see a plain string.
    if (promptIds === null && Array.isArray(body.prompt)) body.prompt = body.prompt[0];
  }
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') throw bad('stream', 'must be a boolean');
  if (body.model !== undefined && typeof body.model !== 'string') throw bad('model', 'must be a string');
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw bad('n', 'the mock generates one choice; n must be 1');
  const salt = body.cache_salt;
  // vLLM refuses a salt that is not a non-empty string.
  if (salt !== undefined && salt !== null && (typeof salt !== 'string' || salt === '')) throw bad('cache_salt', 'must be a non-empty string');
  const options = body.stream_options;
  if (options !== undefined && options !== null && !isObject(options)) throw bad('stream_options', 'must be an object');
  return {
    kind,
    body,
    stream: body.stream === true,
    includeUsage: isObject(options) && options.include_usage === true,
    maxTokens: maxTokensOf(body, defaultMaxTokens),
    model: typeof body.model === 'string' ? body.model : null,
    promptIds,
    cacheSalt: typeof salt === 'string' ? salt : null,
  };
}
