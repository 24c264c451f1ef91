// The PromptTokenizer every spec produces: choose the chat template, render
// the whole conversation (messages and tools), then turn the text into ids.
import type { ChatRenderer } from './chat-renderer.js';
import { normalizeChat, type TemplateInput } from './messages.js';
import { encodeTexts, type EncodePlan, type PromptEncoder } from './prompt-encoder.js';
import type { ChatMessage, ChatOptions, PromptTokenizer, RenderMode, TokenizePlan, TokenizeMode, TokenizerStats } from './types.js';

/** How rendered text becomes ids: through a tokenizer's PromptEncoder, or packed bytes. */
export interface TextToIds {
  readonly mode: TokenizeMode;
  /** What encodes (PromptTokenizer.engine). */
  readonly engine: string;
  /** A rendered chat prompt, in consecutive parts: the template already wrote any BOS. */
  chat(parts: readonly string[]): EncodePlan;
  /** A raw completions prompt: the tokenizer adds its own BOS/EOS. */
  raw(text: string): EncodePlan;
  readonly encoder?: PromptEncoder;
}

/** A plan with nothing left to encode. */
export function settledPlan(ids: () => Uint32Array): EncodePlan {
  return { texts: [], whole: false, chars: 0, finish: ids };
}

export class ChatTokenizer implements PromptTokenizer {
  constructor(
    readonly spec: string,
    /** By name: "default" and, when a model ships it, "tool_use" (used when tools are given). */
    private readonly renderers: Map<string, ChatRenderer>,
    private readonly ids: TextToIds,
  ) {}

  get mode(): TokenizeMode {
    return this.ids.mode;
  }

  get engine(): string {
    return this.ids.engine;
  }

  get renderMode(): RenderMode {
    if (this.renderers.size === 0) return 'whole';
    for (const r of this.renderers.values()) if (r.mode === 'whole') return 'whole';
    return 'segmented';
  }

  renderChat(messages: ChatMessage[], options?: ChatOptions): string {
    const input = normalizeChat(messages, options);
    return this.rendererFor(input).render(input);
  }

  encodeChat(messages: ChatMessage[], options?: ChatOptions): Uint32Array {
    return this.planChat(messages, options).run();
  }

  encodeText(text: string): Uint32Array {
    return this.planText(text).run();
  }

  planChat(messages: ChatMessage[], options?: ChatOptions): TokenizePlan {
    const input = normalizeChat(messages, options);
    const parts = this.rendererFor(input).renderParts(input);
    return this.toPlan(this.ids.chat(parts), () => parts.join(''));
  }

  planText(text: string): TokenizePlan {
    if (typeof text !== 'string') throw new TypeError('prompt must be a string');
    return this.toPlan(this.ids.raw(text), () => text);
  }

  release(ids: Uint32Array): void {
    this.ids.encoder?.release(ids);
  }

  stats(): TokenizerStats {
    const cache = this.ids.encoder?.cache;
    let fallbacks = 0;
    let segmentHits = 0;
    let segmentMisses = 0;
    for (const r of this.renderers.values()) {
      fallbacks += r.fallbacks;
      segmentHits += r.segmentHits;
      segmentMisses += r.segmentMisses;
    }
    return {
      pieceHits: cache?.hits ?? 0,
      pieceMisses: cache?.misses ?? 0,
      cachedTokens: cache?.weight ?? 0,
      fallbacks,
      segmentHits,
      segmentMisses,
    };
  }

  private toPlan(plan: EncodePlan, prompt: () => string): TokenizePlan {
    const codec = this.ids.encoder?.codec;
    return {
      texts: plan.texts,
      whole: plan.whole,
      chars: plan.chars,
      prompt,
      finish: (encoded) => plan.finish(encoded),
      run: () => plan.finish(codec === undefined ? [] : encodeTexts(codec, plan.texts, plan.whole)),
    };
  }

  private rendererFor(input: TemplateInput): ChatRenderer {
    const chosen = (input.tools !== null ? this.renderers.get('tool_use') : undefined) ?? this.renderers.get('default');
    if (chosen === undefined) throw new Error(`${this.spec}: the model has no chat template (tokenizer_config.json chat_template or chat_template.jinja); only raw prompts can be tokenized`);
    return chosen;
  }
}
