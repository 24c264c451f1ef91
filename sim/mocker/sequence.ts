// One request inside the engine: its prompt, its progress, and the KV blocks
// it holds. Progress follows vLLM's model: a request "knows" prompt + generated
// tokens, `computed` of them have KV in the cache, and a step that brings
// `computed` up to everything known samples the next token. A decode is just a
// step with one token left to compute; after a preemption the request
// recomputes prompt and generated tokens alike.
import type { BlockId } from './block-cache.js';
import type { MediaKey } from '../../router/kv-events.js';
import type { MediaSpan } from '../../router/media-keys.js';
import { halvesView } from './u64-map.js';

export type FinishReason = 'length' | 'abort';

/** What the engine reports about one finished (or aborted) request. */
export interface RequestResult {
  id: string;
  promptTokens: number;
  /** Prompt tokens reused from the prefix cache when the request was first admitted. */
  cachedTokens: number;
  outputTokens: number;
  /** Clock times in ms. */
  arrivalMs: number;
  firstTokenMs: number | null;
  finishMs: number;
  /** First token time minus arrival, null when no token was produced. */
  ttftMs: number | null;
  /** Delivery time of each generated token, ms. */
  tokenTimesMs: number[];
  preemptions: number;
  /** Tokens computed again because a preemption discarded their KV. */
  recomputedTokens: number;
  finishReason: FinishReason;
}

export interface EngineRequest {
  /** Unique among the engine's unfinished requests. */
  id: string;
  /** Prompt token ids; at least one. */
  tokens: Uint32Array;
  /** Tokens to generate (the mock never stops early); at least one. */
  maxTokens: number;
  /**
   * The chained hashes of the prompt's full blocks, when the caller already
   * has them (a replay derives them from trace ids); otherwise the engine
   * hashes the tokens. One per full block, equal exactly for equal prefixes.
   */
  blockHashes?: BigUint64Array;
  /** The LoRA adapter the request runs with (its blocks are the adapter's alone); absent or null: the base model. */
  lora?: string | null;
  /** The request's cache salt (its blocks are the salt's alone); absent or null: none. */
  cacheSalt?: string | null;
  /** The prompt's media items (images) and their placeholder runs, folded into the blocks they overlap as an engine does. */
  media?: readonly MediaSpan[];
  /**
   * Leading prompt tokens whose KV a prefill worker computed and sent over
   * (a disaggregated decode): they are admitted without being computed.
   */
  remoteTokens?: number;
  /** The first generated token arrived (end of the step that finished prefill). */
  onFirstToken?(atMs: number): void;
  /** Generated token `index` (0-based) arrived at `atMs`. */
  onToken?(index: number, atMs: number): void;
  onComplete?(result: RequestResult): void;
  /** The engine closed before the request finished. */
  onError?(error: Error): void;
}

export class Sequence {
  /** 'loading': admitted, its prefix being loaded from the offload tier before it computes. */
  state: 'waiting' | 'loading' | 'running' | 'finished' = 'waiting';
  /** Tokens (prompt, then generated) whose KV is in the cache. */
  computed = 0;
  generated = 0;
  /** Full prompt blocks held, in chain order: held[i] covers tokens [i*bs, (i+1)*bs). */
  readonly held: BlockId[] = [];
  /** Private blocks held: the partial prompt block and generated tokens. */
  privateBlocks = 0;
  /** Prompt tokens reused at first admission; -1 until admitted. */
  cachedTokens = -1;
  /** Tokens before this position had KV that a preemption discarded: computing them again is a recompute. */
  recomputeUntil = 0;
  /** Prompt tokens below this have KV that arrived from a prefill worker; a preemption loses it. */
  received: number;
  recomputedTokens = 0;
  /** While loading: blocks after `held` coming from the offload tier, and when they are in. */
  loadingBlocks = 0;
  loadDoneMs = 0;
  preemptions = 0;
  firstTokenMs: number | null = null;
  finishReason: FinishReason | null = null;
  readonly tokenTimesMs: number[] = [];
  /** `hashes` as (lo, hi) u32 halves, what the block table is keyed by. */
  readonly hashHalves: Uint32Array;

  constructor(
    readonly request: EngineRequest,
    /** Chained hashes of the full prompt blocks. */
    readonly hashes: BigUint64Array,
    readonly arrivalMs: number,
    /** Per full prompt block, the media keys its hash folds in (null: none), or null without media. */
    readonly media: readonly (readonly MediaKey[] | null)[] | null = null,
  ) {
    this.hashHalves = halvesView(hashes);
    // The last prompt token is computed here whatever came over: its step samples the first token.
    this.received = Math.max(0, Math.min(request.remoteTokens ?? 0, request.tokens.length - 1));
  }

  /** Tokens from `computed` on whose KV arrived and needs no computing. */
  get receivable(): number {
    return Math.max(0, this.received - this.computed);
  }

  get id(): string {
    return this.request.id;
  }

  get promptLength(): number {
    return this.request.tokens.length;
  }

  /** Prompt plus generated tokens. */
  get knownTokens(): number {
    return this.request.tokens.length + this.generated;
  }

  /** Tokens the next step could compute for this request. */
  get remaining(): number {
    return this.knownTokens - this.computed;
  }

  /** A decode: one token left after at least one was generated (and no recompute pending). */
  get decoding(): boolean {
    return this.generated > 0 && this.remaining === 1;
  }

  get aborted(): boolean {
    return this.finishReason === 'abort';
  }

  get heldBlocks(): number {
    return this.held.length + this.privateBlocks;
  }

  /** The request's outcome so far (finishReason 'abort' while unfinished). */
  result(finishMs: number): RequestResult {
    return {
      id: this.id,
      promptTokens: this.promptLength,
      cachedTokens: Math.max(0, this.cachedTokens),
      outputTokens: this.generated,
      arrivalMs: this.arrivalMs,
      firstTokenMs: this.firstTokenMs,
      finishMs,
      ttftMs: this.firstTokenMs === null ? null : this.firstTokenMs - this.arrivalMs,
      tokenTimesMs: this.tokenTimesMs,
      preemptions: this.preemptions,
      recomputedTokens: this.recomputedTokens,
      finishReason: this.finishReason ?? 'abort',
    };
  }
}
