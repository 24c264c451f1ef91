// The prompt a request is routed on: the token ids the engine will see. A chat
// request is the whole conversation (every message, and the tools when
// present) rendered with the model's chat template; a completion is its text,
// or its token ids as given (no tokenization). The embedded mock workers use
// the same function, so they cache exactly the blocks the router hashes.
import { RouterError } from '../../router/errors.js';
import type { ChatMessage, PromptTokenizer } from '../../router/tokenize/index.js';

export type PromptKind = 'chat' | 'completion';

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

function completionTokens(tokenizer: PromptTokenizer, body: Record<string, unknown>): Uint32Array {
  let prompt = body.prompt;
  if (prompt === undefined || prompt === null) throw invalid('prompt', 'is required');
  // A batch of one is unwrapped; larger batches would need one routing decision per prompt.
  if (Array.isArray(prompt) && prompt.length === 1 && (typeof prompt[0] === 'string' || Array.isArray(prompt[0]))) prompt = prompt[0];
  if (typeof prompt === 'string') {
    if (prompt.length === 0) throw invalid('prompt', 'is empty');
    return tokenizer.encodeText(prompt);
  }
  if (Array.isArray(prompt)) {
    if (prompt.length === 0) throw invalid('prompt', 'is empty');
    if (typeof prompt[0] === 'string' || Array.isArray(prompt[0])) throw invalid('prompt', 'batched prompts are not supported: send one prompt per request');
    return idsOf(prompt);
  }
  throw invalid('prompt', 'must be a string or a list of token ids');
}

function chatTokens(tokenizer: PromptTokenizer, body: Record<string, unknown>): Uint32Array {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages', 'must be a non-empty list of messages');
  const tools = body.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) throw invalid('tools', 'must be a list');
  const generation = body.add_generation_prompt;
  if (generation !== undefined && typeof generation !== 'boolean') throw invalid('add_generation_prompt', 'must be true or false');
  return tokenizer.encodeChat(messages as ChatMessage[], { tools: (tools as unknown[] | null) ?? undefined, addGenerationPrompt: generation ?? true });
}

/** The request's prompt token ids; a RouterError (400) names a bad field. */
export function promptTokens(tokenizer: PromptTokenizer, body: Record<string, unknown>, kind: PromptKind): Uint32Array {
  let tokens: Uint32Array;
  try {
    tokens = kind === 'chat' ? chatTokens(tokenizer, body) : completionTokens(tokenizer, body);
  } catch (error) {
    // The tokenizer reports malformed messages and template failures as TypeErrors naming the field.
    if (error instanceof TypeError) throw new RouterError('KVR_ERR_INVALID_REQUEST', error.message);
    throw error;
  }
  if (tokens.length === 0) throw invalid(kind === 'chat' ? 'messages' : 'prompt', 'the prompt tokenized to no tokens');
  return tokens;
}
