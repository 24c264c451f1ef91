// One client request of a disaggregated model. The planner decides whether it
// runs whole (then this is an ordinary Exchange) or as a handoff: the
// scheduler's dispatch names the prefill worker, the planner books a decode
// worker beside it, and the engine's protocol runs (handoff-bodies.ts):
//   vllm    the prefill request first; its answer's kv_transfer_params go
//           with the decode request, whose response is relayed
//   sglang  both requests at once with one bootstrap room; the decode
//           response is held until the prefill answered, then relayed
// Until the prefill has answered (the handoff), a failure is the prefill
// worker's: both bookings are released and the request is placed again
// through the scheduler (another prefill worker, a fresh decode pick). After
// it, the decode worker holds the request: a failure before its first byte is
// an error answer, and one mid-stream ends the stream with an error event.
// The prefill booking is settled when the prefill answers; the decode booking
// on every end of the exchange (settle*).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { DisaggPlan, DisaggPlanner } from '../../router/disagg/planner.js';
import { RouterError } from '../../router/errors.js';
import type { RequestFields, RoutedRequest } from '../../router/model-fleet.js';
import type { ModelRuntime } from '../workers/model-runtime.js';
import type { WorkerHandle } from '../workers/registry.js';
import { Exchange, upstreamFailure, UpstreamStatusError, type Attempt, type ExchangeContext } from './exchange.js';
import { failureKind } from './failures.js';
import { bootstrapRoom, sglangBody, vllmDecodeBody, vllmPrefillBody, vllmTransferParams, type JsonObject } from './handoff-bodies.js';

type Phase = 'whole' | 'prefill' | 'decode';

/** SGLang's default --disaggregation-bootstrap-port, for prefill workers that do not name theirs. */
const SGLANG_BOOTSTRAP_PORT = 8998;

export class DisaggExchange extends Exchange {
  private readonly planner: DisaggPlanner;
  private plan: DisaggPlan | null = null;
  private phase: Phase = 'whole';
  /** The worker running the prefill of the pair in flight. */
  private prefillWorker: WorkerKey | null = null;
  /** The prefill request in flight; aborted when the exchange ends first. */
  private prefillCall: AbortController | null = null;
  /** Headers both requests of a pair carry besides the client's. */
  private readonly pairHeaders: readonly string[];
  /** SGLang: the decode attempt's callbacks, held until the handoff (null: not holding). */
  private held: (() => void)[] | null = null;

  constructor(
    ctx: ExchangeContext,
    model: ModelRuntime,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    body: Buffer,
    private readonly json: JsonObject,
    arrivedAt: number,
    id: string,
  ) {
    super(ctx, model, req, res, path, body, arrivedAt, id);
    this.planner = model.disagg!;
    // Both sides of a pair carry one request id, as vLLM's own proxy sends it: connectors that
    // name the prefill's blocks by request id find them from the decode's.
    const given = req.rawHeaders.some((name, i) => i % 2 === 0 && name.toLowerCase() === 'x-request-id');
    this.pairHeaders = given ? [] : ['x-request-id', id];
  }

  protected override submit(fields: RequestFields, tokens: Uint32Array): RoutedRequest | undefined {
    try {
      this.plan = this.planner.plan(fields, tokens);
    } catch (error) {
      if (!RouterError.is(error)) throw error;
      this.reject(error);
      return undefined;
    }
    // Known before the scheduler, which may dispatch at once.
    this.planner.admit(this.plan, this);
    return this.plan.request;
  }

  protected override send(worker: WorkerKey): void {
    if (!this.plan || this.plan.decision.mode === 'aggregated') return super.send(worker);
    this.worker = worker;
    this.state = 'sending';
    this.phase = 'prefill';
    this.prefillWorker = worker;
    this.model.route.sent(this.id, worker);
    const decode = this.planner.bookDecode(this.plan.request, worker);
    if (RouterError.is(decode)) {
      this.settleAborted();
      return this.fail(new RouterError('KVR_ERR_NO_WORKERS', `no decode worker can take the prefill of worker ${workerLabel(worker)}: ${decode.message}`), 'error');
    }
    const prefill = this.ctx.registry.get(worker.id);
    if (!prefill) return this.prefillFailed(worker, new Error(`worker ${worker.id} was removed`));
    if (this.planner.settings.engine === 'sglang') this.bootstrap(prefill, worker, decode.worker);
    else void this.prefillFirst(prefill, worker, decode.worker);
  }

  /** vLLM: the prefill's answer names the KV the decode request pulls. */
  private async prefillFirst(handle: WorkerHandle, prefill: WorkerKey, decode: WorkerKey): Promise<void> {
    const answer = await this.callPrefill(handle, prefill, JSON.stringify(vllmPrefillBody(this.json)));
    if (answer === null) return;
    let params: JsonObject | null;
    try {
      params = vllmTransferParams(answer);
    } catch (error) {
      return this.prefillFailed(prefill, new Error(`answered what is not JSON (${(error as Error).message})`));
    }
    this.handedOff();
    this.sendTo(decode, JSON.stringify(vllmDecodeBody(this.json, params)), false, this.pairHeaders);
  }

  /** SGLang: both sides at once, paired by a bootstrap room on the prefill server. */
  private bootstrap(handle: WorkerHandle, prefill: WorkerKey, decode: WorkerKey): void {
    const body = JSON.stringify(sglangBody(this.json, new URL(handle.config.url).hostname, handle.config.bootstrapPort ?? SGLANG_BOOTSTRAP_PORT, bootstrapRoom()));
    const held: (() => void)[] = [];
    this.held = held;
    this.sendTo(decode, body, false, this.pairHeaders);
    // The decode could not even be sent: this pair is over (the request is placed again, queued or answered).
    if (this.held !== held || this.state === 'done') return;
    void this.callPrefill(handle, prefill, body).then((answer) => {
      if (answer === null) return;
      this.handedOff();
      this.held = null;
      for (const run of held) run();
    });
  }

  /**
   * Sends the prefill request and reads its answer whole. Returns the answer of
   * a success; null when the exchange went on without it (the answer was a
   * failure, now being retried or answered, or the exchange ended).
   */
  private async callPrefill(handle: WorkerHandle, prefill: WorkerKey, body: string): Promise<string | null> {
    const call = new AbortController();
    this.prefillCall = call;
    const current = () => this.prefillCall === call && this.state !== 'done';
    let status: number;
    let text: string;
    try {
      const answer = await handle.pool.request({
        path: handle.basePath + this.path,
        method: 'POST',
        headers: this.upstreamHeaders(handle, prefill, this.pairHeaders),
        body,
        signal: call.signal,
      });
      status = answer.statusCode;
      text = await answer.body.text();
    } catch (error) {
      if (current()) this.prefillFailed(prefill, error as Error);
      return null;
    }
    if (!current()) return null;
    this.prefillCall = null;
    if (status >= 500) {
      this.health(prefill, '5xx');
      this.prefillFailed(prefill, new UpstreamStatusError(status, text));
      return null;
    }
    this.health(prefill, 'success');
    if (status >= 400) {
      // The engine refused the request itself (a bad parameter): that is the client's answer.
      this.held = null;
      this.dropDecodeAttempt('the prefill worker refused the request');
      this.settleCompleted();
      this.state = 'done';
      this.res.writeHead(status, { 'content-type': 'application/json', 'x-kvrouter-worker': workerLabel(prefill) });
      this.res.end(text);
      this.finish(status, 'error');
      return null;
    }
    return text;
  }

  /** The prefill answered: its booking is settled, and the decode worker has the request from here. */
  private handedOff(): void {
    this.phase = 'decode';
    this.model.route.completed(this.id);
  }

  /** Before the handoff: the decode side goes too, and the request is placed again (or answered) as any failure before the first byte. */
  private prefillFailed(prefill: WorkerKey, error: Error): void {
    this.prefillCall = null;
    this.held = null;
    this.dropDecodeAttempt('its prefill failed');
    this.planner.releaseDecode(this.id);
    this.phase = 'whole';
    super.failBeforeBytes(prefill, error);
  }

  /** Stops the decode attempt of a pair that will not go on; it is no longer current first, so its abort is not heard as a failure. */
  private dropDecodeAttempt(reason: string): void {
    const attempt = this.attempt;
    this.attempt = null;
    attempt?.abort(reason);
  }

  protected override failBeforeBytes(worker: WorkerKey, error: Error): void {
    if (this.phase === 'prefill' && this.held !== null) {
      // SGLang's decode request failed before the handoff: the pair goes again, on the prefill worker's account.
      return this.prefillFailed(this.prefillWorker!, error);
    }
    if (this.phase !== 'decode') return super.failBeforeBytes(worker, error);
    if (this.state === 'done') return;
    // The prefill's KV went to this worker: placing the request again would prefill it a second time elsewhere.
    this.attempt = null;
    const kind = failureKind(error);
    if (kind) this.health(worker, kind);
    this.settleAborted();
    this.fail(upstreamFailure(worker, error, ' after the prefill handed it the request\'s KV'), 'error');
  }

  // SGLang's decode answer waits for the handoff; vLLM's decode starts after it, so nothing is held.
  override onHeaders(attempt: Attempt, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (this.held) this.held.push(() => this.owns(attempt) && super.onHeaders(attempt, status, headers));
    else super.onHeaders(attempt, status, headers);
  }
  override onData(attempt: Attempt, chunk: Buffer): void {
    if (this.held) this.held.push(() => this.owns(attempt) && super.onData(attempt, chunk));
    else super.onData(attempt, chunk);
  }
  override onEnd(attempt: Attempt): void {
    if (this.held) this.held.push(() => this.owns(attempt) && super.onEnd(attempt));
    else super.onEnd(attempt);
  }
  override onError(attempt: Attempt, error: Error): void {
    if (this.held) this.held.push(() => this.owns(attempt) && super.onError(attempt, error));
    else super.onError(attempt, error);
  }

  protected override settleCompleted(): void {
    super.settleCompleted();
    this.planner.releaseDecode(this.id);
  }
  protected override settleAborted(): void {
    this.prefillCall?.abort();
    this.prefillCall = null;
    super.settleAborted();
    this.planner.releaseDecode(this.id);
  }
}
