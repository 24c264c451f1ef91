// The workers the router sends to: for each, its config, its model's route,
// a keep-alive connection pool, and its KV-event source; the outlier
// detector that takes failing ones out of selection, and the stall watch that
// finds the ones that stopped answering. Workers come from the
// config file and the admin API; removing one stops its event source at once
// and closes its pool once the requests in flight on it have finished.
import { Pool, type Dispatcher } from 'undici';
import { RealClock } from '../../router/clock.js';
import { roleTaints } from '../../router/disagg/roles.js';
import { RouterError } from '../../router/errors.js';
import type { LimitsConfig, OutlierEjectionConfig, WorkerConfig } from '../config/schema.js';
import { startKvSource, type KvSource, type Logger, type NatsKvSourceFactory } from './kv-sources.js';
import type { ModelRuntime } from './model-runtime.js';
import type { WorkerHealth } from './ejection-view.js';
import { OutlierDetector } from './outliers.js';
import { StallWatch } from './stall-watch.js';
import { adapterTaints } from './adapters.js';
import { AdapterPoller } from './adapter-poll.js';

export class WorkerHandle {
  readonly pool: Pool;
  /** Path prefix of the worker's base URL ("" at the server root). */
  readonly basePath: string;
  /** The adapters of its model it has loaded: from the config, then from the engine's /v1/models when the model polls it. */
  loadedAdapters: readonly string[];
  /** Asks the engine which adapters it has loaded; null when its model does not poll. */
  adapterPoller: AdapterPoller | null = null;

  constructor(
    readonly config: WorkerConfig,
    readonly model: ModelRuntime,
    readonly kv: KvSource | null,
    limits: LimitsConfig,
    private readonly outliers: OutlierDetector,
    private readonly stalls: StallWatch,
  ) {
    const url = new URL(config.url);
    this.basePath = url.pathname === '/' ? '' : url.pathname;
    this.loadedAdapters = config.adapters;
    this.pool = new Pool(url.origin, {
      connectTimeout: limits.connectTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      bodyTimeout: limits.bodyTimeoutMs,
      keepAliveTimeout: 60_000,
    });
  }

  get id(): string {
    return this.config.id;
  }

  get draining(): boolean {
    return this.model.route.fleet.isDraining(this.config.id);
  }

  /** Failure streaks, ejection and probe counts (outliers.ts), attempts in flight and quiet time (stall-watch.ts). */
  health(): WorkerHealth {
    return { ...this.outliers.view(this.config.id)!, stall: this.stalls.view(this.config.id) };
  }

  /** Sends one request on the worker's pool, watched for a stall. */
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): void {
    const watched = this.stalls.watch(this.config.id, handler);
    try {
      this.pool.dispatch(options, watched);
    } catch (error) {
      this.stalls.forget(this.config.id, watched);
      throw error;
    }
  }

  /** GETs a path of the engine's API; the whole exchange, connect included, within the timeout. */
  private get(path: string, timeoutMs: number): Promise<Dispatcher.ResponseData> {
    const apiKey = this.config.apiKey;
    return this.pool.request({
      path: this.basePath + path,
      method: 'GET',
      headers: apiKey === null ? {} : { authorization: `Bearer ${apiKey}` },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // Bounds the connect too, which the pool allows connect_timeout_ms.
      signal: AbortSignal.timeout(timeoutMs),
    });
  }

  /** GETs the engine's health endpoint: healthy on a 2xx answer within the timeout. */
  async probe(path: string, timeoutMs: number): Promise<boolean> {
    try {
      const answer = await this.get(path, timeoutMs);
      await answer.body.dump();
      return answer.statusCode >= 200 && answer.statusCode < 300;
    } catch {
      return false;
    }
  }

  /** The JSON a GET of an engine path answers with 200 within the timeout; null for any other outcome. */
  async getJson(path: string, timeoutMs: number): Promise<unknown> {
    try {
      const answer = await this.get(path, timeoutMs);
      if (answer.statusCode === 200) return await answer.body.json();
      await answer.body.dump();
    } catch {
      // Unreachable, timed out or not JSON.
    }
    return null;
  }
}

export class WorkerRegistry {
  private readonly workers = new Map<string, WorkerHandle>();
  readonly outliers: OutlierDetector;
  private readonly stalls: StallWatch;
  /**
   * Each LoRA adapter's base model, by the adapter's name (what clients send
   * as `model`): the configured adapters, and those the engines list.
   */
  readonly adapters: Map<string, ModelRuntime>;

  constructor(
    readonly models: ReadonlyMap<string, ModelRuntime>,
    private readonly limits: LimitsConfig,
    outlierEjection: OutlierEjectionConfig,
    private readonly warn: Logger,
    /** KV sources for workers whose events come over NATS; null without a NATS config. */
    private readonly natsSources: NatsKvSourceFactory | null = null,
  ) {
    this.adapters = new Map([...models.values()].flatMap((m) => m.config.adapters.map((name) => [name, m] as const)));
    const clock = new RealClock();
    const probe = (id: string, timeoutMs: number) => this.workers.get(id)?.probe(outlierEjection.probePath, timeoutMs) ?? Promise.resolve(false);
    this.outliers = new OutlierDetector(outlierEjection, clock, {
      setEjected: (id, ejected) => this.workers.get(id)?.model.route.setEjected(id, ejected),
      draining: (id) => this.workers.get(id)?.draining ?? false,
      probe: (id) => probe(id, outlierEjection.probeTimeoutMs),
      log: warn,
    });
    this.stalls = new StallWatch(outlierEjection.stallMs, clock, {
      probe: (id) => probe(id, outlierEjection.stallProbeTimeoutMs),
      ejected: (id) => this.outliers.isEjected(id),
      eject: (id, quietMs, waiting) => this.outliers.stalled(id, { quietMs, waiting }),
      log: warn,
    });
  }

  get(id: string): WorkerHandle | undefined {
    return this.workers.get(id);
  }

  list(): WorkerHandle[] {
    return [...this.workers.values()];
  }

  /** Registers a validated worker with its model and starts its event source. */
  add(config: WorkerConfig): WorkerHandle {
    if (this.workers.has(config.id)) throw new RouterError('KVR_ERR_WORKER_EXISTS', `worker "${config.id}" is already registered`);
    const model = this.models.get(config.model);
    if (!model) throw new RouterError('KVR_ERR_MODEL_NOT_FOUND', `no model "${config.model}" is configured`);
    model.route.addWorker({
      id: config.id,
      dataParallelSize: config.dataParallelSize,
      totalBlocks: config.totalBlocks,
      maxBatchedTokens: config.maxBatchedTokens,
      kvEvents: config.kvEvents.source !== 'none',
      taints: this.taintsOf(config, model, config.adapters),
    });
    let kv: KvSource | null;
    try {
      kv = startKvSource(config, model.route, this.warn, this.natsSources);
    } catch (error) {
      model.route.removeWorker(config.id);
      throw error;
    }
    this.outliers.add(config.id, config.model);
    this.stalls.add(config.id);
    const handle = new WorkerHandle(config, model, kv, this.limits, this.outliers, this.stalls);
    this.workers.set(config.id, handle);
    if (model.config.adaptersPollMs > 0) {
      const ask = (path: string, timeoutMs: number) => handle.getJson(path, timeoutMs);
      handle.adapterPoller = new AdapterPoller(ask, model.name, model.config.adaptersPollMs, (names) => this.learnAdapters(handle, names));
      handle.adapterPoller.start();
    }
    return handle;
  }

  /** Adapters and, in a disaggregated model, roles reach selection as taints of the router's own. */
  private taintsOf(config: WorkerConfig, model: ModelRuntime, loaded: readonly string[]): string[] {
    const adapters = adapterTaints({ adapters: loaded, loadAdapters: config.loadAdapters }, this.adaptersOf(model));
    return [...config.taints, ...adapters, ...(model.disagg ? roleTaints(config.role, model.config.engine) : [])];
  }

  private adaptersOf(model: ModelRuntime): string[] {
    return [...this.adapters].filter(([, base]) => base === model).map(([name]) => name);
  }

  /**
   * What a worker's engine lists as loaded: adapter names no model or other
   * model's adapter has are taken as its model's; the worker's loaded set
   * becomes its model's adapters among them, and the taints follow (every
   * worker of the model's when a new adapter appeared, since workers that
   * load adapters on demand serve it too).
   */
  private learnAdapters(handle: WorkerHandle, names: readonly string[]): void {
    if (this.workers.get(handle.id) !== handle) return;
    const model = handle.model;
    let added = false;
    for (const name of names) {
      if (this.models.has(name) || this.adapters.has(name)) continue;
      this.adapters.set(name, model);
      added = true;
    }
    const loaded = [...new Set(names.filter((name) => this.adapters.get(name) === model))].sort();
    const changed = loaded.join('\n') !== [...handle.loadedAdapters].sort().join('\n');
    handle.loadedAdapters = loaded;
    const affected = added ? this.list().filter((h) => h.model === model) : changed ? [handle] : [];
    for (const h of affected) model.route.setTaints(h.id, this.taintsOf(h.config, model, h.loadedAdapters));
  }

  /** Forgets a worker: no new requests; those in flight finish on its pool, which then closes. */
  async remove(id: string): Promise<void> {
    const handle = this.require(id);
    this.workers.delete(id);
    handle.adapterPoller?.close();
    this.outliers.remove(id);
    this.stalls.remove(id);
    handle.model.route.removeWorker(id);
    await handle.kv?.close();
    void handle.pool.close().catch(() => {});
  }

  setDraining(id: string, draining: boolean): void {
    const handle = this.require(id);
    handle.model.route.setDraining(id, draining);
  }

  /** Closes every event source and pool (requests still running on a pool are cut). */
  async close(): Promise<void> {
    const handles = this.list();
    this.outliers.close();
    this.stalls.close();
    for (const h of handles) h.adapterPoller?.close();
    this.workers.clear();
    await Promise.all(handles.map(async (h) => {
      await h.kv?.close();
      await h.pool.destroy().catch(() => {});
    }));
  }

  private require(id: string): WorkerHandle {
    const handle = this.workers.get(id);
    if (!handle) throw new RouterError('KVR_ERR_WORKER_NOT_FOUND', `no worker "${id}"`);
    return handle;
  }
}
