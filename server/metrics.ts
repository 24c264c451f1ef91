// Prometheus metrics (GET /metrics). Per-request instruments are updated on
// the request path; everything the router already keeps (queues, ledger load,
// KV-event counters, index size) is read from it at scrape time, so it costs
// nothing per request and is never stale.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { shardsFor } from '../bindings/prefix-index-sharded.js';
import type { EventCounts } from '../router/model-fleet.js';
import type { BodyParser } from './request/body-parser.js';
import { CounterFamily, HistogramFamily, type CounterSeries, type HistogramSeries } from './request-instruments.js';
import { registerRouteMetrics } from './route-metrics.js';
import type { KvSourceCounters } from './workers/kv-sources.js';
import type { WorkerHealth } from './workers/ejection-view.js';
import { EJECTION_REASONS, type EjectionReason, type WorkerHealthView } from './workers/outliers.js';
import type { WorkerHandle } from './workers/registry.js';
import type { ModelRuntime } from './workers/model-runtime.js';

export interface MetricsSource {
  models(): Iterable<ModelRuntime>;
  workers(): Iterable<WorkerHandle>;
  /** The parser of request bodies, with what it reused and keeps. */
  bodies(): Pick<BodyParser, 'reuse' | 'keptBytes'>;
}

/** How a request ended, as counted in kvrouter_requests_total. */
export type Outcome = 'success' | 'error' | 'interrupted' | 'aborted' | 'rejected';

/** Metric type labels of the model fleet's per-worker event counts. */
const INDEX_EVENTS: readonly [string, keyof EventCounts][] = [
  ['stored', 'stored'],
  ['removed', 'removed'],
  ['cleared', 'cleared'],
  ['skipped_store', 'skippedStores'],
  ['block_size_mismatch', 'blockSizeMismatches'],
  ['other_medium', 'otherMedium'],
  ['other_group', 'otherGroups'],
  ['placeholder_store', 'placeholderStores'],
  ['stale', 'stale'],
];

/** Metric type labels of a KV source's stream counters. */
const STREAM_EVENTS: readonly [string, keyof KvSourceCounters][] = [
  ['gap', 'gaps'],
  ['restart', 'restarts'],
  ['replay_request', 'replayRequests'],
  ['replayed_batch', 'replayedBatches'],
  ['replay_failure', 'replayFailures'],
  ['held_dropped', 'heldDropped'],
  ['decode_error', 'decodeErrors'],
  ['skipped_message', 'skippedMessages'],
  ['index_failure', 'indexFailures'],
  ['resync', 'resyncs'],
  ['retired_dropped', 'retiredDropped'],
];

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const DECISION_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

/** Per-model series, resolved once per model. */
export interface ModelInstruments {
  ttft: HistogramSeries;
  latency: HistogramSeries;
  decision: HistogramSeries;
  queueWait: HistogramSeries;
  promptTokens: CounterSeries;
  cachedTokens: CounterSeries;
}

export class RouterMetrics {
  readonly registry = new Registry();
  private readonly requests: CounterFamily;
  private readonly rejections: CounterFamily;
  private readonly retries: CounterFamily;
  private readonly ttft: HistogramFamily;
  private readonly latency: HistogramFamily;
  private readonly decision: HistogramFamily;
  private readonly queueWait: HistogramFamily;
  private readonly routedPrompt: CounterFamily;
  private readonly routedCached: CounterFamily;
  private readonly instruments = new Map<string, ModelInstruments>();

  constructor(source: MetricsSource) {
    const registers = [this.registry];
    const r = this.registry;
    collectDefaultMetrics({ register: r, prefix: 'kvrouter_process_' });
    this.requests = new CounterFamily(
      'kvrouter_requests_total',
      'Requests that ended, by model, worker (empty when none was chosen), HTTP status sent and outcome',
      ['model', 'worker', 'code', 'outcome'],
      r,
    );
    this.rejections = new CounterFamily('kvrouter_rejections_total', 'Requests the router refused, by error code', ['model', 'code'], r);
    this.retries = new CounterFamily('kvrouter_upstream_retries_total', 'Requests re-placed after a worker failed before the first byte, by the worker that failed', ['model', 'worker'], r);
    this.ttft = new HistogramFamily('kvrouter_time_to_first_token_seconds', 'Arrival to the first response byte from the worker', 'model', LATENCY_BUCKETS, r);
    this.latency = new HistogramFamily('kvrouter_request_duration_seconds', 'Arrival to the end of the response', 'model', LATENCY_BUCKETS, r);
    this.decision = new HistogramFamily(
      'kvrouter_routing_decision_seconds',
      'Router overhead before a request leaves or queues: body parse, tokenization, hashing, admission and selection',
      'model',
      DECISION_BUCKETS,
      r,
    );
    this.queueWait = new HistogramFamily('kvrouter_queue_wait_seconds', 'Time from admission to dispatch (0 when not queued)', 'model', LATENCY_BUCKETS, r);
    this.routedPrompt = new CounterFamily('kvrouter_routed_prompt_tokens_total', 'Prompt tokens of dispatched requests', ['model'], r);
    this.routedCached = new CounterFamily('kvrouter_routed_cached_tokens_total', 'Prompt tokens the chosen worker was expected to hold in its KV cache', ['model'], r);
    this.scrapeTimeMetrics(source, registers);
    registerRouteMetrics(source, registers);
    const reuse = (name: string, help: string, read: (r: BodyParser['reuse']) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(read(source.bodies().reuse));
        },
      });
    reuse('kvrouter_request_bodies_reused_total', 'Request bodies parsed from the kept parse of an earlier turn of their conversation (only the rest was parsed)', (r) => r.bodies);
    reuse('kvrouter_request_body_reused_bytes_total', 'Bytes of request bodies taken from the kept parse of an earlier turn instead of parsed again', (r) => r.bytes);
    new Gauge({
      name: 'kvrouter_request_body_kept_bytes',
      help: 'Bytes of chat bodies kept for the next turn of their conversation (at most limits.body_reuse_bytes)',
      registers,
      collect() {
        this.set(source.bodies().keptBytes);
      },
    });
  }

  forModel(model: string): ModelInstruments {
    let found = this.instruments.get(model);
    if (!found) {
      found = {
        ttft: this.ttft.child(model),
        latency: this.latency.child(model),
        decision: this.decision.child(model),
        queueWait: this.queueWait.child(model),
        promptTokens: this.routedPrompt.child(model),
        cachedTokens: this.routedCached.child(model),
      };
      this.instruments.set(model, found);
    }
    return found;
  }

  ended(model: string, worker: string, code: number, outcome: Outcome): void {
    this.requests.child(model, worker, String(code), outcome).inc();
  }

  rejected(model: string, code: string): void {
    this.rejections.child(model, code).inc();
  }

  retried(model: string, worker: string): void {
    this.retries.child(model, worker).inc();
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private scrapeTimeMetrics(source: MetricsSource, registers: Registry[]): void {
    const instruments = this.instruments;
    new Gauge({
      name: 'kvrouter_cache_hit_ratio',
      help: 'Cached / prompt tokens over all dispatched requests since start',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const [model, m] of instruments) if (m.promptTokens.value > 0) this.labels(model).set(m.cachedTokens.value / m.promptTokens.value);
      },
    });
    new Gauge({
      name: 'kvrouter_queue_depth',
      help: 'Requests waiting in the admission queue, by policy class',
      labelNames: ['model', 'policy_class'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) {
          for (const [cls, q] of Object.entries(m.route.scheduler.stats().queued)) this.labels(m.name, cls).set(q.requests);
        }
      },
    });
    new Gauge({
      name: 'kvrouter_requests_in_flight',
      help: 'Requests dispatched to a worker and not yet settled',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) this.labels(m.name).set(m.route.scheduler.stats().inFlight);
      },
    });
    new Gauge({
      name: 'kvrouter_worker_load',
      help: "The router's ledger per worker rank: prefill tokens not yet computed, decode blocks held, active requests",
      labelNames: ['model', 'worker', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) {
          for (const w of m.route.fleet.load()) {
            this.labels(m.name, w.worker, 'prefill_tokens').set(w.prefillTokens);
            this.labels(m.name, w.worker, 'decode_blocks').set(w.decodeBlocks);
            this.labels(m.name, w.worker, 'active_requests').set(w.activeRequests);
          }
        }
      },
    });
    new Gauge({
      name: 'kvrouter_worker_speed',
      help: "What the router learned of each worker rank's prefill speed from observed times to first token: tokens_per_second, base_ms (the fixed part of a time to first token), factor (its times over the fleet's), speed_class, observations",
      labelNames: ['model', 'worker', 'figure'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) {
          for (const w of m.route.fleet.learnedSpeeds().workers) {
            this.labels(m.name, w.worker, 'tokens_per_second').set(w.tokensPerSecond);
            this.labels(m.name, w.worker, 'base_ms').set(w.baseMs);
            this.labels(m.name, w.worker, 'factor').set(w.factor);
            this.labels(m.name, w.worker, 'speed_class').set(w.speedClass);
            this.labels(m.name, w.worker, 'observations').set(w.observations);
          }
        }
      },
    });
    new Counter({
      name: 'kvrouter_kv_events_total',
      help: `KV events per worker: applied by type (${INDEX_EVENTS.map(([t]) => t).join(', ')}) and stream events (${STREAM_EVENTS.map(([t]) => t).join(', ')})`,
      labelNames: ['model', 'worker', 'type'],
      registers,
      collect() {
        this.reset();
        for (const w of source.workers()) {
          const applied = w.model.route.fleet.eventCounts(w.id);
          const stream = w.kv?.counters();
          for (const [type, key] of INDEX_EVENTS) if (applied && applied[key] > 0) this.labels(w.model.name, w.id, type).inc(applied[key]);
          for (const [type, key] of STREAM_EVENTS) if (stream && stream[key] > 0) this.labels(w.model.name, w.id, type).inc(stream[key]);
        }
      },
    });
    new Gauge({
      name: 'kvrouter_kv_source_connected',
      help: "1 when the worker's KV-event source is connected (ZeroMQ) or ready (HTTP)",
      labelNames: ['model', 'worker', 'source'],
      registers,
      collect() {
        this.reset();
        for (const w of source.workers()) if (w.kv) this.labels(w.model.name, w.id, w.kv.kind).set(w.kv.connected() ? 1 : 0);
      },
    });
    new Gauge({
      name: 'kvrouter_worker_ejected',
      help: '1 while the worker is ejected (out of selection after failing, until a health probe passes), else 0',
      labelNames: ['model', 'worker', 'reason'],
      registers,
      collect() {
        this.reset();
        for (const w of source.workers()) {
          const ejection = w.health().ejection;
          this.labels(w.model.name, w.id, ejection?.reason ?? '').set(ejection ? 1 : 0);
        }
      },
    });
    const byReason = (name: string, help: string, counts: (h: WorkerHealthView) => Record<EjectionReason, number>) =>
      new Counter({
        name,
        help,
        labelNames: ['model', 'worker', 'reason'],
        registers,
        collect() {
          this.reset();
          for (const w of source.workers()) {
            const n = counts(w.health());
            for (const reason of EJECTION_REASONS) if (n[reason] > 0) this.labels(w.model.name, w.id, reason).inc(n[reason]);
          }
        },
      });
    byReason('kvrouter_worker_ejections_total', `Times a worker was ejected, by what tripped it (${EJECTION_REASONS.join(', ')})`, (h) => h.ejections);
    byReason(
      'kvrouter_worker_ejections_held_total',
      'Failures past the ejection threshold that left the worker in rotation, because its model would keep too few workers (max_ejection_percent, never the last)',
      (h) => h.held,
    );
    const byProbeResult = (name: string, help: string, probes: (h: WorkerHealth) => { healthy: number; unhealthy: number }) =>
      new Counter({
        name,
        help,
        labelNames: ['model', 'worker', 'result'],
        registers,
        collect() {
          this.reset();
          for (const w of source.workers()) {
            const n = probes(w.health());
            if (n.healthy > 0) this.labels(w.model.name, w.id, 'healthy').inc(n.healthy);
            if (n.unhealthy > 0) this.labels(w.model.name, w.id, 'unhealthy').inc(n.unhealthy);
          }
        },
      });
    byProbeResult('kvrouter_worker_health_probes_total', 'Health probes of ejected workers, by result (healthy readmits the worker)', (h) => h.probes);
    byProbeResult(
      'kvrouter_worker_stall_probes_total',
      'Health probes of workers with requests waiting and no response progress for stall_ms, by result (unhealthy ejects the worker, reason stall)',
      (h) => h.stall.probes,
    );
    new Counter({
      name: 'kvrouter_worker_stall_aborts_total',
      help: 'Requests in flight on a worker ejected as stalled that the router aborted there (placed again when nothing had reached the client, else ended with an error event)',
      labelNames: ['model', 'worker'],
      registers,
      collect() {
        this.reset();
        for (const w of source.workers()) {
          const { aborted } = w.health().stall;
          if (aborted > 0) this.labels(w.model.name, w.id).inc(aborted);
        }
      },
    });
    new Gauge({
      name: 'kvrouter_prefix_index',
      help:
        'Prefix index per model: nodes, blocks ((worker, block) pairs), routed_blocks (approximate mode), unknown_parents, unknown_removals, ' +
        'bytes (held by the index), bound_bytes (its memory bound, 0: none), shards (wasm cores it is split over)',
      labelNames: ['model', 'stat'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) {
          const s = m.route.fleet.indexStats();
          this.labels(m.name, 'nodes').set(s.nodes);
          this.labels(m.name, 'blocks').set(s.blocks);
          this.labels(m.name, 'routed_blocks').set(s.routedBlocks);
          this.labels(m.name, 'unknown_parents').set(s.unknownParents);
          this.labels(m.name, 'unknown_removals').set(s.unknownRemovals);
          this.labels(m.name, 'bytes').set(s.indexBytes);
          this.labels(m.name, 'bound_bytes').set(m.config.indexMemoryBytes);
          this.labels(m.name, 'shards').set(shardsFor(m.config.indexMemoryBytes));
        }
      },
    });
    new Counter({
      name: 'kvrouter_prefix_index_evicted_blocks_total',
      help: "(worker, block) ids the model's prefix index forgot at its memory bound (the coldest first)",
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) this.labels(m.name).inc(m.route.fleet.indexStats().evictedBlocks);
      },
    });
    new Counter({
      name: 'kvrouter_prefix_index_failures_total',
      help: 'Index updates that could not complete for want of memory (or a core trap); their workers were cleared and their streams marked stale',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) this.labels(m.name).inc(m.route.fleet.indexStats().allocationFailures);
      },
    });
    new Gauge({
      name: 'kvrouter_core_live_bytes',
      help: "Bytes allocated in the model's wasm core (index, ledger, selector)",
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const m of source.models()) this.labels(m.name).set(m.route.fleet.core?.liveBytes ?? 0);
      },
    });
  }
}
