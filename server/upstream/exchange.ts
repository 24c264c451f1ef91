// One client request through the router, from admission to the last byte:
// it waits in the model's scheduler, goes to the chosen worker over that
// worker's pool, and relays the response with backpressure. Every way it can
// end settles the scheduler exactly once:
//   completed  the worker's response ended (a status below 500)
//   aborted    the client went away, the stream broke, it timed out, shutdown
//   retry      a failure before the first byte (a 5xx answer included)
//              re-places it through admission (ModelRouter.retry, which
//              releases the failed booking; a failed retry settles it). A
//              retry that finds every worker busy waits in the queue, and the
//              scheduler dispatches or rejects it later like any request
//   reject     the scheduler refused it (it holds no booking)
// Each attempt's outcome also goes to the outlier detector, which takes a
// worker that keeps failing out of selection: a 5xx when its headers come,
// a transport failure or timeout when it happens (mid-response too), and a
// success only when the response has ended. A worker ejected as stalled
// aborts the attempts waiting on it (server/workers/stall-watch.ts); they
// end here like a broken connection, a retry or a cut stream.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import { RouterError } from '../../router/errors.js';
import type { RequestFields, RoutedRequest } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import type { DispatchHandlers } from '../../router/scheduler/scheduler.js';
import type { LimitsConfig } from '../config/schema.js';
import type { ResponseTap } from '../diagnostics/response-tap.js';
import { sendError, sseErrorEvent } from '../http/respond.js';
import type { ModelInstruments, Outcome, RouterMetrics } from '../metrics.js';
import type { AttemptOutcome } from '../workers/outliers.js';
import type { WorkerHandle, WorkerRegistry } from '../workers/registry.js';
import type { ModelRuntime } from '../workers/model-runtime.js';
import { failureKind, isTimeout } from './failures.js';
import { clientResponseHeaders, isEventStream, upstreamRequestHeaders } from './headers.js';

export interface ExchangeContext {
  registry: WorkerRegistry;
  metrics: RouterMetrics;
  limits: LimitsConfig;
  /** Exchanges not yet ended, for graceful shutdown. */
  live: Set<Exchange>;
  /** Hears of each dispatch and follows its response (the router's diagnostics); absent: none. */
  diagnostics?: DispatchTap | null;
}

/** Follows dispatched requests for the diagnostics: a tap per dispatch, fed the relayed chunks, ended when the response ends whole. */
export interface DispatchTap {
  dispatched(model: ModelRuntime, admission: Admission, promptTokens: number, arrivedAt: number): ResponseTap;
}

type State = 'queued' | 'sending' | 'relaying' | 'done';

/** Upstream bodies of failed attempts are kept (bounded) to explain the failure. */
const ERROR_BODY_LIMIT = 4096;

/** One try on one worker; callbacks from an attempt that is no longer current are ignored. */
export class Attempt implements Dispatcher.DispatchHandler {
  controller: Dispatcher.DispatchController | null = null;
  /** Status of a 5xx answer being read before a retry or the error answer. */
  failedStatus = 0;
  errorBody: Buffer[] = [];
  errorBytes = 0;

  constructor(
    readonly exchange: Exchange,
    readonly worker: WorkerKey,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (!this.exchange.owns(this)) controller.abort(new Error('the request ended before it was sent'));
  }
  onResponseStart(_c: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (this.exchange.owns(this)) this.exchange.onHeaders(this, status, headers);
  }
  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.exchange.owns(this)) this.exchange.onData(this, chunk);
  }
  onResponseEnd(): void {
    if (this.exchange.owns(this)) this.exchange.onEnd(this);
  }
  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    if (this.exchange.owns(this)) this.exchange.onError(this, error);
  }

  abort(reason: string): void {
    if (this.controller && !this.controller.aborted) this.controller.abort(new Error(reason));
  }
}

export class Exchange implements DispatchHandlers {
  protected state: State = 'queued';
  protected attempt: Attempt | null = null;
  protected worker: WorkerKey | null = null;
  private retries = 0;
  /** The last attempt that failed before the first byte, to explain a retry that could not be placed. */
  private failure: { worker: WorkerKey; error: Error } | null = null;
  private eventStream = false;
  private sawData = false;
  /** The last two bytes relayed (0x0a0a: the stream is at an SSE event boundary). */
  private tail = 0x0a0a;
  private waitingDrain = false;
  private submittedAt = 0;
  private promptTokens = 0;
  private fields: RequestFields | null = null;
  private routed: RoutedRequest | undefined;
  private tap: ResponseTap | null = null;
  private readonly instruments: ModelInstruments;

  constructor(
    protected readonly ctx: ExchangeContext,
    protected readonly model: ModelRuntime,
    protected readonly req: IncomingMessage,
    protected readonly res: ServerResponse,
    protected readonly path: string,
    protected readonly body: Buffer,
    /** performance.now() when the request arrived. */
    private readonly arrivedAt: number,
    protected readonly id: string,
  ) {
    this.instruments = ctx.metrics.forModel(model.name);
  }

  /** Submits to the scheduler; the response is written by whatever ends the exchange. */
  start(fields: RequestFields, tokens: Uint32Array): void {
    this.ctx.live.add(this);
    this.res.on('close', () => this.onClientClose());
    this.promptTokens = tokens.length;
    this.submittedAt = performance.now();
    this.fields = fields;
    try {
      this.routed = this.submit(fields, tokens);
      // A request dispatched inside submit had no prompt to show its tap yet.
      if (this.routed) this.tap?.prompt(this.routed, fields);
    } catch (error) {
      // A bug below: the caller answers 500; nothing of this exchange may stay behind.
      this.state = 'done';
      this.ctx.live.delete(this);
      this.attempt?.abort('the router failed');
      this.settleAborted();
      throw error;
    }
    if (this.state !== 'done') this.instruments.decision.observe((performance.now() - this.arrivedAt) / 1000);
  }

  /** Hands the request to the scheduler; the routed request, or undefined when it was refused. */
  protected submit(fields: RequestFields, tokens: Uint32Array): RoutedRequest | undefined {
    return this.model.route.submit(fields, tokens, this);
  }

  // The request's settlement with the scheduler (and its ledger booking).
  protected settleFirstToken(): void {
    this.model.route.firstToken(this.id);
  }
  protected settleCompleted(): void {
    this.model.route.completed(this.id);
  }
  protected settleAborted(): void {
    this.model.route.aborted(this.id);
  }

  owns(attempt: Attempt): boolean {
    return this.attempt === attempt && this.state !== 'done';
  }

  // ---- scheduler handlers ----

  dispatch(admission: Admission): void {
    if (this.state === 'done') return;
    // A retry that waited for capacity is dispatched again: the request was counted the first time.
    if (!this.failure) {
      this.instruments.queueWait.observe((performance.now() - this.submittedAt) / 1000);
      this.instruments.promptTokens.inc(this.promptTokens);
      this.instruments.cachedTokens.inc(admission.cachedTokens);
    }
    this.tap = this.ctx.diagnostics?.dispatched(this.model, admission, this.promptTokens, this.arrivedAt) ?? null;
    if (this.routed) this.tap?.prompt(this.routed, this.fields!);
    this.send(admission.worker);
  }

  reject(error: RouterError): void {
    if (this.state === 'done') return;
    if (this.failure) return this.failRetry(error);
    this.ctx.metrics.rejected(this.model.name, error.code);
    this.fail(error, 'rejected');
  }

  // ---- upstream ----

  protected send(worker: WorkerKey): void {
    this.sendTo(worker, this.body, true);
  }

  /** One attempt with this body (and headers besides the client's); `scheduled`: the attempt is the scheduler's dispatch (it hears Sent). */
  protected sendTo(worker: WorkerKey, body: Buffer | string, scheduled: boolean, extraHeaders: readonly string[] = []): void {
    this.worker = worker;
    this.state = 'sending';
    const attempt = new Attempt(this, worker);
    this.attempt = attempt;
    const handle = this.ctx.registry.get(worker.id);
    if (!handle) return this.failBeforeBytes(worker, new Error(`worker ${worker.id} was removed`));
    if (scheduled) this.model.route.sent(this.id, worker);
    try {
      handle.dispatch({ path: handle.basePath + this.path, method: 'POST', headers: this.upstreamHeaders(handle, worker, extraHeaders), body }, attempt);
    } catch (error) {
      this.failBeforeBytes(worker, error as Error);
    }
  }

  /** The client's headers for a worker's rank, and these besides. */
  protected upstreamHeaders(handle: WorkerHandle, worker: WorkerKey, extra: readonly string[]): string[] {
    // A worker with one rank leaves the header out: the engine has nothing to choose.
    const rank = handle.config.dataParallelSize > 1 ? worker.rank : null;
    const headers = upstreamRequestHeaders(this.req.rawHeaders, handle.config.apiKey, rank);
    for (const h of extra) headers.push(h);
    return headers;
  }

  onHeaders(attempt: Attempt, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status >= 500) {
      // Read the error body, then place the request again or answer with the router's error (onEnd).
      this.health(attempt.worker, '5xx');
      attempt.failedStatus = status;
      return;
    }
    // Its health is told when the response ends: a response cut mid-way is a failure, not a success.
    this.eventStream = isEventStream(headers);
    this.res.writeHead(status, clientResponseHeaders(headers, workerLabel(attempt.worker)));
    this.state = 'relaying';
  }

  onData(attempt: Attempt, chunk: Buffer): void {
    if (attempt.failedStatus !== 0) {
      if (attempt.errorBytes < ERROR_BODY_LIMIT) {
        attempt.errorBody.push(chunk);
        attempt.errorBytes += chunk.length;
      }
      return;
    }
    if (!this.sawData) {
      this.sawData = true;
      if (this.res.statusCode < 400) {
        this.settleFirstToken();
        this.instruments.ttft.observe((performance.now() - this.arrivedAt) / 1000);
      }
    }
    if (this.res.statusCode < 400) this.tap?.data(chunk, this.eventStream);
    const n = chunk.length;
    if (n >= 2) this.tail = (chunk[n - 2]! << 8) | chunk[n - 1]!;
    else if (n === 1) this.tail = ((this.tail & 0xff) << 8) | chunk[0]!;
    if (!this.res.write(chunk) && !this.waitingDrain) {
      // The client reads slower than the worker writes: stop reading from the worker until it catches up.
      this.waitingDrain = true;
      attempt.controller?.pause();
      this.res.once('drain', () => {
        this.waitingDrain = false;
        if (this.owns(attempt)) attempt.controller?.resume();
      });
    }
  }

  onEnd(attempt: Attempt): void {
    if (attempt.failedStatus !== 0) {
      const text = Buffer.concat(attempt.errorBody).toString('utf8').slice(0, ERROR_BODY_LIMIT);
      return this.failBeforeBytes(attempt.worker, new UpstreamStatusError(attempt.failedStatus, text));
    }
    this.state = 'done';
    this.health(attempt.worker, 'success');
    this.res.end();
    if (this.res.statusCode < 400) this.tap?.end();
    this.settleCompleted();
    this.finish(this.res.statusCode, this.res.statusCode < 400 ? 'success' : 'error');
  }

  onError(attempt: Attempt, error: Error): void {
    if (this.state !== 'relaying') return this.failBeforeBytes(attempt.worker, error);
    // Mid-response: the client already has a status line; end the stream with an error it cannot mistake for success.
    this.state = 'done';
    // A socket that breaks mid-response counts against the worker like one that breaks before it.
    const kind = failureKind(error);
    if (kind) this.health(attempt.worker, kind);
    this.settleAborted();
    const routerError = new RouterError('KVR_ERR_UPSTREAM_INTERRUPTED', `worker ${workerLabel(attempt.worker)} failed mid-response: ${describe(error)}`);
    this.breakStream(routerError);
    this.finish(this.res.statusCode, 'interrupted');
  }

  /** A failure before any byte reached the client: place the request again, or answer with an error. */
  protected failBeforeBytes(worker: WorkerKey, error: Error): void {
    if (this.state === 'done') return;
    // Callbacks of this attempt that might still come are ignored from here on.
    this.attempt = null;
    const timedOut = isTimeout(error);
    // Transport failures and timeouts count against the worker here; a 5xx answer counted when its headers came.
    const kind = failureKind(error);
    if (kind) this.health(worker, kind);
    // A timeout already cost the client its patience; placing it again would double the wait.
    if (!timedOut && this.retries < this.ctx.limits.maxRetries) {
      this.retries++;
      this.failure = { worker, error };
      this.ctx.metrics.retried(this.model.name, workerLabel(worker));
      // Back in the scheduler's hands: dispatched now, refused, or waiting in its lane until the scheduler dispatches or rejects it.
      this.state = 'queued';
      const next = this.model.route.retry(this.id, worker);
      if (next === 'queued') return;
      if (!RouterError.is(next)) return this.dispatch(next);
      // No other worker: the scheduler has settled the request.
      return this.failRetry(next);
    }
    this.settleAborted();
    this.fail(timedOut ? new RouterError('KVR_ERR_UPSTREAM_TIMEOUT', `worker ${workerLabel(worker)} timed out: ${describe(error)}`) : upstreamFailure(worker, error, ''), 'error');
  }

  /** A retry the scheduler could not place: the client learns of the worker's failure, and why no other worker took over. */
  private failRetry(refusal: RouterError): void {
    const { worker, error } = this.failure!;
    this.fail(upstreamFailure(worker, error, `; no other worker could take it (${refusal.message})`), 'error');
  }

  protected health(worker: WorkerKey, outcome: AttemptOutcome): void {
    this.ctx.registry.outliers.record(worker.id, outcome);
  }

  // ---- client side ----

  protected onClientClose(): void {
    if (this.state === 'done') return;
    // The client went away before the response ended: stop the worker's work and free its booking now.
    this.state = 'done';
    this.attempt?.abort('the client closed the connection');
    this.settleAborted();
    this.finish(499, 'aborted');
  }

  /** Shutdown past its grace period: end the response with an error and free the booking. */
  shutDown(): void {
    if (this.state === 'done') return;
    const relaying = this.state === 'relaying';
    this.state = 'done';
    this.attempt?.abort('the router is shutting down');
    this.settleAborted();
    const error = new RouterError('KVR_ERR_SHUTTING_DOWN', 'the router shut down before the response ended');
    if (relaying) this.breakStream(error);
    else sendError(this.res, error, this.worker && workerLabel(this.worker));
    this.finish(relaying ? this.res.statusCode : error.status, relaying ? 'interrupted' : 'error');
  }

  private breakStream(error: RouterError): void {
    if (this.eventStream && !this.res.destroyed) {
      // A worker cut mid-event leaves a partial line: close it so the error is an event of its own.
      this.res.end((this.tail === 0x0a0a ? '' : '\n\n') + sseErrorEvent(error));
    } else {
      // A JSON body cut short cannot carry an error: break the connection so it is not read as complete.
      this.res.destroy();
    }
  }

  protected fail(error: RouterError, outcome: Outcome): void {
    this.state = 'done';
    sendError(this.res, error, this.worker && workerLabel(this.worker));
    this.finish(error.status, outcome);
  }

  protected finish(code: number, outcome: Outcome): void {
    this.ctx.live.delete(this);
    this.ctx.metrics.ended(this.model.name, this.worker ? workerLabel(this.worker) : '', code, outcome);
    this.instruments.latency.observe((performance.now() - this.arrivedAt) / 1000);
  }
}

export class UpstreamStatusError extends Error {
  constructor(
    readonly status: number,
    body: string,
  ) {
    super(`answered ${status}${body ? `: ${upstreamMessage(body)}` : ''}`);
  }
}

/** The message inside an OpenAI-style error body, or the start of the text. */
function upstreamMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    const message = typeof parsed.error === 'object' ? parsed.error?.message : parsed.error ?? parsed.message;
    if (typeof message === 'string') return message;
  } catch {
    // not JSON
  }
  return body.slice(0, 200);
}

function describe(error: Error): string {
  const code = (error as { code?: string }).code;
  return code ? `${error.message} (${code})` : error.message;
}

export function upstreamFailure(worker: WorkerKey, error: Error, suffix: string): RouterError {
  const details = error instanceof UpstreamStatusError ? { upstream_status: error.status } : {};
  return new RouterError('KVR_ERR_UPSTREAM', `worker ${workerLabel(worker)} ${error instanceof UpstreamStatusError ? '' : 'failed: '}${describe(error)}${suffix}`, details);
}
