// One replay run: a workload through the real router (ModelRouter: scheduler,
// prefix index, load ledger, selection policy) and N mock engines, all on one
// VirtualClock. The router learns what each engine caches only from the
// engine's KV events, delivered `eventDelayMs` after the engine published
// them, as a live router hears them over ZeroMQ. Lifecycle signals (sent,
// first token, completed) reach the router at once, as the streaming
// response carries them.
import { VirtualClock } from '../../router/clock.js';
import type { LearnedSpeed } from '../../router/model-fleet/speeds.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { ModelRouter, type ModelRouterOptions } from '../../router/model-router.js';
import type { RouterError } from '../../router/errors.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import type { SelectionPolicy } from '../../router/selection/contracts.js';
import type { HashBlocks } from '../mocker/block-hash.js';
import { MockEngine, type EngineStats } from '../mocker/engine.js';
import { resolveEngineShape, type EngineShape, type StepReport } from '../mocker/engine-options.js';
import type { RequestResult } from '../mocker/sequence.js';
import { wasmChainedHashes } from './engine-hasher.js';
import { DisaggReplay, type ReplayDisaggregation } from './disagg-replay.js';
import { traceBlockHashes } from './trace-prefixes.js';
import { checkWorkload, promptTokens, sessionFinals, type ReplayRequest, type Workload } from './workload.js';

/** Admission settings of the replayed router (policy classes, a classifier with its gate). */
export type ReplayRouterOptions = Pick<ModelRouterOptions, 'classes' | 'defaultClass' | 'classifier' | 'tickMs'>;

/** The engine knobs a replay sets (the same for every worker). */
export type FleetEngineShape = Pick<EngineShape, 'numBlocks' | 'blockSize' | 'maxBatchedTokens' | 'maxNumSeqs' | 'speedup' | 'offloadBlocks' | 'offloadLoadMsPerToken'>;

export interface SimulateOptions {
  /** Name the run is reported under. */
  label: string;
  selection: SelectionPolicy;
  /** Default: one class that never queues on load (requests dispatch on arrival). */
  router?: ReplayRouterOptions;
  workers: number;
  engine?: Partial<FleetEngineShape>;
  /** What the router credits a cached block in each storage tier (default: the router's defaults). */
  tierWeights?: ModelRouterOptions['tierWeights'];
  /** Delay between an engine publishing a KV event batch and the router applying it (ms). */
  eventDelayMs: number;
  /** Divides the workload's arrival times and session pauses. */
  arrivalSpeedup: number;
  /** Seeds the router's random choices. */
  seed: number;
  /** The engines' block hasher (default: chained XXH3 on a wasm core of the run's own). */
  hashBlocks?: HashBlocks;
  /** Called each time a request finishes (completed, rejected or failed). */
  onProgress?(finished: number, total: number): void;
  /** An audit's view: each request as it arrives, before the router sees it, and each engine step as it starts. */
  audit?: ReplayAudit;
  /** Engines slowed during the run: from `atMs` (virtual), worker `worker`'s steps take `factor` times as long. */
  slowdowns?: readonly { worker: number; atMs: number; factor: number }[];
  /** A disaggregated fleet: the workers' roles, the decider's threshold and the KV transfer (default: every worker runs whole requests). */
  disaggregation?: ReplayDisaggregation;
}

export interface ReplayAudit {
  arrival(index: number, route: ModelRouter, fields: Parameters<ModelRouter['explain']>[0], tokens: Uint32Array): void;
  step(worker: number, step: StepReport): void;
}

export type RequestOutcome = 'completed' | 'rejected' | 'failed';

export interface RequestRecord {
  id: string;
  /** The workload's session id and tag (null when it has none). */
  sessionId: string | null;
  tag: string | null;
  /** Index of the worker it ran on; -1 when it was never dispatched. */
  worker: number;
  arrivalMs: number;
  dispatchMs: number | null;
  firstTokenMs: number | null;
  /** Last token time for a completed request, else when it was rejected or failed. */
  endMs: number;
  promptTokens: number;
  /** Prompt tokens the engine reused from its prefix cache at first admission. */
  cachedTokens: number;
  outputTokens: number;
  preemptions: number;
  recomputedTokens: number;
  outcome: RequestOutcome;
  error: string | null;
}

/** How the router's prefix index took the engines' KV events. */
export interface RouterEventCounts {
  batches: number;
  stored: number;
  removed: number;
  /** Stored events the index could not attach (unknown parent) or whose tokens did not match. */
  skippedStores: number;
  /** Stored events over another block size than the router's (they never match anything). */
  blockSizeMismatches: number;
}

export interface SimulationResult {
  label: string;
  arrivalSpeedup: number;
  workerIds: string[];
  /** In workload order; every request has one. */
  records: RequestRecord[];
  engines: EngineStats[];
  routerEvents: RouterEventCounts;
  /** What the router learned of each worker's prefill speed by the end of the run, in worker order. */
  speeds: (LearnedSpeed | undefined)[];
  wallMs: number;
}

export function checkReplayOptions(o: Pick<SimulateOptions, 'workers' | 'eventDelayMs' | 'arrivalSpeedup' | 'seed'>): void {
  if (!Number.isInteger(o.workers) || o.workers < 1) throw new RangeError(`workers must be an integer >= 1, got ${o.workers}`);
  if (!Number.isFinite(o.eventDelayMs) || o.eventDelayMs < 0) throw new RangeError(`eventDelayMs must be a finite number >= 0, got ${o.eventDelayMs}`);
  if (!Number.isFinite(o.arrivalSpeedup) || o.arrivalSpeedup <= 0) throw new RangeError(`arrivalSpeedup must be a finite number > 0, got ${o.arrivalSpeedup}`);
  if (!Number.isSafeInteger(o.seed) || o.seed < 0) throw new RangeError(`seed must be an integer >= 0, got ${o.seed}`);
}

function blankRecord(request: ReplayRequest): RequestRecord {
  return {
    id: request.id,
    sessionId: request.sessionId,
    tag: request.tag ?? null,
    worker: -1,
    arrivalMs: NaN,
    dispatchMs: null,
    firstTokenMs: null,
    endMs: NaN,
    promptTokens: request.inputLength,
    cachedTokens: 0,
    outputTokens: 0,
    preemptions: 0,
    recomputedTokens: 0,
    outcome: 'failed',
    error: null,
  };
}

export function simulate(workload: Workload, options: SimulateOptions): SimulationResult {
  checkWorkload(workload);
  checkReplayOptions(options);
  const started = performance.now();
  const shape = resolveEngineShape({ ...options.engine, dpRank: 0 });
  const clock = new VirtualClock(0);
  const route = new ModelRouter({
    ...options.router,
    model: 'replay',
    blockSize: shape.blockSize,
    clock,
    policy: options.selection,
    tierWeights: options.tierWeights,
    seed: options.seed,
    // The periodic sweep re-arms forever; on a virtual clock the run would never end.
    sweepIntervalMs: 0,
  });
  const requests = workload.requests;
  const total = requests.length;
  const records = requests.map(blankRecord);
  const finals = sessionFinals(requests);
  const workerIds: string[] = [];
  const workerIndex = new Map<string, number>();
  const routerEvents: RouterEventCounts = { batches: 0, stored: 0, removed: 0, skippedStores: 0, blockSizeMismatches: 0 };
  const engines: MockEngine[] = [];
  const hashBlocks = options.hashBlocks ?? wasmChainedHashes();
  const disagg = options.disaggregation ? new DisaggReplay(route, clock, options.disaggregation, options.workers, shape) : null;
  for (let w = 0; w < options.workers; w++) {
    const id = `w${w}`;
    const [key] = route.addWorker({ id, totalBlocks: shape.numBlocks, maxBatchedTokens: shape.maxBatchedTokens, taints: disagg?.taintsOf(w) });
    workerIds.push(id);
    workerIndex.set(id, w);
    const deliver = (batch: KvEventBatch) => {
      routerEvents.batches++;
      route.applyEvents(key!, batch);
    };
    engines.push(
      new MockEngine({
        ...shape,
        clock,
        hashBlocks,
        onStep: options.audit && ((step) => options.audit!.step(w, step)),
        onEvents: options.eventDelayMs > 0 ? (batch) => void clock.at(clock.now() + options.eventDelayMs, () => deliver(batch)) : deliver,
      }),
    );
  }

  for (const s of options.slowdowns ?? []) {
    const engine = engines[s.worker];
    if (!engine) throw new RangeError(`slowdown of worker ${s.worker}: the run has ${engines.length} workers`);
    clock.at(s.atMs, () => engine.slowDown(s.factor));
  }

  // A delayed turn arrives after the previous turn of its session ends.
  const follower = new Map<number, number>();
  const lastOfSession = new Map<string, number>();
  requests.forEach((r, i) => {
    if (r.sessionId === null) return;
    if ('delayMs' in r.arrival) follower.set(lastOfSession.get(r.sessionId)!, i);
    lastOfSession.set(r.sessionId, i);
  });

  let finished = 0;
  const end = (i: number, outcome: RequestOutcome, error: string | null) => {
    const record = records[i]!;
    record.outcome = outcome;
    record.error = error;
    if (outcome !== 'completed') record.endMs = clock.now();
    finished++;
    options.onProgress?.(finished, total);
    const next = follower.get(i);
    if (next !== undefined) {
      const arrival = requests[next]!.arrival as { delayMs: number };
      clock.at(clock.now() + arrival.delayMs / options.arrivalSpeedup, () => arrive(next));
    }
  };

  const complete = (i: number, result: RequestResult) => {
    const record = records[i]!;
    record.cachedTokens = result.cachedTokens;
    record.outputTokens = result.outputTokens;
    record.preemptions = result.preemptions;
    record.recomputedTokens = result.recomputedTokens;
    record.endMs = result.tokenTimesMs[result.tokenTimesMs.length - 1] ?? result.finishMs;
    route.completed(result.id);
    disagg?.completed(result.id);
    end(i, 'completed', null);
  };

  const dispatch = (i: number, tokens: Uint32Array, admission: Admission) => {
    const request = requests[i]!;
    const record = records[i]!;
    if (disagg?.splits(request.id)) {
      record.dispatchMs = clock.now();
      return disagg.dispatch(request.id, tokens, request.outputLength, admission, {
        engineOf: (id) => engines[workerIndex.get(id)!]!,
        blockHashes: request.trace && traceBlockHashes(request.trace, request.inputLength, shape.blockSize),
        decoding: (id) => (record.worker = workerIndex.get(id)!),
        firstToken: (at) => (record.firstTokenMs = at),
        complete: (result) => complete(i, result),
        failed: (message) => end(i, 'failed', message),
      });
    }
    const w = workerIndex.get(admission.worker.id)!;
    record.worker = w;
    record.dispatchMs = clock.now();
    route.sent(request.id, admission.worker);
    try {
      engines[w]!.submit({
        id: request.id,
        tokens,
        // A prompt of trace blocks is named block by block from its ids, without hashing its tokens.
        blockHashes: request.trace && traceBlockHashes(request.trace, request.inputLength, shape.blockSize),
        maxTokens: request.outputLength,
        onFirstToken: (at) => {
          record.firstTokenMs = at;
          route.firstToken(request.id);
        },
        onComplete: (result) => complete(i, result),
      });
    } catch (error) {
      // The engine refused it (a prompt its cache could never hold): the worker failed the request.
      route.aborted(request.id);
      end(i, 'failed', (error as Error).message);
    }
  };

  const arrive = (i: number) => {
    const request = requests[i]!;
    const tokens = promptTokens(request);
    records[i]!.arrivalMs = clock.now();
    const fields = {
      id: request.id,
      sessionId: request.sessionId,
      sessionFinal: finals[i]!,
      policyClass: null,
      priority: 0,
      tier: 0,
      pin: null,
      allowedWorkers: null,
    };
    options.audit?.arrival(i, route, fields, tokens);
    const handlers = {
      dispatch: (admission: Admission) => dispatch(i, tokens, admission),
      reject: (error: RouterError) => end(i, 'rejected', `${error.code}: ${error.message}`),
    };
    if (disagg) disagg.submit(fields, tokens, handlers);
    else route.submit(fields, tokens, handlers);
  };

  requests.forEach((r, i) => {
    if ('atMs' in r.arrival) clock.at(r.arrival.atMs / options.arrivalSpeedup, () => arrive(i));
  });
  while (clock.step()) {}

  for (const id of workerIds) {
    const counts = route.fleet.eventCounts(id)!;
    routerEvents.stored += counts.stored;
    routerEvents.removed += counts.removed;
    routerEvents.skippedStores += counts.skippedStores;
    routerEvents.blockSizeMismatches += counts.blockSizeMismatches;
  }
  const stats = engines.map((e) => e.stats());
  const speeds = workerIds.map((id) => route.fleet.learnedSpeed({ id, rank: 0 }));
  for (const e of engines) e.close();
  disagg?.close();
  route.close();
  if (finished !== total) throw new Error(`replay stalled: ${total - finished} of ${total} requests never finished`);
  return { label: options.label, arrivalSpeedup: options.arrivalSpeedup, workerIds, records, engines: stats, routerEvents, speeds, wallMs: performance.now() - started };
}
