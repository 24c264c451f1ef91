// The router diagnosing itself: per worker rank, what its KV events and its
// traffic say (rank-watch.ts), the verdict and causes with their fixes, hit
// rates predicted and reported, and recent latencies for the dashboard. Fed
// by two taps: every KV batch a model's route applies, and every request the
// router dispatches (with its relayed response). A cause is logged once per
// rank the first time it holds; its gauge shows while it does.
import { Core } from '../../bindings/core.js';
import { BlockHasher, DEFAULT_SEED, seedFor } from '../../bindings/block-hasher.js';
import { workerLabel, type WorkerKey } from '../../bindings/workers.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import type { RequestFields, RoutedRequest } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import type { KvSourceCounters } from '../workers/kv-sources.js';
import type { ModelRuntime } from '../workers/model-runtime.js';
import type { WorkerHandle } from '../workers/registry.js';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { DiagnosticsConfig } from './config.js';
import { CAUSES, VERDICT_ORDER, type Cause, type Verdict } from './causes.js';
import { HitAccounting, ratesOf, type HitRates } from './hit-rates.js';
import { RankWatch, verdictOf, type CauseFinding } from './rank-watch.js';
import { RecentSamples, type Percentiles } from './recent.js';
import { ResponseTap, type TapSink } from './response-tap.js';
import type { ReportedUsage } from './usage-tail.js';

export interface DiagnosticsSource {
  models(): Iterable<ModelRuntime>;
  workers(): Iterable<WorkerHandle>;
  worker(id: string): WorkerHandle | undefined;
}

export interface RankDiagnosis {
  model: string;
  worker: string;
  id: string;
  rank: number;
  verdict: Verdict;
  causes: { cause: Cause; verdict: Verdict; title: string; detail: string; fix: string }[];
  kv_source: string;
  kv_connected: boolean | null;
  events: { batches: number; stored: number; removed: number; cleared: number };
  last_event_age_s: number | null;
  /** Stream counters of this rank (gaps, restarts, decode errors, ...). */
  stream: KvSourceCounters | null;
  blocks_held: number;
  requests_sent: number;
  hit_rate: { predicted: HitRates; reported: HitRates };
  cached_tokens_samples: number;
  /** Whether a block the engine stored reproduced a prompt routed to it (pending: not yet seen either way). */
  tokenizer_check: 'reproduced' | 'pending' | 'differs';
}

export interface DiagnosisReport {
  silent_after_ms: number;
  summary: Record<Verdict, number>;
  /** Worst first. */
  workers: RankDiagnosis[];
}

/** How often verdicts are evaluated for the log (the endpoint evaluates when asked). */
const LOG_TICK_MS = 1000;
const LATENCY_WINDOW_MS = 5 * 60_000;
const MAX_LATENCY_SAMPLES = 50_000;

interface ModelRecent {
  ttft: RecentSamples;
  itl: RecentSamples;
  decisions: RecentSamples;
}

export class Diagnostics implements TapSink {
  readonly hits = new HitAccounting();
  /** model -> worker label -> watch */
  private readonly watches = new Map<string, Map<string, RankWatch>>();
  private readonly recent = new Map<string, ModelRecent>();
  private readonly logged = new Set<string>();
  private readonly hasher = new BlockHasher({ core: new Core() });
  private readonly seeds = new Map<string, bigint>();
  private readonly models = new Map<string, ModelRuntime>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly source: DiagnosticsSource,
    readonly config: DiagnosticsConfig,
    private readonly warn: (message: string) => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.timer = setInterval(() => this.logNewCauses(), Math.min(LOG_TICK_MS, config.silentAfterMs));
    this.timer.unref();
  }

  /** Taps a model's KV events; call before its workers start their sources. */
  attach(model: ModelRuntime): void {
    this.models.set(model.name, model);
    model.route.observeEvents({
      batch: (key, batch) => this.onBatch(model, key, batch),
      stale: (key) => this.watch(model, key)?.stale(this.now()),
    });
  }

  /** KV events posted for a rank the worker does not have (refused): counted on its rank 0. */
  refusedRank(model: ModelRuntime, id: string, rank: number): void {
    this.watch(model, { id, rank: 0 })?.foreign(rank, this.now());
  }

  /** A request was dispatched; the tap follows its response (relay chunks to it, end it when the response ends whole). */
  dispatched(model: ModelRuntime, admission: Admission, promptTokens: number, arrivedAt: number): ResponseTap {
    const now = this.now();
    const label = workerLabel(admission.worker);
    this.watch(model, admission.worker)?.sent(now);
    this.hits.record(model.name, label, 'predicted', promptTokens, admission.cachedTokens);
    this.recentOf(model.name).decisions.add(now, 1);
    return new ResponseTap(this, model.name, admission.worker, admission.cachedTokens, promptTokens, arrivedAt);
  }

  prompt(tap: ResponseTap, request: RoutedRequest, fields: RequestFields): void {
    // A salted prompt's blocks are hashed with the salt, which the engine's events do not carry.
    if (fields.cacheSalt) return;
    const model = this.models.get(tap.model);
    if (model) this.watch(model, tap.worker)?.digest.routed(request.localHashes);
  }

  firstByte(model: string, seconds: number, now: number): void {
    this.recentOf(model).ttft.add(now, seconds);
  }

  interToken(model: string, seconds: number, now: number): void {
    this.recentOf(model).itl.add(now, seconds);
  }

  usage(tap: ResponseTap, usage: ReportedUsage): void {
    if (usage.cachedTokens === null) return;
    const prompt = usage.promptTokens ?? tap.promptTokens;
    this.hits.record(tap.model, workerLabel(tap.worker), 'reported', prompt, usage.cachedTokens);
    const model = this.models.get(tap.model);
    if (model) this.watch(model, tap.worker)?.cached.add(tap.predictedTokens, usage.cachedTokens, prompt);
  }

  /** TTFT and inter-token latency percentiles (seconds) and decisions per second, over the last minutes. */
  latency(model: string): { ttft: Percentiles; itl: Percentiles; decisionsPerSecond: number } {
    const r = this.recentOf(model);
    const now = this.now();
    return { ttft: r.ttft.percentiles(now), itl: r.itl.percentiles(now), decisionsPerSecond: r.decisions.countSince(now, 10_000) / 10 };
  }

  /** Every registered worker rank's diagnosis, worst first. */
  report(): DiagnosisReport {
    // Whatever the report shows as a new cause is logged by then, as the timer would.
    this.logNewCauses();
    const now = this.now();
    const workers: RankDiagnosis[] = [];
    for (const handle of this.source.workers()) {
      for (let rank = 0; rank < handle.config.dataParallelSize; rank++) workers.push(this.diagnose(handle, rank, now));
    }
    workers.sort((a, b) => VERDICT_ORDER.indexOf(a.verdict) - VERDICT_ORDER.indexOf(b.verdict) || a.worker.localeCompare(b.worker));
    const summary: Record<Verdict, number> = { mismatch: 0, silent: 0, stale: 0, ok: 0 };
    for (const w of workers) summary[w.verdict]++;
    return { silent_after_ms: this.config.silentAfterMs, summary, workers };
  }

  close(): void {
    clearInterval(this.timer);
  }

  registerMetrics(registry: Registry): void {
    const registers = [registry];
    const findings = () => this.findings();
    this.hits.registerMetrics(registers);
    new Gauge({
      name: 'kvrouter_worker_diagnosis',
      help: `1 for the worker rank's current verdict (${VERDICT_ORDER.join(', ')}); GET /router/diagnose says why`,
      labelNames: ['model', 'worker', 'verdict'],
      registers,
      collect() {
        this.reset();
        for (const r of findings()) this.labels(r.model, r.worker, verdictOf(r.findings)).set(1);
      },
    });
    new Gauge({
      name: 'kvrouter_worker_diagnosis_cause',
      help: `1 while a cause holds for the worker rank (${Object.keys(CAUSES).join(', ')})`,
      labelNames: ['model', 'worker', 'cause'],
      registers,
      collect() {
        this.reset();
        for (const r of findings()) for (const f of r.findings) this.labels(r.model, r.worker, f.cause).set(1);
      },
    });
    new Counter({
      name: 'kvrouter_diagnosis_evidence_total',
      help:
        'What the mismatch causes are judged on, per worker rank: block_size (stored events of another block size), unknown_rank (batches stamped another dp_rank), ' +
        "tokenizer (stored events that reproduced no routed prompt, before one did), cached_tokens (responses whose cached_tokens disagreed with the predicted overlap)",
      labelNames: ['model', 'worker', 'cause'],
      registers,
      collect() {
        this.reset();
        for (const { model, worker, watch } of findings()) {
          const counts: [Cause, number][] = [
            ['block_size', watch.blockSizeMismatches],
            ['unknown_rank', watch.foreignBatches],
            ['tokenizer', watch.digest.evidence.unmatchedStores],
            ['cached_tokens', watch.cached.disagreements],
          ];
          for (const [cause, n] of counts) if (n > 0) this.labels(model, worker, cause).inc(n);
        }
      },
    });
    new Gauge({
      name: 'kvrouter_worker_kv_blocks',
      help: "Device KV blocks each worker rank holds, as its engine's stored, removed and cleared events tell",
      labelNames: ['model', 'worker'],
      registers,
      collect() {
        this.reset();
        for (const { model, worker, watch } of findings()) this.labels(model, worker).set(watch.blocksHeld);
      },
    });
    const now = this.now;
    new Gauge({
      name: 'kvrouter_kv_last_event_age_seconds',
      help: 'Seconds since the worker rank last published a KV event batch (absent: none yet)',
      labelNames: ['model', 'worker'],
      registers,
      collect() {
        this.reset();
        const t = now();
        for (const { model, worker, watch } of findings()) if (watch.lastEventAt !== null) this.labels(model, worker).set((t - watch.lastEventAt) / 1000);
      },
    });
  }

  /** The watch of a registered worker rank (created on first use); undefined for a worker or rank the registry does not have. */
  private watch(model: ModelRuntime, key: WorkerKey): RankWatch | undefined {
    let byLabel = this.watches.get(model.name);
    if (!byLabel) this.watches.set(model.name, (byLabel = new Map()));
    const label = workerLabel(key);
    let watch = byLabel.get(label);
    if (watch) return watch;
    const handle = this.source.worker(key.id);
    if (!handle || handle.model !== model || key.rank >= handle.config.dataParallelSize) return undefined;
    watch = new RankWatch(key.id, key.rank, handle.config.dataParallelSize, handle.config.kvEvents.source !== 'none', {
      blockSize: model.config.blockSize,
      silentAfterMs: this.config.silentAfterMs,
      cachedTokensTolerance: this.config.cachedTokensTolerance,
    });
    byLabel.set(label, watch);
    return watch;
  }

  /** Each rank's findings now, for metrics and the log. */
  private *findings(): Generator<{ model: string; worker: string; findings: CauseFinding[]; watch: RankWatch }> {
    const now = this.now();
    for (const [model, byLabel] of this.watches) for (const [worker, watch] of byLabel) yield { model, worker, findings: watch.findings(now), watch };
  }

  private diagnose(handle: WorkerHandle, rank: number, now: number): RankDiagnosis {
    const key = { id: handle.id, rank };
    const watch = this.watch(handle.model, key)!;
    const findings = watch.findings(now);
    const hits = this.hits.of(handle.model.name, workerLabel(key));
    return {
      model: handle.model.name,
      worker: workerLabel(key),
      id: handle.id,
      rank,
      verdict: verdictOf(findings),
      causes: findings.map((f) => ({ cause: f.cause, verdict: CAUSES[f.cause].verdict, title: CAUSES[f.cause].title, detail: f.detail, fix: CAUSES[f.cause].fix })),
      kv_source: handle.config.kvEvents.source,
      kv_connected: handle.kv ? handle.kv.connected() : null,
      events: { batches: watch.batches, ...watch.events },
      last_event_age_s: watch.lastEventAt === null ? null : (now - watch.lastEventAt) / 1000,
      stream: handle.kv ? handle.kv.rankCounters(rank) : null,
      blocks_held: watch.blocksHeld,
      requests_sent: watch.requestsSent,
      hit_rate: { predicted: ratesOf(hits.predicted), reported: ratesOf(hits.reported) },
      cached_tokens_samples: watch.cached.samples,
      tokenizer_check: watch.digest.confirmed ? 'reproduced' : watch.digest.differs ? 'differs' : 'pending',
    };
  }

  private onBatch(model: ModelRuntime, key: WorkerKey, batch: KvEventBatch): void {
    const watch = this.watch(model, key);
    if (!watch) return;
    watch.batch(batch, this.now(), (tokens, lora) => this.hasher.localHashes(tokens, model.config.blockSize, this.seedOf(lora)));
  }

  /** The seed the model fleet hashes a stored event with (its LoRA adapter, no salt). */
  private seedOf(lora: string | null): bigint {
    if (!lora) return DEFAULT_SEED;
    let seed = this.seeds.get(lora);
    if (seed === undefined) {
      seed = seedFor({ lora });
      if (this.seeds.size >= 1024) this.seeds.clear();
      this.seeds.set(lora, seed);
    }
    return seed;
  }

  private recentOf(model: string): ModelRecent {
    let r = this.recent.get(model);
    if (!r) {
      r = {
        ttft: new RecentSamples(LATENCY_WINDOW_MS, MAX_LATENCY_SAMPLES),
        itl: new RecentSamples(LATENCY_WINDOW_MS, MAX_LATENCY_SAMPLES),
        decisions: new RecentSamples(LATENCY_WINDOW_MS, MAX_LATENCY_SAMPLES),
      };
      this.recent.set(model, r);
    }
    return r;
  }

  /** Forgets the watches and hit totals of workers no longer registered. */
  private prune(): void {
    const live = new Set<string>();
    for (const h of this.source.workers()) live.add(`${h.model.name}\u0000${h.id}`);
    for (const [model, byLabel] of this.watches) {
      for (const [label, watch] of byLabel) {
        if (!live.has(`${model}\u0000${watch.id}`)) {
          byLabel.delete(label);
          this.hits.drop(model, label);
        }
      }
    }
  }

  private logNewCauses(): void {
    this.prune();
    for (const { model, worker, findings } of this.findings()) {
      for (const f of findings) {
        const key = `${model}\u0000${worker}\u0000${f.cause}`;
        if (this.logged.has(key)) continue;
        this.logged.add(key);
        const info = CAUSES[f.cause];
        this.warn(`diagnose: worker ${worker} (model ${model}) is ${info.verdict}: ${info.title}: ${f.detail}. Fix: ${info.fix}`);
      }
    }
  }
}
