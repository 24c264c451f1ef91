// Renders a conversation with a Jinja chat template.
//
// Running the template over a long conversation costs 10-60 us per message
// in @huggingface/jinja (1000 messages: 10-60 ms), far over the routing
// budget, so separable templates are rendered per message instead:
//
//   head    = render([m0])                 (the first message, with tools)
//   seg(i)  = render([m0, mi]) - head      (for every later message)
//   gen     = render([m0], +generation prompt) - head
//   prompt  = head + seg(1) + ... + seg(n-1) + gen
//
// Each seg(i) is cached by (head, message), so a new turn renders only the
// new messages. This equals the whole render exactly when a message's text
// depends only on itself and the first message; templates that look at
// neighbours, at loop.last or at later messages (Qwen3 does all three) are
// not separable. The load-time self-check renders probe conversations both
// ways and keeps `whole` rendering if any differs.
import { Template } from '@huggingface/jinja';
import { messageTag, type TemplateInput, type TemplateMessage } from './messages.js';
import { detached, TextCache } from './piece-cache.js';
import type { RenderMode } from './types.js';

/** Messages up to this long are rendered segment by segment however small the caches. */
const SEGMENT_LIMIT_MIN = 1 << 20;

/**
 * A template written as code: the same output as its Jinja source, without
 * the interpreter. `segment`, when given, writes seg(i) of a later message
 * directly (no render of the first message to cut it from); the self-check
 * holds it to the whole render like any segment.
 */
export interface NativeTemplate {
  (messages: TemplateMessage[], tools: unknown[] | null, addGenerationPrompt: boolean): string;
  segment?: (message: TemplateMessage, tools: unknown[] | null) => string;
}

/** A template refused the conversation (raise_exception) or failed on it: a client error. */
export class ChatTemplateError extends TypeError {
  override name = 'ChatTemplateError';
}

interface Head {
  /** Distinguishes segment cache keys of different heads. */
  id: number;
  text: string;
  generationPrompt: string;
}

export class ChatRenderer {
  private readonly template: Template | NativeTemplate;
  private readonly heads: TextCache<Head | null>;
  /** Longest message content rendered segment by segment (the head cache's bound, at least SEGMENT_LIMIT_MIN). */
  private readonly segmentLimit: number;
  private readonly segments: TextCache<string>;
  /**
   * Segments of frozen messages, by identity (normalizeChat hands a
   * conversation's earlier messages back as the same frozen objects): found
   * without reading the content, and kept while the message lives.
   */
  private settledSegments = new WeakMap<TemplateMessage, { headId: number; text: string }>();
  private settledHits = 0;
  private current: RenderMode = 'segmented';
  private nextHeadId = 0;
  fallbacks = 0;

  /**
   * @param source the Jinja template text, or the template as code
   * @param globals variables every render sees (bos_token, eos_token, ...)
   * @param cacheChars bound of the segment cache in characters
   * @param origin names the template in errors (a file or a spec)
   */
  constructor(
    source: string | NativeTemplate,
    private readonly globals: Record<string, unknown>,
    cacheChars: number,
    readonly origin: string,
  ) {
    try {
      this.template = typeof source === 'string' ? new Template(source) : source;
    } catch (err) {
      throw new Error(`${origin}: chat template does not parse: ${(err as Error).message}`);
    }
    this.segments = new TextCache<string>(cacheChars, (s) => s.length);
    this.segmentLimit = Math.max(cacheChars / 8, SEGMENT_LIMIT_MIN);
    this.heads = new TextCache<Head | null>(Math.max(1, cacheChars / 8), (h) => (h === null ? 1 : h.text.length + h.generationPrompt.length));
  }

  get mode(): RenderMode {
    return this.current;
  }

  get segmentHits(): number {
    return this.segments.hits + this.settledHits;
  }

  get segmentMisses(): number {
    return this.segments.misses;
  }

  render(input: TemplateInput): string {
    return this.renderParts(input).join('');
  }

  /**
   * The prompt as consecutive parts: [head, one part per later message,
   * generation prompt] when segmented, else one part holding the whole
   * render. Parts are cached strings, so a caller may cache by them.
   */
  renderParts(input: TemplateInput): string[] {
    if (this.current === 'segmented' && this.fitsCache(input)) {
      const parts = this.renderSegmented(input);
      if (parts !== undefined) return parts;
      this.fallbacks++;
    }
    return [this.renderWhole(input)];
  }

  /**
   * Whether every message is short enough for its rendered segment to be
   * cached. A longer one would only be rendered twice, compared and copied
   * (tens of milliseconds per megabyte) for nothing: it renders whole.
   */
  private fitsCache(input: TemplateInput): boolean {
    for (const m of input.messages) if (m.content.length > this.segmentLimit) return false;
    return true;
  }

  renderWhole(input: TemplateInput): string {
    return this.run(input.messages, input.tools, input.addGenerationPrompt);
  }

  /**
   * Renders each probe whole and segmented; any difference, or a probe only
   * the segmented path fails on, selects whole rendering. Probes the
   * template itself rejects (e.g. role alternation rules) prove nothing and
   * are skipped. Returns the first differing probe.
   */
  selfCheck(probes: readonly TemplateInput[]): TemplateInput | undefined {
    let differing: TemplateInput | undefined;
    for (const probe of probes) {
      let whole: string;
      try {
        whole = this.renderWhole(probe);
      } catch {
        continue;
      }
      if (this.renderSegmented(probe)?.join('') !== whole) {
        differing = probe;
        break;
      }
    }
    this.current = differing === undefined ? 'segmented' : 'whole';
    this.fallbacks = 0;
    this.segments.clear(); // probes are no traffic
    this.heads.clear();
    this.settledSegments = new WeakMap();
    this.settledHits = 0;
    return differing;
  }

  private run(messages: TemplateMessage[], tools: unknown[] | null, addGenerationPrompt: boolean): string {
    try {
      const t = this.template;
      return typeof t === 'function' ? t(messages, tools, addGenerationPrompt) : t.render({ ...this.globals, messages, tools, add_generation_prompt: addGenerationPrompt });
    } catch (err) {
      throw new ChatTemplateError(`${this.origin}: chat template failed: ${(err as Error).message}`);
    }
  }

  /** The segmented render, or undefined when this conversation cannot be split. */
  private renderSegmented(input: TemplateInput): string[] | undefined {
    const { messages, tools } = input;
    if (messages.length === 0) return undefined;
    const head = this.headOf(messages[0]!, tools);
    if (head === null) return undefined;
    const parts = [head.text];
    const headTag = `${head.id}\u0001`;
    for (let i = 1; i < messages.length; i++) {
      const m = messages[i]!;
      const settled = this.settledSegments.get(m);
      if (settled !== undefined && settled.headId === head.id) {
        this.settledHits++;
        parts.push(settled.text);
        continue;
      }
      const tag = headTag + messageTag(m);
      let seg = this.segments.get(m.content, tag);
      if (seg === undefined) {
        seg = this.segmentOf(messages[0]!, m, tools, head);
        if (seg === undefined) return undefined;
        this.segments.set(m.content, seg, tag);
      }
      if (Object.isFrozen(m)) this.settledSegments.set(m, { headId: head.id, text: seg });
      parts.push(seg);
    }
    if (input.addGenerationPrompt) parts.push(head.generationPrompt);
    return parts;
  }

  /** seg(i) of a later message `m`: written by the template's own segment function, or cut from render([first, m]). */
  private segmentOf(first: TemplateMessage, m: TemplateMessage, tools: unknown[] | null, head: Head): string | undefined {
    const t = this.template;
    if (typeof t === 'function' && t.segment !== undefined) {
      try {
        return t.segment(m, tools);
      } catch {
        return undefined;
      }
    }
    const both = this.tryRun([first, m], tools, false);
    if (both === undefined || !both.startsWith(head.text)) return undefined;
    return detached(both.slice(head.text.length));
  }

  private headOf(first: TemplateMessage, tools: unknown[] | null): Head | null {
    const tag = `${tools === null ? '' : JSON.stringify(tools)}\u0002${messageTag(first)}`;
    const cached = this.heads.get(first.content, tag);
    if (cached !== undefined) return cached;
    let head: Head | null = null;
    const text = this.tryRun([first], tools, false);
    const withPrompt = this.tryRun([first], tools, true);
    if (text !== undefined && withPrompt !== undefined && withPrompt.startsWith(text)) {
      head = { id: this.nextHeadId++, text: detached(text), generationPrompt: detached(withPrompt.slice(text.length)) };
    }
    this.heads.set(first.content, head, tag);
    return head;
  }

  private tryRun(messages: TemplateMessage[], tools: unknown[] | null, addGenerationPrompt: boolean): string | undefined {
    try {
      return this.run(messages, tools, addGenerationPrompt);
    } catch {
      return undefined;
    }
  }
}
