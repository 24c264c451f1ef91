// The public shapes of prompt tokenization: what the server hands in (OpenAI
// chat messages) and what routing gets back (the token ids it hashes into
// blocks). Token ids must equal the engine's, so every tokenizer renders the
// whole conversation with the model's chat template before tokenizing.

/** One part of a multi-part message content; only text parts can be tokenized. */
export interface ContentPart {
  type: string;
  text?: string;
}

export interface ChatMessage {
  role: string;
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  /** Reasoning text some templates (Qwen3) render for assistant turns. */
  reasoning_content?: string;
}

export interface ChatOptions {
  /** OpenAI tool definitions; rendered into the prompt when present. */
  tools?: unknown[];
  /** Append the assistant header the model continues from (default true). */
  addGenerationPrompt?: boolean;
}

export interface TokenizerStats {
  /** Text pieces whose token ids came from the piece cache. */
  pieceHits: number;
  /** Text pieces that had to be tokenized. */
  pieceMisses: number;
  /** Token ids currently held by the piece cache. */
  cachedTokens: number;
  /** Requests that left the incremental path for a whole render or tokenization. */
  fallbacks: number;
  /** Rendered message segments reused from the segment cache. */
  segmentHits: number;
  /** Message segments that had to be rendered through the template. */
  segmentMisses: number;
}

/**
 * How a prompt is tokenized: `incremental` splits the rendered prompt at
 * special tokens and tokenizes (and caches) each piece alone; `whole`
 * tokenizes the prompt in one call, for tokenizers where pieces are not
 * independent (found by the load-time self-check).
 */
export type TokenizeMode = 'incremental' | 'whole';

/**
 * How a conversation is rendered: `segmented` renders each message once
 * (cached) and concatenates, for templates the self-check found separable;
 * `whole` runs the template over the full conversation on every request.
 */
export type RenderMode = 'segmented' | 'whole';

/**
 * A prompt rendered and looked up in the caches, with the text still to
 * tokenize listed: its cost (`chars`) is known before it is paid, and the
 * encoding can run here (`run`) or on another thread with the same tokenizer
 * spec (loadTextCodec, encodeTexts) and be handed back to `finish`.
 */
export interface TokenizePlan {
  /** Texts to encode, each once; empty when the caches held everything. */
  readonly texts: readonly string[];
  /** Whether the texts go through the codec's encodeWhole (else encodePiece). */
  readonly whole: boolean;
  /** UTF-16 code units in `texts`. */
  readonly chars: number;
  /** The rendered prompt text (for routing on its bytes instead of its tokens). */
  prompt(): string;
  /**
   * The prompt's ids, given the ids of `texts` in order; fills the caches.
   * Call at most once. The caches may keep the ids themselves (a
   * conversation's next turn starts from them): read them, never write them,
   * and hand them back with PromptTokenizer.release once done with them.
   */
  finish(encoded: readonly ArrayLike<number>[]): Uint32Array;
  /** Encodes `texts` on this thread and finishes. */
  run(): Uint32Array;
}

export interface PromptTokenizer {
  readonly spec: string;
  readonly mode: TokenizeMode;
  readonly renderMode: RenderMode;
  /**
   * What turns text into ids: the wasm byte-pair kernel, packed bytes, or
   * (an hf: model the kernel does not reproduce) @huggingface/tokenizers and why.
   */
  readonly engine: string;
  /** Renders the conversation with the chat template and tokenizes it (no BOS added beyond the template's). The ids are read-only (TokenizePlan.finish). */
  encodeChat(messages: ChatMessage[], options?: ChatOptions): Uint32Array;
  /** Tokenizes a raw prompt as an engine does for completions (adds the tokenizer's BOS/EOS rules). */
  encodeText(text: string): Uint32Array;
  /** encodeChat in two steps: render and look up now, encode what is left later. */
  planChat(messages: ChatMessage[], options?: ChatOptions): TokenizePlan;
  /** encodeText in two steps. */
  planText(text: string): TokenizePlan;
  /** The prompt text encodeChat tokenizes. */
  renderChat(messages: ChatMessage[], options?: ChatOptions): string;
  /**
   * The caller no longer reads these ids (from finish, run or encodeChat):
   * their memory may take a later turn of the conversation. Ids not
   * released stay as they are, at the cost of new memory for that turn.
   */
  release(ids: Uint32Array): void;
  stats(): TokenizerStats;
}

/** File access injected by the caller: router/ does no I/O of its own. */
export interface TokenizerIO {
  readFile(path: string): Promise<string>;
}

export interface TokenizerOptions {
  /** Bound of the piece cache in token ids (default 2,000,000). */
  cacheTokens?: number;
  /** Bound of the rendered-segment cache in UTF-16 code units (default 4 x cacheTokens). */
  renderCacheChars?: number;
}
