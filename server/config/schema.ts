// The router's configuration: its shape, defaults and validation. A config is
// one YAML or JSON document; validateConfig turns the parsed document into a
// RouterConfig or throws a ConfigError naming the bad field. Plugins
// (selection policies, request classifiers) are built once here so their
// parameter errors surface at start-up with the field's path.
import { DEFAULT_CLASS } from '../../router/model-router.js';
import { PluginConfigError } from '../../router/plugins/params.js';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';
import type { BusyThresholds, PolicyClass } from '../../router/scheduler/contracts.js';
import { TIKTOKEN_ENCODINGS } from '../../router/tokenize/index.js';
import { createClassifier } from '../../router/plugins/classifiers.js';
import { totalmem } from 'node:os';
import { SHARD_BOUND_BYTES } from '../../bindings/prefix-index-sharded.js';
import { firstCollision, rankSockets, type RankSocket } from '../kv-events/rank-endpoints.js';
import { ConfigError, describe, Fields, join } from './fields.js';
import { DEFAULT_TIER_WEIGHTS, type Tier, type TierWeights } from '../../router/model-fleet/tiers.js';
import type { EngineKind } from '../../router/disagg/roles.js';
import { checkFleetRoles, checkWorkerRole, DISAGG_DEFAULTS, readDisaggregation, readEngine, readWorkerRole, type DisaggregationConfig, type WorkerRoleConfig } from './disaggregation.js';
import { DIAGNOSTICS_DEFAULTS, readDiagnostics, type DiagnosticsConfig } from '../diagnostics/config.js';
import type { ModelMultimodal } from '../request/image-fetch.js';
import { readMultimodal } from './multimodal.js';

export type KvEventsConfig =
  | { source: 'zmq'; endpoint: string; replayEndpoint: string | null; topic: string }
  | { source: 'http' }
  /** Batches a `kvrouter relay` republishes to NATS JetStream (needs `nats`). */
  | { source: 'nats' }
  | { source: 'none' };

export interface WorkerConfig extends WorkerRoleConfig {
  id: string;
  /** Base URL without /v1, e.g. http://10.0.0.5:8000. */
  url: string;
  model: string;
  kvEvents: KvEventsConfig;
  totalBlocks: number;
  maxBatchedTokens: number;
  dataParallelSize: number;
  taints: string[];
  /** Sent as the bearer token to this worker instead of the client's. */
  apiKey: string | null;
  /** The model's LoRA adapters this engine has loaded (vLLM --lora-modules): it serves them, and is preferred for them. */
  adapters: string[];
  /** The engine loads any other adapter of its model on demand: it serves those too, after the workers that have it loaded. */
  loadAdapters: boolean;
}

export interface PluginRef {
  type: string;
  params: Record<string, unknown>;
}

export interface ModelConfig {
  name: string;
  /** LoRA adapters served under their own model names: a request naming one routes in this model's model fleet, hashed under the adapter. */
  adapters: string[];
  /** How often each worker's /v1/models is asked which adapters it has loaded, ms; 0: never (the config says). */
  adaptersPollMs: number;
  tokenizer: string;
  blockSize: number;
  selection: PluginRef;
  policyClasses: PolicyClass[];
  defaultClass: string;
  requestClassifier: PluginRef | null;
  /** Approximate mode (workers without KV events): how long routed blocks count as cached, and the most kept. */
  approximate: { ttlMs: number; maxBlocks: number };
  /** Session affinity for requests with x-session-id; null when off. */
  sessionAffinity: SessionAffinityConfig | null;
  /**
   * Most bytes the model's prefix index may hold; past it the least recently
   * stored or matched blocks are forgotten. Over 3 GiB the index is split
   * over several wasm cores. 0: no bound.
   */
  indexMemoryBytes: number;
  /** What a cached block in each storage tier is worth against a GPU-resident one. */
  tierWeights: TierWeights;
  /** How much prompt text one request may have tokenized, and what happens past it. */
  tokenizeLimit: TokenizeLimitConfig;
  /** The engine the model's workers run: it decides the prefill/decode handoff protocol. */
  engine: EngineKind;
  /** Prefill/decode disaggregation; null when every request runs whole on one worker. */
  disaggregation: DisaggregationConfig | null;
  /** How the model's engine expands an image into placeholder tokens (and whether http images are fetched to size them); null: images get coarse runs. */
  multimodal: ModelMultimodal | null;
}

export interface TokenizeLimitConfig {
  /** Most UTF-16 code units of prompt text one request may have tokenized; text found in the tokenizer's caches is free. */
  maxChars: number;
  /** Past the limit: `bytes` routes the request on its prompt's bytes (as the bytes tokenizer does), `reject` answers 400. */
  over: 'bytes' | 'reject';
}

export interface SessionAffinityConfig {
  /** Idle time after which a session's binding is forgotten. */
  ttlMs: number;
  /** Most sessions remembered per model (least recently used dropped first). */
  maxSessions: number;
}

/** Replicas sharing state over NATS (server/nats, docs/replicas.md). */
export interface NatsConfig {
  /** Server URL(s), comma-separated: nats://host:4222. */
  url: string;
  /** This router's id among its replicas; null: host name and process id. */
  replicaId: string | null;
  /** First token of every subject, stream and bucket name. */
  subjectPrefix: string;
  /** Share the load ledger (bookings) with the other replicas. */
  ledgerSync: boolean;
  /** How often each replica publishes a snapshot of its own bookings. */
  syncIntervalMs: number;
  /** A replica silent this long has its bookings dropped by the others. */
  peerTimeoutMs: number;
  /** The JetStream stream KV events are relayed through: its retention. */
  kvStream: { maxAgeMs: number; maxBytes: number };
}

export interface LimitsConfig {
  maxBodyBytes: number;
  /** Re-placements after a failure before the first byte. */
  maxRetries: number;
  connectTimeoutMs: number;
  /** Time allowed for a worker's response headers (0: none). */
  headersTimeoutMs: number;
  /** Longest silence inside a response body (0: none). */
  bodyTimeoutMs: number;
  /** How long SIGTERM waits for streams in flight. */
  shutdownTimeoutMs: number;
  /** How often the ledger sweep runs. */
  ledgerSweepIntervalMs: number;
  /** A booking older than this whose request is gone is reclaimed by the sweep (live streams keep theirs). */
  ledgerSweepAgeMs: number;
  /** Most block hashes in one POST /router/kv-events. */
  kvIngestMaxBlocksPerCall: number;
  /** Most blocks the index may hold for one worker fed over HTTP. */
  kvIngestMaxBlocksPerWorker: number;
  /** Bytes of long chat bodies kept so a conversation's next turn parses only its new part (0: none kept). */
  bodyReuseBytes: number;
}

/** Taking failing workers out of selection (server/workers/outliers.ts). */
export interface OutlierEjectionConfig {
  /** Consecutive connection failures or timeouts that eject a worker (0: never for these). */
  consecutiveConnectFailures: number;
  /** Consecutive 5xx answers that eject a worker (0: never for these). */
  consecutive5xx: number;
  /** Shortest time out of rotation, for a first ejection. */
  baseEjectionMs: number;
  /** Longest time out of rotation before probing, however often it was ejected. */
  maxEjectionMs: number;
  /** Time back in rotation after which the backoff starts again from the base. */
  backoffResetMs: number;
  /** How often an ejected worker is probed once its backoff is over. */
  probeIntervalMs: number;
  probeTimeoutMs: number;
  /** The engine's health endpoint, under the worker's URL. */
  probePath: string;
  /** Most of a model's non-draining workers out at once, in percent (at least one, never the last). */
  maxEjectionPercent: number;
  /** Quiet time (requests waiting, no headers or bytes from any) after which a worker is probed as possibly stalled (0: never). */
  stallMs: number;
  /** The stall probe's timeout: no healthy answer within it ejects the worker. */
  stallProbeTimeoutMs: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface RouterConfig {
  host: string;
  port: number;
  /** Bearer token of the admin API; null turns the admin API off. */
  adminToken: string | null;
  /** Bearer token required by POST /router/kv-events; null accepts any caller on a loopback address (and none elsewhere). */
  kvIngestToken: string | null;
  logLevel: LogLevel;
  /** Log one line per HTTP request (off by default: it costs on the hot path). */
  requestLog: boolean;
  limits: LimitsConfig;
  outlierEjection: OutlierEjectionConfig;
  models: ModelConfig[];
  workers: WorkerConfig[];
  /** Replica sync over NATS; null: a single router with its own state. */
  nats: NatsConfig | null;
  diagnostics: DiagnosticsConfig;
}

export const DEFAULTS = {
  host: '0.0.0.0',
  port: 8000,
  tokenizer: 'tiktoken:o200k_base',
  blockSize: 16,
  selection: 'ttft',
  limits: {
    maxBodyBytes: 32 * 1024 * 1024,
    maxRetries: 2,
    connectTimeoutMs: 5_000,
    headersTimeoutMs: 600_000,
    bodyTimeoutMs: 300_000,
    shutdownTimeoutMs: 30_000,
    ledgerSweepIntervalMs: 60_000,
    ledgerSweepAgeMs: 300_000,
    kvIngestMaxBlocksPerCall: 65_536,
    kvIngestMaxBlocksPerWorker: 1 << 20,
    bodyReuseBytes: 64 * 1024 * 1024,
  } satisfies LimitsConfig,
  outlierEjection: {
    consecutiveConnectFailures: 3,
    consecutive5xx: 5,
    baseEjectionMs: 1000,
    maxEjectionMs: 30_000,
    backoffResetMs: 60_000,
    probeIntervalMs: 250,
    probeTimeoutMs: 1000,
    probePath: '/health',
    maxEjectionPercent: 50,
    stallMs: 10_000,
    stallProbeTimeoutMs: 3_000,
  } satisfies OutlierEjectionConfig,
  approximate: { ttlMs: 120_000, maxBlocks: 1 << 20 },
  /** A quarter of the machine's memory, at most one core's worth (3 GiB). */
  indexMemoryBytes: Math.min(Math.floor(totalmem() / 4), SHARD_BOUND_BYTES),
  sessionAffinity: { ttlMs: 600_000, maxSessions: 1_000_000 },
  // Worst cases measured (bench tokenize-hostile): the wasm BPE stays above 8 MB/s, @huggingface/tokenizers
  // falls to about 0.1 MB/s on one long whitespace or CJK run; either limit is a few seconds of a tokenizer
  // thread at worst, and about a second of ordinary text.
  tokenizeLimit: { tiktokenChars: 4 * 1024 * 1024, hfChars: 256 * 1024, over: 'bytes' as const },
  nats: { subjectPrefix: 'kvrouter', syncIntervalMs: 1000, peerTimeoutMs: 5000, kvStream: { maxAgeMs: 3_600_000, maxBytes: 1 << 30 } },
} as const;

/** Model settings that may be given once at the top level and overridden per model. */
interface ModelDefaults {
  tokenizer: string;
  blockSize: number;
  selection: PluginRef;
  policyClasses: PolicyClass[];
  defaultClass: string | null;
  requestClassifier: PluginRef | null;
  approximate: { ttlMs: number; maxBlocks: number };
  sessionAffinity: SessionAffinityConfig | null;
  indexMemoryBytes: number;
  tierWeights: TierWeights;
  /** maxChars null: the default for the model's tokenizer. */
  tokenizeLimit: { maxChars: number | null; over: 'bytes' | 'reject' };
  engine: EngineKind;
  disaggregation: DisaggregationConfig | null;
  multimodal: ModelMultimodal | null;
}

/** The smallest memory bound an index may be given (besides 0, none). */
const MIN_INDEX_MEMORY_BYTES = 1 << 20;

export function validateConfig(raw: unknown): RouterConfig {
  const root = new Fields(raw ?? {}, '');
  const config = {
    host: root.string('host', DEFAULTS.host),
    port: root.number('port', DEFAULTS.port, { integer: true, min: 0, max: 65535 }),
    adminToken: token(root, 'admin_token'),
    kvIngestToken: token(root, 'kv_ingest_token'),
    logLevel: root.oneOf('log_level', LOG_LEVELS, 'info'),
    requestLog: root.boolean('request_log', false),
    limits: root.object('limits', readLimits, () => ({ ...DEFAULTS.limits })),
    outlierEjection: root.object('outlier_ejection', readOutlierEjection, () => ({ ...DEFAULTS.outlierEjection })),
    nats: root.has('nats') ? root.object('nats', readNats) : null,
    diagnostics: root.object('diagnostics', readDiagnostics, () => ({ ...DIAGNOSTICS_DEFAULTS })),
  };
  const defaults = readModelDefaults(root, {
    tokenizer: DEFAULTS.tokenizer,
    blockSize: DEFAULTS.blockSize,
    selection: { type: DEFAULTS.selection, params: {} },
    policyClasses: [DEFAULT_CLASS],
    defaultClass: null,
    requestClassifier: null,
    approximate: { ...DEFAULTS.approximate },
    sessionAffinity: null,
    indexMemoryBytes: DEFAULTS.indexMemoryBytes,
    tierWeights: DEFAULT_TIER_WEIGHTS,
    tokenizeLimit: { maxChars: null, over: DEFAULTS.tokenizeLimit.over },
    engine: DISAGG_DEFAULTS.engine,
    disaggregation: null,
    multimodal: null,
  });
  const declared = root.list('models', (value, path) => {
    const f = new Fields(value, path);
    const name = f.string('name');
    const adapters = f.list('adapters', (v, p) => adapterName(v, p));
    const adaptersPollMs = f.number('adapters_poll_ms', 0, { integer: true, min: 0 });
    const model = { ...finishModel(name, readModelDefaults(f, defaults), path, adapters), adaptersPollMs };
    f.done();
    return model;
  });
  const workers = root.list('workers', (value, path) => readWorker(new Fields(value, path), declared, defaults.blockSize));
  root.done();
  if (!config.nats) {
    const i = workers.findIndex((w) => w.kvEvents.source === 'nats');
    if (i >= 0) throw new ConfigError(`workers[${i}].kv_events.source`, 'is nats, but the config sets no nats.url (the NATS server the relay publishes to)');
  }

  const models = [...declared];
  for (const [i, m] of models.entries()) {
    if (models.findIndex((o) => o.name === m.name) !== i) throw new ConfigError(`models[${i}].name`, `model "${m.name}" is declared twice`);
  }
  checkAdapterNames(models);
  // Without a models list, each model a worker names gets the top-level settings.
  for (const w of workers) {
    if (!models.some((m) => m.name === w.model)) models.push(finishModel(w.model, defaults, ''));
  }
  for (const [i, w] of workers.entries()) {
    if (workers.findIndex((o) => o.id === w.id) !== i) throw new ConfigError(`workers[${i}].id`, `worker "${w.id}" is declared twice`);
  }
  if (models.length === 0) throw new ConfigError('models', 'the config declares no model and no worker: add a workers list (or models, to add workers at runtime)');
  for (const [i, w] of workers.entries()) checkWorkerRole(w, models.find((m) => m.name === w.model)!, `workers[${i}]`);
  checkFleetRoles(models, workers, declared.length);
  checkIngestExposure(config.host, config.kvIngestToken, workers);
  checkEventPorts(workers.flatMap((w, i) => eventSockets(w, `workers[${i}]`)));
  return { ...config, models, workers };
}

/** A LoRA adapter's name: what clients send as `model` and engines put in lora_name. */
function adapterName(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '' || /\s/.test(value)) throw new ConfigError(path, `must be an adapter name without spaces, got ${describe(value)}`);
  return value;
}

/** A client's `model` picks a model or an adapter, so every name means one thing. */
function checkAdapterNames(models: readonly ModelConfig[]): void {
  const owner = new Map<string, string>(models.map((m) => [m.name, `model "${m.name}"`]));
  for (const [i, m] of models.entries()) {
    for (const [j, name] of m.adapters.entries()) {
      const taken = owner.get(name);
      if (taken !== undefined) throw new ConfigError(`models[${i}].adapters[${j}]`, `"${name}" is already ${taken === `model "${name}"` ? 'a model' : `an adapter of ${taken}`}: a request's model must name one thing`);
      owner.set(name, `model "${m.name}"`);
    }
  }
}

/** Whether an address to listen on reaches only this machine. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * KV events over HTTP rewrite the cache index: whoever can post them decides
 * where prompts go. Beyond loopback they need a token.
 */
function checkIngestExposure(host: string, token: string | null, workers: readonly WorkerConfig[]): void {
  if (token !== null || isLoopback(host)) return;
  const i = workers.findIndex((w) => w.kvEvents.source === 'http');
  if (i < 0) return;
  throw new ConfigError(
    'kv_ingest_token',
    `is required: host ${JSON.stringify(host)} is not a loopback address and workers[${i}].kv_events.source is http, so anyone who reaches the router could post KV events; set kv_ingest_token (or KVROUTER_KV_INGEST_TOKEN), or listen on 127.0.0.1`,
  );
}

/**
 * The sockets a worker's engine binds for its KV events: each rank's
 * publisher and replay socket, on the configured port + rank.
 */
function eventSockets(worker: WorkerConfig, path: string): RankSocket[] {
  const kv = worker.kvEvents;
  if (kv.source !== 'zmq') return [];
  const endpoints = [{ field: `${path}.kv_events.endpoint`, endpoint: kv.endpoint }];
  if (kv.replayEndpoint !== null) endpoints.push({ field: `${path}.kv_events.replay_endpoint`, endpoint: kv.replayEndpoint });
  return rankSockets(endpoints, worker.dataParallelSize);
}

/** Two engine sockets on one host and port cannot both bind: the later field is at fault. */
function checkEventPorts(sockets: readonly RankSocket[]): void {
  const clash = firstCollision(sockets);
  if (!clash) return;
  const [first, second] = clash;
  const which = (s: RankSocket) => (s.rank === 0 ? s.field : `${s.field} (rank ${s.rank}: port + ${s.rank})`);
  throw new ConfigError(
    second.field,
    `${second.address} is also ${which(first)}${second.rank > 0 ? ` for rank ${second.rank}` : ''}: engines bind one socket per data-parallel rank on port + rank, ` +
      'so two of them cannot share it; leave at least data_parallel_size ports between the endpoint and the replay endpoint (e.g. 5557 and 5657)',
  );
}

/** Validates one worker entry (also the body of the admin API's add-worker call). */
export function validateWorker(raw: unknown, models: readonly ModelConfig[], path = 'worker'): WorkerConfig {
  const worker = readWorker(new Fields(raw, path), models, DEFAULTS.blockSize);
  const model = models.find((m) => m.name === worker.model);
  if (model) checkWorkerRole(worker, model, path);
  return worker;
}

function token(f: Fields, key: string): string | null {
  const value = f.optionalString(key);
  if (value !== null && value.length < 8) throw new ConfigError(f.at(key), 'must be at least 8 characters');
  return value;
}

function readLimits(f: Fields): LimitsConfig {
  const d = DEFAULTS.limits;
  const ms = (key: string, fallback: number) => f.number(key, fallback, { integer: true, min: 0 });
  return {
    maxBodyBytes: f.number('max_body_bytes', d.maxBodyBytes, { integer: true, min: 1024 }),
    maxRetries: f.number('max_retries', d.maxRetries, { integer: true, min: 0, max: 16 }),
    connectTimeoutMs: f.number('connect_timeout_ms', d.connectTimeoutMs, { integer: true, min: 1 }),
    headersTimeoutMs: ms('headers_timeout_ms', d.headersTimeoutMs),
    bodyTimeoutMs: ms('body_timeout_ms', d.bodyTimeoutMs),
    shutdownTimeoutMs: ms('shutdown_timeout_ms', d.shutdownTimeoutMs),
    ledgerSweepIntervalMs: f.number('ledger_sweep_interval_ms', d.ledgerSweepIntervalMs, { integer: true, min: 10 }),
    ledgerSweepAgeMs: f.number('ledger_sweep_age_ms', d.ledgerSweepAgeMs, { integer: true, min: 1 }),
    kvIngestMaxBlocksPerCall: f.number('kv_ingest_max_blocks_per_call', d.kvIngestMaxBlocksPerCall, { integer: true, min: 1 }),
    kvIngestMaxBlocksPerWorker: f.number('kv_ingest_max_blocks_per_worker', d.kvIngestMaxBlocksPerWorker, { integer: true, min: 1 }),
    bodyReuseBytes: f.number('body_reuse_bytes', d.bodyReuseBytes, { integer: true, min: 0 }),
  };
}

function readOutlierEjection(f: Fields): OutlierEjectionConfig {
  const d = DEFAULTS.outlierEjection;
  const count = (key: string, fallback: number) => f.number(key, fallback, { integer: true, min: 0, max: 1000 });
  const ms = (key: string, fallback: number, min: number) => f.number(key, fallback, { integer: true, min, max: 86_400_000 });
  const baseEjectionMs = ms('base_ejection_ms', d.baseEjectionMs, 1);
  const maxEjectionMs = ms('max_ejection_ms', Math.max(d.maxEjectionMs, baseEjectionMs), 1);
  if (maxEjectionMs < baseEjectionMs) throw new ConfigError(f.at('max_ejection_ms'), `must be at least base_ejection_ms (${baseEjectionMs}), got ${maxEjectionMs}`);
  const probePath = f.string('probe_path', d.probePath);
  if (!/^\/\S*$/.test(probePath)) throw new ConfigError(f.at('probe_path'), `must be a path starting with "/", got ${JSON.stringify(probePath)}`);
  return {
    consecutiveConnectFailures: count('consecutive_connect_failures', d.consecutiveConnectFailures),
    consecutive5xx: count('consecutive_5xx', d.consecutive5xx),
    baseEjectionMs,
    maxEjectionMs,
    backoffResetMs: ms('backoff_reset_ms', d.backoffResetMs, 0),
    probeIntervalMs: ms('probe_interval_ms', d.probeIntervalMs, 10),
    probeTimeoutMs: ms('probe_timeout_ms', d.probeTimeoutMs, 1),
    probePath,
    maxEjectionPercent: f.number('max_ejection_percent', d.maxEjectionPercent, { min: 1, max: 100 }),
    stallMs: ms('stall_ms', d.stallMs, 0),
    stallProbeTimeoutMs: ms('stall_probe_timeout_ms', d.stallProbeTimeoutMs, 1),
  };
}

function readModelDefaults(f: Fields, inherited: ModelDefaults): ModelDefaults {
  const policyClasses = f.has('policy_classes') ? f.list('policy_classes', readPolicyClass) : inherited.policyClasses;
  if (policyClasses.length === 0) throw new ConfigError(f.at('policy_classes'), 'must name at least one class');
  const selection = f.has('selection') ? f.object('selection', (s) => readPlugin(s, 'policy')) : inherited.selection;
  const classifier = f.has('request_classifier') ? f.object('request_classifier', (s) => readPlugin(s, 'type')) : inherited.requestClassifier;
  const engine = readEngine(f, inherited.engine);
  return {
    engine,
    disaggregation: readDisaggregation(f, engine, inherited.disaggregation),
    tokenizer: f.has('tokenizer') ? tokenizerSpec(f) : inherited.tokenizer,
    blockSize: f.number('block_size', inherited.blockSize, { integer: true, min: 1, max: 1 << 16 }),
    selection,
    policyClasses,
    defaultClass: f.optionalString('default_class') ?? inherited.defaultClass,
    requestClassifier: classifier,
    approximate: f.has('approximate')
      ? f.object('approximate', (a) => ({
          ttlMs: a.number('ttl_ms', inherited.approximate.ttlMs, { integer: true, min: 1 }),
          maxBlocks: a.number('max_blocks', inherited.approximate.maxBlocks, { integer: true, min: 1 }),
        }))
      : inherited.approximate,
    sessionAffinity: f.has('session_affinity') ? f.object('session_affinity', readSessionAffinity) : inherited.sessionAffinity,
    indexMemoryBytes: readIndexMemory(f, inherited.indexMemoryBytes),
    tierWeights: f.has('tier_weights') ? f.object('tier_weights', (t) => readTierWeights(t, inherited.tierWeights)) : inherited.tierWeights,
    tokenizeLimit: f.has('tokenize_limit')
      ? f.object('tokenize_limit', (t) => ({
          maxChars: t.has('max_chars') ? t.number('max_chars', 0, { integer: true, min: 0 }) : null,
          over: t.oneOf('over', ['bytes', 'reject'] as const, 'bytes'),
        }))
      : inherited.tokenizeLimit,
    multimodal: readMultimodal(f, inherited.multimodal),
  };
}

/** Weights in [0, 1]; the ones not given are inherited. */
function readTierWeights(f: Fields, inherited: TierWeights): TierWeights {
  const weight = (tier: Tier) => f.number(tier, inherited[tier], { min: 0, max: 1 });
  return Object.freeze({ gpu: weight('gpu'), cpu: weight('cpu'), disk: weight('disk') });
}

function readIndexMemory(f: Fields, inherited: number): number {
  const bytes = f.number('index_memory_bytes', inherited, { integer: true, min: 0 });
  if (bytes !== 0 && bytes < MIN_INDEX_MEMORY_BYTES) {
    throw new ConfigError(f.at('index_memory_bytes'), `must be 0 (no bound) or at least ${MIN_INDEX_MEMORY_BYTES} (1 MiB), got ${bytes}`);
  }
  return bytes;
}

/** `ttl_ms: 0` turns affinity off (e.g. for one model when the top level turns it on). */
function readSessionAffinity(f: Fields): SessionAffinityConfig | null {
  const d = DEFAULTS.sessionAffinity;
  const ttlMs = f.number('ttl_ms', d.ttlMs, { integer: true, min: 0, max: 31_536_000_000 });
  const maxSessions = f.number('max_sessions', d.maxSessions, { integer: true, min: 1 });
  return ttlMs === 0 ? null : { ttlMs, maxSessions };
}

const NATS_URL = /^(nats|tls|ws|wss):\/\/\S+$|^[^\s/:]+:\d+$/;
const NAME_TOKEN = /^[A-Za-z0-9_-]+$/;

function readNats(f: Fields): NatsConfig {
  const d = DEFAULTS.nats;
  const url = f.string('url');
  for (const part of url.split(',')) {
    if (!NATS_URL.test(part.trim())) throw new ConfigError(f.at('url'), `must be nats://host:port (several comma-separated), got ${JSON.stringify(part)}`);
  }
  const token = (key: string, fallback: string | undefined) => {
    const value = f.string(key, fallback);
    if (!NAME_TOKEN.test(value)) throw new ConfigError(f.at(key), `must be letters, digits, "_" or "-" (it names NATS subjects), got ${JSON.stringify(value)}`);
    return value;
  };
  const replicaId = f.has('replica_id') ? token('replica_id', undefined) : null;
  const syncIntervalMs = f.number('sync_interval_ms', d.syncIntervalMs, { integer: true, min: 50, max: 600_000 });
  const peerTimeoutMs = f.number('peer_timeout_ms', Math.max(d.peerTimeoutMs, 3 * syncIntervalMs), { integer: true, min: 1 });
  if (peerTimeoutMs <= syncIntervalMs) throw new ConfigError(f.at('peer_timeout_ms'), `must be longer than sync_interval_ms (${syncIntervalMs}), got ${peerTimeoutMs}: a live peer would time out between two snapshots`);
  return {
    url,
    replicaId,
    subjectPrefix: token('subject_prefix', d.subjectPrefix),
    ledgerSync: f.boolean('ledger_sync', true),
    syncIntervalMs,
    peerTimeoutMs,
    kvStream: f.has('kv_stream')
      ? f.object('kv_stream', (k) => ({
          maxAgeMs: k.number('max_age_ms', d.kvStream.maxAgeMs, { integer: true, min: 1000 }),
          maxBytes: k.number('max_bytes', d.kvStream.maxBytes, { integer: true, min: 1 << 20 }),
        }))
      : { ...d.kvStream },
  };
}

/** Checks the plugins once (a bad parameter fails start-up by name) and fixes the default class. */
function finishModel(name: string, d: ModelDefaults, path: string, adapters: string[] = []): ModelConfig {
  const where = (key: string) => join(path, key);
  for (const [i, c] of d.policyClasses.entries()) {
    if (d.policyClasses.findIndex((o) => o.name === c.name) !== i) throw new ConfigError(where(`policy_classes[${i}].name`), `class "${c.name}" is defined twice`);
  }
  const defaultClass = d.defaultClass ?? d.policyClasses[0]!.name;
  if (!d.policyClasses.some((c) => c.name === defaultClass)) {
    throw new ConfigError(where('default_class'), `no policy class named "${defaultClass}" (defined: ${d.policyClasses.map((c) => c.name).join(', ')})`);
  }
  plugin(where('selection'), () => createSelectionPolicy(d.selection.type, d.selection.params));
  if (d.requestClassifier) {
    const { type, params } = d.requestClassifier;
    plugin(where('request_classifier'), () => createClassifier(type, params));
  }
  const limit = DEFAULTS.tokenizeLimit;
  const maxChars = d.tokenizeLimit.maxChars ?? (d.tokenizer.startsWith('hf:') ? limit.hfChars : limit.tiktokenChars);
  return { name, adapters, adaptersPollMs: 0, ...d, defaultClass, tokenizeLimit: { maxChars, over: d.tokenizeLimit.over } };
}

function plugin(path: string, build: () => unknown): void {
  try {
    build();
  } catch (error) {
    if (error instanceof PluginConfigError) throw new ConfigError(path, error.message);
    throw error;
  }
}

function readPlugin(f: Fields, nameKey: 'policy' | 'type'): PluginRef {
  return { type: f.string(nameKey), params: f.params('params') };
}

function tokenizerSpec(f: Fields): string {
  const spec = f.string('tokenizer');
  if (spec === 'bytes') return spec;
  if (spec.startsWith('tiktoken:')) {
    const encoding = spec.slice('tiktoken:'.length);
    if (!TIKTOKEN_ENCODINGS.includes(encoding)) {
      throw new ConfigError(f.at('tokenizer'), `unknown tiktoken encoding "${encoding}" (known: ${TIKTOKEN_ENCODINGS.join(', ')})`);
    }
    return spec;
  }
  if (spec.startsWith('hf:') && spec.length > 3) return spec;
  throw new ConfigError(f.at('tokenizer'), `must be tiktoken:<encoding>, hf:<model dir> or bytes, got ${JSON.stringify(spec)}`);
}

function readPolicyClass(value: unknown, path: string): PolicyClass {
  const f = new Fields(value, path);
  const name = f.string('name');
  const quantum = f.number('quantum', DEFAULT_CLASS.quantum, { min: 1 });
  const queuePolicy = f.oneOf('queue_policy', ['fcfs', 'wspt'] as const, 'fcfs');
  const busy = f.has('busy') ? f.object('busy', readBusyThresholds) : null;
  const queueLimit = f.has('queue_limit')
    ? f.object('queue_limit', (q) => ({
        requests: q.optionalNumber('requests', { integer: true, min: 0 }),
        tokens: q.optionalNumber('tokens', { integer: true, min: 0 }),
      }))
    : { requests: null, tokens: null };
  const sloMs = f.optionalNumber('slo_ms', { min: 1 });
  f.done();
  return { name, quantum, queuePolicy, busy, queueLimit, sloMs };
}

/** Busy thresholds (also the body of the admin API's set call); at least one must be set. */
export function readBusyThresholds(b: Fields): BusyThresholds {
  const out: BusyThresholds = {};
  const tokens = b.optionalNumber('prefill_tokens', { min: 0 });
  const prefill = b.optionalNumber('prefill_fraction', { min: 0 });
  const decode = b.optionalNumber('decode_fraction', { min: 0, max: 1 });
  const ttft = b.optionalNumber('ttft_ms', { min: 0 });
  if (tokens !== null) out.prefillTokens = tokens;
  if (prefill !== null) out.prefillFraction = prefill;
  if (decode !== null) out.decodeFraction = decode;
  if (ttft !== null) out.ttftMs = ttft;
  if (Object.keys(out).length === 0) throw new ConfigError(b.path, 'set at least one of prefill_tokens, prefill_fraction, decode_fraction, ttft_ms');
  return out;
}

/** `implicitBlockSize`: the block size of a model no `models` entry declares (the top-level one). */
function readWorker(f: Fields, models: readonly ModelConfig[], implicitBlockSize: number): WorkerConfig {
  const id = f.string('id');
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(id)) {
    throw new ConfigError(f.at('id'), `must be letters, digits, ".", "_", ":" or "-" (starting with a letter or digit), got ${JSON.stringify(id)}`);
  }
  const url = workerUrl(f);
  let model: string;
  if (f.has('model')) {
    model = f.string('model');
    if (models.length > 0 && !models.some((m) => m.name === model)) {
      throw new ConfigError(f.at('model'), `no model named "${model}" in models (declared: ${models.map((m) => m.name).join(', ')})`);
    }
  } else if (models.length === 1) {
    model = models[0]!.name;
  } else {
    throw new ConfigError(f.at('model'), 'is required (the model this worker serves)');
  }
  const dataParallelSize = f.number('data_parallel_size', 1, { integer: true, min: 1, max: 1024 });
  const kvEvents = f.has('kv_events') ? f.object('kv_events', (k) => readKvEvents(k, dataParallelSize)) : ({ source: 'none' } as const);
  const blockSize = f.optionalNumber('block_size', { integer: true, min: 1 });
  const modelBlockSize = models.find((m) => m.name === model)?.blockSize ?? implicitBlockSize;
  if (blockSize !== null && blockSize !== modelBlockSize) {
    throw new ConfigError(
      f.at('block_size'),
      `is ${blockSize} but model "${model}" routes with block_size ${modelBlockSize}: the engine's block size (vLLM --block-size, SGLang --page-size) and the model's block_size must agree`,
    );
  }
  const taints = f.list('taints', (value, path) => {
    if (typeof value !== 'string' || !/^[^=\s]+=[^\s]*$/.test(value)) throw new ConfigError(path, `must be a "key=value" string, got ${JSON.stringify(value)}`);
    return value;
  });
  const worker: WorkerConfig = {
    id,
    url,
    model,
    kvEvents,
    totalBlocks: f.number('total_blocks', 0, { integer: true, min: 0 }),
    maxBatchedTokens: f.number('max_batched_tokens', 0, { integer: true, min: 0 }),
    dataParallelSize,
    taints,
    apiKey: f.optionalString('api_key'),
    ...readWorkerAdapters(f, models.find((m) => m.name === model)?.adapters ?? []),
    ...readWorkerRole(f),
  };
  f.done();
  checkEventPorts(eventSockets(worker, f.path));
  return worker;
}

/** The adapters a worker has loaded (default: all of its model's) and whether it loads the others on demand. */
function readWorkerAdapters(f: Fields, modelAdapters: readonly string[]): Pick<WorkerConfig, 'adapters' | 'loadAdapters'> {
  const adapters = f.has('adapters') ? f.list('adapters', (v, p) => adapterName(v, p)) : [...modelAdapters];
  for (const [i, name] of adapters.entries()) {
    if (!modelAdapters.includes(name)) {
      throw new ConfigError(f.at(`adapters[${i}]`), `"${name}" is not an adapter of the worker's model (its adapters: ${modelAdapters.join(', ') || 'none'})`);
    }
  }
  return { adapters, loadAdapters: f.boolean('load_adapters', false) };
}

function workerUrl(f: Fields): string {
  const raw = f.string('url');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(f.at('url'), `must be an http(s) URL such as http://10.0.0.5:8000, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(f.at('url'), `must use http or https, got ${url.protocol}`);
  if (url.search || url.hash) throw new ConfigError(f.at('url'), 'must not carry a query or fragment');
  // The router appends /v1/...; a base given with /v1 is taken as meaning the server root.
  const path = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${url.origin}${path}`;
}

const TCP_ENDPOINT = /^tcp:\/\/[^\s:/]+(:\d+)$|^tcp:\/\/\[[0-9a-fA-F:.]+\](:\d+)$/;
const ENDPOINT = /^(tcp|ipc|inproc):\/\/\S+$/;

function readKvEvents(f: Fields, ranks: number): KvEventsConfig {
  const source = f.oneOf('source', ['zmq', 'http', 'nats', 'none'] as const, f.has('endpoint') ? 'zmq' : undefined);
  if (source !== 'zmq') return { source };
  const endpoint = (key: string): string => {
    const value = f.string(key);
    // Ranks publish on consecutive ports (port + rank), so a multi-rank worker needs tcp://host:port.
    const ok = ranks > 1 ? TCP_ENDPOINT.test(value) : ENDPOINT.test(value);
    if (!ok || value.includes('*')) {
      throw new ConfigError(
        f.at(key),
        `must be a ZeroMQ address to connect to, such as tcp://10.0.0.5:5557${ranks > 1 ? ' (tcp://host:port: rank r uses port + r)' : ''}, got ${JSON.stringify(value)}`,
      );
    }
    return value;
  };
  const topic = f.get('topic') ?? '';
  if (typeof topic !== 'string') throw new ConfigError(f.at('topic'), `must be a string (vLLM's default is ""), got ${describe(topic)}`);
  return {
    source,
    endpoint: endpoint('endpoint'),
    replayEndpoint: f.has('replay_endpoint') ? endpoint('replay_endpoint') : null,
    topic,
  };
}
