// Everything a running router holds: its config, one ModelRuntime per model,
// the worker registry (pools and KV sources), metrics, and the exchanges in
// flight. The HTTP app is built on top of it; tests and the CLI create it
// through createRuntime and end it with close().
import type { RouterConfig } from './config/schema.js';
import { Diagnostics } from './diagnostics/diagnostics.js';
import { RouterMetrics } from './metrics.js';
import { Replication } from './nats/replication.js';
import { BodyParser } from './request/body-parser.js';
import type { Exchange, ExchangeContext } from './upstream/exchange.js';
import type { Logger } from './workers/kv-sources.js';
import { createModelRuntime, ModelRuntime, type TokenizerCache } from './workers/model-runtime.js';
import { WorkerRegistry } from './workers/registry.js';

export class RouterRuntime implements ExchangeContext {
  readonly metrics: RouterMetrics;
  readonly live = new Set<Exchange>();
  /** Request bodies to JSON, reusing the parse of a conversation's earlier turns. */
  readonly bodies: BodyParser;
  readonly limits: RouterConfig['limits'];
  /** Each LoRA adapter's base model, by the adapter's name (what clients send as `model`); grows as engines list new ones. */
  readonly adapters: ReadonlyMap<string, ModelRuntime>;
  private serial = 0;
  private readonly idPrefix = `kvr-${process.pid.toString(36)}-${Date.now().toString(36)}-`;
  shuttingDown = false;

  constructor(
    readonly config: RouterConfig,
    readonly models: ReadonlyMap<string, ModelRuntime>,
    readonly registry: WorkerRegistry,
    /** State shared with other replicas over NATS; null for a router on its own. */
    readonly replication: Replication | null = null,
    /** Per worker rank verdicts, hit rates and recent latencies; null: not kept. */
    readonly diagnostics: Diagnostics | null = null,
  ) {
    this.limits = config.limits;
    this.bodies = new BodyParser(config.limits.bodyReuseBytes);
    this.metrics = new RouterMetrics({ models: () => this.models.values(), workers: () => this.registry.list(), bodies: () => this.bodies });
    this.adapters = registry.adapters;
    replication?.registerMetrics(this.metrics.registry);
    diagnostics?.registerMetrics(this.metrics.registry);
  }

  /** A request id unique in this process and across restarts. */
  nextRequestId(): string {
    return this.idPrefix + (++this.serial).toString(36);
  }

  /** Stops the schedulers, event sources and pools. Exchanges still live are ended first. */
  async close(): Promise<void> {
    for (const exchange of [...this.live]) exchange.shutDown();
    await this.replication?.close();
    for (const model of this.models.values()) model.close();
    this.diagnostics?.close();
    await this.registry.close();
  }
}

/** Loads every model's tokenizer, then registers the configured workers. */
export async function createRuntime(config: RouterConfig, warn: Logger, tokenizers: TokenizerCache = new Map()): Promise<RouterRuntime> {
  const models = new Map<string, ModelRuntime>();
  for (const model of config.models) {
    const runtime = await createModelRuntime(model, tokenizers);
    runtime.route.configureSweep(config.limits.ledgerSweepIntervalMs, config.limits.ledgerSweepAgeMs);
    models.set(model.name, runtime);
  }
  const replication = config.nats ? new Replication(config.nats, models, warn) : null;
  // Attached before any worker starts its event source, so no batch goes unseen.
  const diagnostics = new Diagnostics({ models: () => models.values(), workers: () => registry.list(), worker: (id) => registry.get(id) }, config.diagnostics, warn);
  for (const model of models.values()) diagnostics.attach(model);
  const registry = new WorkerRegistry(models, config.limits, config.outlierEjection, warn, replication && ((w, route, log) => replication.kvSource(w, route, log)));
  try {
    for (const worker of config.workers) registry.add(worker);
  } catch (error) {
    await registry.close();
    await replication?.close();
    for (const m of models.values()) m.close();
    diagnostics.close();
    throw error;
  }
  replication?.start();
  return new RouterRuntime(config, models, registry, replication, diagnostics);
}
