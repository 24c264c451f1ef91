// Picks what one engine step computes, the way vLLM's scheduler does: the
// token budget goes to running requests first (one token per decode, then
// the next chunk of any unfinished prefill), then to admitting waiting
// requests in order, up to the running-sequence limit. When the cache cannot
// hold a running request's next tokens, the most recently admitted running
// request is preempted (LIFO): its blocks are freed and it goes back to the
// front of the line, to be recomputed later except what is still cached.
// A request whose prefix goes on past its GPU hits into the offload tier is
// admitted to load those blocks instead (vLLM's offloading connector loads
// them asynchronously, off the step): it takes a seat and the GPU room for
// them, waits out the load, and joins the running requests once they are in.
import type { Sequence } from './sequence.js';
import type { BlockId } from './block-cache.js';
import type { SequenceKv } from './sequence-kv.js';
import { WaitingQueue } from './waiting-queue.js';

/**
 * What one step computes. The scheduler plans one step at a time and reuses
 * the plan for the next (an engine runs thousands of steps a second of
 * replay), so a plan is only good until the next plan() call.
 */
export interface StepPlan {
  /** The requests given tokens this step, in scheduling order: work[0..requests); null past them. */
  readonly work: (Sequence | null)[];
  requests: number;
  /** Sum of the prefill (non-decode) tokens. */
  prefillTokens: number;
  /** Requests decoding one token each. */
  decodes: number;
}

export interface SchedulerLimits {
  maxBatchedTokens: number;
  maxNumSeqs: number;
}

/** How long loading tokens from the offload tier takes, ms. */
export type LoadTime = (tokens: number) => number;

export class BatchScheduler {
  readonly waiting = new WaitingQueue();
  /** In admission order: the last one is the next preemption victim. */
  private running: Sequence[] = [];
  /** Admitted requests whose prefix is being loaded from the offload tier, in admission order. */
  private readonly loading: Sequence[] = [];
  private readonly step: StepPlan = { work: [], requests: 0, prefillTokens: 0, decodes: 0 };
  preemptions = 0;
  recomputedTokens = 0;
  /** Prompt tokens reused at first admission, and prompt tokens admitted, summed over requests. */
  prefixHitTokens = 0;
  admittedPromptTokens = 0;
  /** Prompt tokens whose KV arrived from a prefill worker, summed over requests. */
  receivedTokens = 0;
  /** Prompt tokens loaded from the offload tier, summed over loads. */
  loadedTokens = 0;

  constructor(
    private readonly kv: SequenceKv,
    private readonly limits: SchedulerLimits,
    private readonly loadMs: LoadTime = () => 0,
  ) {}

  get runningCount(): number {
    return this.running.length;
  }

  get loadingCount(): number {
    return this.loading.length;
  }

  hasWork(): boolean {
    return this.running.length > 0 || this.waiting.size > 0 || this.loading.length > 0;
  }

  /** When the first load in progress is in; null when none is. */
  nextLoadDoneMs(): number | null {
    let next: number | null = null;
    for (const seq of this.loading) if (next === null || seq.loadDoneMs < next) next = seq.loadDoneMs;
    return next;
  }

  enqueue(seq: Sequence): void {
    this.waiting.push(seq);
  }

  /** Takes a request out of the engine (finished or aborted) and frees its blocks. */
  remove(seq: Sequence): void {
    if (seq.state === 'waiting') this.waiting.forget();
    if (seq.state === 'running' || seq.state === 'loading') {
      const list = seq.state === 'running' ? this.running : this.loading;
      list.splice(list.indexOf(seq), 1);
      this.kv.release(seq);
    }
    seq.state = 'finished';
  }

  /** Plans the step starting at `nowMs`. */
  plan(nowMs: number): StepPlan {
    const plan = this.step;
    plan.requests = plan.prefillTokens = plan.decodes = 0;
    this.landLoads(nowMs);
    let budget = this.limits.maxBatchedTokens;
    let preempted = false;
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const seq = this.running[i]!;
      // Received KV costs no compute and none of the step's token budget.
      const free = seq.receivable;
      const n = Math.min(seq.remaining, budget + free);
      let victim: Sequence | undefined;
      while (victim !== seq && !this.kv.canGrow(seq, n)) {
        victim = this.preemptLast();
        preempted = true;
      }
      // seq itself was the victim: nothing admitted after it was left to free.
      if (victim === seq) break;
      this.schedule(plan, seq, n);
      budget -= n - Math.min(n, free);
    }
    // Like vLLM, a step that had to preempt admits nobody: the cache is full.
    if (preempted) return this.planned(plan);
    while (budget > 0 && this.running.length + this.loading.length < this.limits.maxNumSeqs) {
      const seq = this.waiting.peek();
      if (!seq) break;
      const hits = this.kv.prefixHits(seq);
      const free = Math.max(0, seq.received - hits.length * this.kv.blockSize);
      const n = Math.min(seq.knownTokens - hits.length * this.kv.blockSize, budget + free);
      // A load needs the room of the tokens it brings and of those computed next, as vLLM allocates both at once.
      if (!this.kv.canGrow(seq, n, hits)) break;
      const loads = this.kv.offloadHits(seq, hits.length);
      if (loads > 0) {
        if (!this.kv.canLoad(loads, hits)) break;
        this.waiting.shift();
        this.beginLoad(seq, hits, loads, nowMs);
        continue;
      }
      this.waiting.shift();
      const reused = this.kv.admit(seq, hits);
      if (seq.cachedTokens < 0) {
        seq.cachedTokens = reused;
        this.prefixHitTokens += reused;
        this.admittedPromptTokens += seq.promptLength;
        this.receivedTokens += free;
      }
      seq.state = 'running';
      this.running.push(seq);
      this.schedule(plan, seq, n);
      budget -= n - Math.min(n, free);
    }
    return this.planned(plan);
  }

  private beginLoad(seq: Sequence, hits: readonly BlockId[], loads: number, nowMs: number): void {
    const tokens = loads * this.kv.blockSize;
    this.kv.beginLoad(seq, hits, loads);
    // What the engine reports as cached: the GPU hits and the loaded blocks alike, as vLLM counts them.
    if (seq.cachedTokens < 0) {
      seq.cachedTokens = (hits.length + loads) * this.kv.blockSize;
      this.prefixHitTokens += seq.cachedTokens;
      this.admittedPromptTokens += seq.promptLength;
    }
    this.loadedTokens += tokens;
    seq.loadDoneMs = nowMs + this.loadMs(tokens);
    seq.state = 'loading';
    this.loading.push(seq);
  }

  /** Loads in by `nowMs` join the running requests, as vLLM schedules a request once its KV has arrived. */
  private landLoads(nowMs: number): void {
    for (let i = 0; i < this.loading.length; ) {
      const seq = this.loading[i]!;
      if (seq.loadDoneMs > nowMs) {
        i++;
        continue;
      }
      this.loading.splice(i, 1);
      this.kv.finishLoad(seq);
      seq.state = 'running';
      this.running.push(seq);
    }
  }

  private schedule(plan: StepPlan, seq: Sequence, n: number): void {
    const decode = seq.decoding;
    const received = Math.min(n, seq.receivable);
    this.recomputedTokens += this.kv.grow(seq, n);
    plan.work[plan.requests++] = seq;
    if (decode) plan.decodes++;
    else plan.prefillTokens += n - received;
  }

  /** The plan with the previous step's leftover entries cleared, so no finished request stays reachable. */
  private planned(plan: StepPlan): StepPlan {
    const work = plan.work;
    for (let i = plan.requests; i < work.length && work[i] !== null; i++) work[i] = null;
    return plan;
  }

  private preemptLast(): Sequence {
    const victim = this.running.pop()!;
    this.kv.release(victim);
    victim.recomputeUntil = Math.max(victim.recomputeUntil, victim.computed);
    victim.computed = 0;
    // The KV that came from a prefill worker is gone with the blocks: it is computed like the rest.
    victim.received = 0;
    victim.preemptions++;
    victim.state = 'waiting';
    this.waiting.pushFront(victim);
    this.preemptions++;
    return victim;
  }
}
