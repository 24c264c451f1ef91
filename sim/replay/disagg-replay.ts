// A disaggregated fleet in a replay: the first workers prefill, the rest
// decode, and the router's own planner (router/disagg/) decides per request
// and picks both sides. A split request runs vLLM's flow on the mock engines
// in virtual time: the prefill worker computes the prompt for one token, its
// full blocks' KV crosses over in bytes per token over the bandwidth, and the
// decode worker is admitted with those tokens received and generates the
// answer. Its TTFT is the decode's first token, as a client of the real
// flow sees it.
import type { Clock } from '../../router/clock.js';
import { DisaggPlanner, type DisaggPlan } from '../../router/disagg/planner.js';
import { roleTaints } from '../../router/disagg/roles.js';
import { RouterError } from '../../router/errors.js';
import type { ModelRouter } from '../../router/model-router.js';
import type { RequestFields } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import type { DispatchHandlers } from '../../router/scheduler/scheduler.js';
import type { EngineShape } from '../mocker/engine-options.js';
import type { MockEngine } from '../mocker/engine.js';
import { checkTransferShape, TRANSFER_DEFAULTS, transferMs, type KvTransferShape } from '../mocker/kv-handoff.js';
import type { RequestResult } from '../mocker/sequence.js';

export interface ReplayDisaggregation {
  /** Workers 0..prefillWorkers-1 prefill; the others decode (and run short prompts whole). */
  prefillWorkers: number;
  /** The decider's threshold in uncached prompt tokens. */
  minRemotePrefillTokens: number;
  transfer?: Partial<KvTransferShape>;
}

/** What a split request reports back to the replay. */
export interface SplitHooks {
  engineOf(workerId: string): MockEngine;
  blockHashes: BigUint64Array | undefined;
  /** The decode worker it went to. */
  decoding(workerId: string): void;
  firstToken(atMs: number): void;
  complete(result: RequestResult): void;
  failed(message: string): void;
}

export class DisaggReplay {
  private readonly planner: DisaggPlanner;
  private readonly plans = new Map<string, DisaggPlan>();
  private readonly transfer: KvTransferShape;

  constructor(
    private readonly route: ModelRouter,
    private readonly clock: Clock,
    private readonly options: ReplayDisaggregation,
    workers: number,
    private readonly shape: EngineShape,
  ) {
    const p = options.prefillWorkers;
    if (!Number.isInteger(p) || p < 1 || p >= workers) throw new RangeError(`prefillWorkers must leave at least one of the ${workers} workers to decode, got ${p}`);
    if (!Number.isInteger(options.minRemotePrefillTokens) || options.minRemotePrefillTokens < 0) {
      throw new RangeError(`minRemotePrefillTokens must be an integer >= 0, got ${options.minRemotePrefillTokens}`);
    }
    const t = options.transfer;
    this.transfer = checkTransferShape({ kvBytesPerToken: t?.kvBytesPerToken ?? TRANSFER_DEFAULTS.kvBytesPerToken, kvBandwidth: t?.kvBandwidth ?? TRANSFER_DEFAULTS.kvBandwidth });
    this.planner = new DisaggPlanner(route, { engine: 'vllm', minRemotePrefillTokens: options.minRemotePrefillTokens, decodePrefixReuse: true });
  }

  taintsOf(worker: number): string[] {
    return roleTaints(worker < this.options.prefillWorkers ? 'prefill' : 'decode', 'vllm');
  }

  submit(fields: RequestFields, tokens: Uint32Array, handlers: DispatchHandlers): void {
    let plan: DisaggPlan;
    try {
      plan = this.planner.plan(fields, tokens);
    } catch (error) {
      if (!RouterError.is(error)) throw error;
      return handlers.reject(error);
    }
    this.plans.set(fields.id, plan);
    this.planner.admit(plan, handlers);
  }

  /** Whether the admitted request is a prefill (its decode comes after). */
  splits(requestId: string): boolean {
    return this.plans.get(requestId)?.decision.mode === 'disaggregated';
  }

  dispatch(id: string, tokens: Uint32Array, outputLength: number, admission: Admission, hooks: SplitHooks): void {
    const route = this.route;
    route.sent(id, admission.worker);
    const decode = this.planner.bookDecode(this.plans.get(id)!.request, admission.worker);
    if (RouterError.is(decode)) {
      route.aborted(id);
      return hooks.failed(`${decode.code}: ${decode.message}`);
    }
    hooks.decoding(decode.worker.id);
    const fail = (error: unknown) => {
      route.aborted(id);
      this.planner.releaseDecode(id);
      hooks.failed((error as Error).message);
    };
    try {
      hooks.engineOf(admission.worker.id).submit({
        id,
        tokens,
        blockHashes: hooks.blockHashes,
        maxTokens: 1,
        onComplete: (prefill) => {
          route.completed(id);
          // The prefill sends its full blocks; the decode computes the partial one.
          const received = Math.floor(tokens.length / this.shape.blockSize) * this.shape.blockSize;
          this.clock.at(this.clock.now() + transferMs(received, this.transfer) / this.shape.speedup, () => {
            try {
              hooks.engineOf(decode.worker.id).submit({
                id,
                tokens,
                blockHashes: hooks.blockHashes,
                maxTokens: outputLength,
                remoteTokens: received,
                onFirstToken: (at) => hooks.firstToken(at),
                // The request's cache reuse is its prefill's.
                onComplete: (result) => hooks.complete({ ...result, cachedTokens: prefill.cachedTokens }),
              });
            } catch (error) {
              fail(error);
            }
          });
        },
      });
    } catch (error) {
      fail(error);
    }
  }

  /** A request ended: its decode booking (if any) goes. */
  completed(requestId: string): void {
    this.planner.releaseDecode(requestId);
    this.plans.delete(requestId);
  }

  close(): void {
    this.planner.close();
  }
}
