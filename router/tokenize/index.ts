// Prompt tokenization for routing: the conversation rendered with the model's
// chat template and tokenized with the model's tokenizer, incrementally.
export { createTokenizer, DEFAULT_TOKENIZER_SPEC } from './create.js';
export { ChatTemplateError } from './chat-renderer.js';
export { packBytes } from './bytes.js';
export { TIKTOKEN_ENCODINGS } from './tiktoken.js';
export type {
  ChatMessage,
  ChatOptions,
  ContentPart,
  PromptTokenizer,
  RenderMode,
  TokenizeMode,
  TokenizerIO,
  TokenizerOptions,
  TokenizerStats,
} from './types.js';
