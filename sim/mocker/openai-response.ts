// What the mock server writes back, in OpenAI's shapes: streamed chunks
// (chat.completion.chunk / text_completion as SSE `data:` lines ending with
// `data: [DONE]`), whole responses, usage, and error bodies. Streamed chunks
// are assembled from a per-request prefix string rather than JSON.stringify
// of an object per token: the mock is the upstream in proxy benchmarks.
import type { PromptKind } from './prompt-tokens.js';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function usageOf(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

const WORDS = [
  'the', 'router', 'keeps', 'each', 'prefix', 'warm', 'on', 'a', 'worker', 'that', 'already', 'holds', 'it',
  'so', 'new', 'tokens', 'flow', 'fast', 'while', 'cold', 'blocks', 'wait', 'for', 'room', 'in', 'cache',
];

/**
 * Deterministic synthetic output: token `index` of a reply is a word picked
 * from the prompt's length and first token, so the same prompt reads the same.
 */
export class SyntheticText {
  private readonly seed: number;

  constructor(prompt: Uint32Array) {
    this.seed = (Math.imul(prompt.length, 0x9e3779b1) ^ prompt[0]!) >>> 0;
  }

  token(index: number): string {
    const word = WORDS[(this.seed + index * 7) % WORDS.length]!;
    return index === 0 ? word : ` ${word}`;
  }

  text(count: number): string {
    let out = '';
    for (let i = 0; i < count; i++) out += this.token(i);
    return out;
  }
}

export interface ResponseIdentity {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

/** SSE framing of one streamed response. */
export class SseWriter {
  private readonly head: string;

  constructor(
    private readonly kind: PromptKind,
    identity: ResponseIdentity,
  ) {
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.head = `data: {"id":${JSON.stringify(identity.id)},"object":"${object}","created":${identity.created},"model":${JSON.stringify(identity.model)},"choices":`;
  }

  /** The chunk carrying generated token `index`; the last one carries finish_reason. */
  token(index: number, text: string, last: boolean): string {
    const finish = last ? '"length"' : 'null';
    const body = JSON.stringify(text);
    if (this.kind === 'chat') {
      const role = index === 0 ? '"role":"assistant",' : '';
      return `${this.head}[{"index":0,"delta":{${role}"content":${body}},"logprobs":null,"finish_reason":${finish}}]}\n\n`;
    }
    return `${this.head}[{"index":0,"text":${body},"logprobs":null,"finish_reason":${finish}}]}\n\n`;
  }

  /** The usage chunk sent before [DONE] when the client asked for stream_options.include_usage. */
  usage(usage: Usage): string {
    return `${this.head}[],"usage":${JSON.stringify(usage)}}\n\n`;
  }

  done(): string {
    return 'data: [DONE]\n\n';
  }
}

/** A whole (non-streamed) response. */
export function completionBody(kind: PromptKind, identity: ResponseIdentity, text: string, usage: Usage): object {
  const { id, created, model } = identity;
  if (kind === 'chat') {
    return {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: 'length' }],
      usage,
    };
  }
  return { id, object: 'text_completion', created, model, choices: [{ index: 0, text, logprobs: null, finish_reason: 'length' }], usage };
}

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'conflict_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
};

/** OpenAI's error body: {error: {message, type, code, param}}. */
export function errorBody(status: number, message: string, code: string, param: string | null = null): object {
  const type = ERROR_TYPES[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
  return { error: { message, type, code, param } };
}
