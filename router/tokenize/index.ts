// Prompt tokenization for routing: the conversation rendered with the model's
// chat template and tokenized with the model's tokenizer, incrementally.
export { createTokenizer, DEFAULT_TOKENIZER_SPEC, loadTextCodec } from './create.js';
export { encodeTexts, type TextCodec } from './prompt-encoder.js';
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
  TokenizePlan,
  TokenizerIO,
  TokenizerOptions,
  TokenizerStats,
} from './types.js';
