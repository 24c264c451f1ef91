// A GPU-free, vLLM-like inference engine: requests go through a batch
// scheduler and a block KV cache, each step takes the time the timing model
// gives it, tokens come out at the end of each step, and every change to the
// cached blocks is published as KV events, one batch per step. The step loop
// runs on a Clock, so the same engine serves replays and tests (VirtualClock)
// and the HTTP mock server (RealClock).
import type { Clock, Timer } from '../../router/clock.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { blockMedia } from '../../router/media-keys.js';
import { chainedBlockHashes, type HashBlocks } from './block-hash.js';
import { BlockCache } from './block-cache.js';
import { foldMediaChain } from './media-chain.js';
import { resolveEngineShape, type EngineShape, type MockEngineOptions, type StepReport } from './engine-options.js';
import { BatchScheduler, type StepPlan } from './scheduler.js';
import { Sequence, type EngineRequest, type FinishReason, type RequestResult } from './sequence.js';
import { SequenceKv } from './sequence-kv.js';
import { TimingModel } from './timing.js';

export interface EngineStats {
  numBlocks: number;
  /** Blocks held by requests (cached and private). */
  activeBlocks: number;
  /** Full prompt blocks in the prefix cache, held or not. */
  cachedBlocks: number;
  freeBlocks: number;
  /** activeBlocks / numBlocks: what the decode timing reads. */
  kvUsage: number;
  running: number;
  waiting: number;
  steps: number;
  completed: number;
  aborted: number;
  preemptions: number;
  recomputedTokens: number;
  /** Prompt tokens reused from the cache at first admission, summed over requests. */
  prefixHitTokens: number;
  /** Prompt tokens of every admitted request. */
  admittedPromptTokens: number;
  /** Prompt tokens whose KV arrived from a prefill worker (a disaggregated decode) instead of being computed. */
  receivedTokens: number;
  /** Prompt tokens loaded back from the offload tier instead of being computed. */
  loadedTokens: number;
  /** Requests whose prefix is being loaded from the offload tier. */
  loading: number;
  /** Blocks in the offload tier. */
  offloadedBlocks: number;
}

export class MockEngine {
  readonly shape: EngineShape;
  private readonly clock: Clock;
  private readonly cache: BlockCache;
  private readonly scheduler: BatchScheduler;
  private readonly timing: TimingModel;
  private readonly hashBlocks: HashBlocks;
  private readonly onEvents: ((batch: KvEventBatch) => void) | undefined;
  private readonly onStep: ((step: StepReport) => void) | undefined;
  private readonly requests = new Map<string, Sequence>();
  private timer: Timer | null = null;
  /** The timer is only waiting for a load from the offload tier (no step runs): new work may start at once. */
  private awaitingLoad = false;
  /** The step in progress (the scheduler's one plan), from its start to its end. */
  private current: StepPlan | null = null;
  /** The requests that got a token in the step being delivered, at its start (reused step to step). */
  private readonly produced: Sequence[] = [];
  /** True while a step's results are being delivered: requests submitted then join the next step. */
  private delivering = false;
  private closed = false;
  private steps = 0;
  private completed = 0;
  private aborted = 0;

  constructor(options: MockEngineOptions) {
    const { clock, onEvents, onStep, hashBlocks, ...shape } = options;
    if (!clock) throw new TypeError('clock is required');
    this.shape = resolveEngineShape(shape);
    this.clock = clock;
    this.onEvents = onEvents;
    this.onStep = onStep;
    this.hashBlocks = hashBlocks ?? chainedBlockHashes;
    // The offload tier is filled from the stored events, so they are recorded for it even when nobody listens.
    this.cache = new BlockCache(this.shape.numBlocks, this.shape.blockSize, onEvents !== undefined || this.shape.offloadBlocks > 0, this.shape.offloadBlocks);
    this.timing = new TimingModel(this.shape.speedup, this.shape.offloadLoadMsPerToken);
    this.scheduler = new BatchScheduler(new SequenceKv(this.cache), this.shape, (tokens) => this.timing.loadMs(tokens));
  }

  /** Makes every step from the next one on take `factor` times as long (1: back to the modelled speed). */
  slowDown(factor: number): void {
    if (!Number.isFinite(factor) || factor <= 0) throw new RangeError(`slowdown factor must be a finite number > 0, got ${factor}`);
    this.timing.slowdown = factor;
  }

  /**
   * Queues a request. Throws on a duplicate id, an empty prompt, a bad
   * maxTokens, or a request that could not fit in the cache even alone.
   */
  submit(request: EngineRequest): void {
    if (this.closed) throw new Error('engine is closed');
    const { id, tokens, maxTokens } = request;
    if (typeof id !== 'string' || id === '') throw new TypeError('id must be a non-empty string');
    if (this.requests.has(id)) throw new TypeError(`request id "${id}" is already in the engine`);
    if (!(tokens instanceof Uint32Array)) throw new TypeError(`request ${id}: tokens must be a Uint32Array`);
    if (tokens.length === 0) throw new RangeError(`request ${id}: tokens (the prompt) is empty`);
    if (!Number.isInteger(maxTokens) || maxTokens < 1) {
      throw new RangeError(`request ${id}: maxTokens must be an integer >= 1, got ${maxTokens}`);
    }
    // The last generated token never needs KV of its own.
    const blocks = Math.ceil((tokens.length + maxTokens - 1) / this.shape.blockSize);
    if (blocks > this.shape.numBlocks) {
      throw new RangeError(
        `request ${id}: ${tokens.length} prompt tokens + maxTokens ${maxTokens} need ${blocks} KV blocks, the cache has ${this.shape.numBlocks}`,
      );
    }
    const hashes = request.blockHashes ?? this.hashBlocks(tokens, this.shape.blockSize, { lora: request.lora ?? null, salt: request.cacheSalt ?? null });
    const fullBlocks = Math.floor(tokens.length / this.shape.blockSize);
    if (hashes.length !== fullBlocks) {
      throw new RangeError(`${request.blockHashes ? 'blockHashes has' : 'hashBlocks returned'} ${hashes.length} hashes for ${fullBlocks} full blocks`);
    }
    const media = request.media?.length ? blockMedia(request.media, fullBlocks, this.shape.blockSize) : null;
    const seq = new Sequence(request, media ? foldMediaChain(hashes, media) : hashes, this.clock.now(), media);
    this.requests.set(id, seq);
    this.scheduler.enqueue(seq);
    this.wake();
  }

  /**
   * Ends a request early and frees its blocks. Returns its partial result, or
   * undefined when no unfinished request has that id. No callback fires.
   */
  abort(id: string): RequestResult | undefined {
    const seq = this.requests.get(id);
    if (!seq) return undefined;
    this.finish(seq, 'abort');
    this.aborted++;
    return seq.result(this.clock.now());
  }

  /**
   * Drops the whole prefix cache and publishes AllBlocksCleared. Like vLLM's
   * reset, it is refused (false) while any request holds blocks.
   */
  resetPrefixCache(): boolean {
    if (!this.cache.clear()) return false;
    this.publishEvents();
    return true;
  }

  /** Stops the step loop; unfinished requests get onError. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.timer?.cancel();
    this.timer = null;
    const error = new Error('engine closed');
    for (const seq of [...this.requests.values()]) {
      this.finish(seq, 'abort');
      seq.request.onError?.(error);
    }
  }

  stats(): EngineStats {
    const c = this.cache;
    const s = this.scheduler;
    return {
      numBlocks: c.numBlocks,
      activeBlocks: c.activeBlocks,
      cachedBlocks: c.cachedBlocks,
      freeBlocks: c.freeBlocks,
      kvUsage: c.activeBlocks / c.numBlocks,
      running: s.runningCount,
      waiting: s.waiting.size,
      steps: this.steps,
      completed: this.completed,
      aborted: this.aborted,
      preemptions: s.preemptions,
      recomputedTokens: s.recomputedTokens,
      prefixHitTokens: s.prefixHitTokens,
      admittedPromptTokens: s.admittedPromptTokens,
      receivedTokens: s.receivedTokens,
      loadedTokens: s.loadedTokens,
      loading: s.loadingCount,
      offloadedBlocks: c.tier?.size ?? 0,
    };
  }

  /** Hashes of every full block in the prefix cache (what the published events describe). */
  cachedBlockHashes(): bigint[] {
    return [...this.cache.hashes()];
  }

  private wake(): void {
    if (this.awaitingLoad) {
      this.timer!.cancel();
      this.timer = null;
      this.awaitingLoad = false;
    }
    if (this.timer || this.delivering || this.closed) return;
    this.timer = this.clock.at(this.clock.now(), this.stepDue);
  }

  // The step timers' callbacks, made once: an engine sets one timer per step.
  private readonly stepDue = () => {
    this.timer = null;
    this.awaitingLoad = false;
    this.beginStep();
  };

  private readonly stepEnded = () => {
    this.timer = null;
    this.endStep(this.current!);
  };

  private beginStep(): void {
    if (this.closed || !this.scheduler.hasWork()) return;
    const plan = this.scheduler.plan(this.clock.now());
    if (plan.requests === 0) {
      // Nothing to compute until a load is in (what waits cannot fit beside the loads' blocks).
      const at = this.scheduler.nextLoadDoneMs();
      if (at !== null) {
        this.timer = this.clock.at(at, this.stepDue);
        this.awaitingLoad = true;
      }
      return;
    }
    const kvUsage = this.cache.activeBlocks / this.cache.numBlocks;
    const ms = this.timing.stepMs({ prefillTokens: plan.prefillTokens, decoding: plan.decodes > 0, kvUtilization: kvUsage });
    const startMs = this.clock.now();
    this.steps++;
    this.current = plan;
    // The timer is set before onStep runs, so a submit from inside onStep cannot start a second step.
    this.timer = this.clock.at(startMs + ms, this.stepEnded);
    this.onStep?.({
      startMs,
      durationMs: ms,
      prefillTokens: plan.prefillTokens,
      decodes: plan.decodes,
      requests: plan.requests,
      kvUsage,
    });
  }

  private endStep(plan: StepPlan): void {
    const now = this.clock.now();
    // Engine state first, so a throwing callback cannot leave it half-updated.
    const produced = this.produced;
    let count = 0;
    for (let i = 0; i < plan.requests; i++) {
      const seq = plan.work[i]!;
      if (seq.state !== 'running' || seq.remaining > 0) continue; // aborted, or mid-prefill
      seq.generated++;
      seq.tokenTimesMs.push(now);
      if (seq.firstTokenMs === null) seq.firstTokenMs = now;
      produced[count++] = seq;
      if (seq.generated >= seq.request.maxTokens) {
        this.finish(seq, 'length');
        this.completed++;
      }
    }
    this.delivering = true;
    try {
      // Events before tokens: a router learns about new blocks before the request completes.
      this.publishEvents();
      for (let i = 0; i < count; i++) {
        const seq = produced[i]!;
        const index = seq.generated - 1;
        const request = seq.request;
        // Any callback may abort a request (its client went away): stop talking to it then.
        if (seq.aborted) continue;
        if (index === 0) request.onFirstToken?.(now);
        if (seq.aborted) continue;
        request.onToken?.(index, now);
        if (seq.finishReason === 'length') request.onComplete?.(seq.result(now));
      }
    } finally {
      this.delivering = false;
      this.beginStep();
    }
  }

  private finish(seq: Sequence, reason: FinishReason): void {
    seq.finishReason = reason;
    this.scheduler.remove(seq);
    this.requests.delete(seq.id);
  }

  private publishEvents(): void {
    // Most steps change nothing in the cache (a decode fills private blocks only).
    if (!this.cache.hasEvents) return;
    // Taking the events writes the step's stores through to the offload tier.
    const events = this.cache.takeEvents();
    this.onEvents?.({ ts: this.clock.now() / 1000, events, dpRank: this.shape.dpRank });
  }
}
