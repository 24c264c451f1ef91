// Config validation: defaults, errors that name the bad field, environment
// overrides (named in their errors), and the request-classifier seam.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../server/config/fields.js';
import { configFromDocument, loadConfigFile } from '../../server/config/load.js';
import { DEFAULTS, validateConfig } from '../../server/config/schema.js';

const worker = (over: Record<string, unknown> = {}) => ({ id: 'w0', url: 'http://10.0.0.5:8000', model: 'llama', ...over });

function failure(document: unknown, env: NodeJS.ProcessEnv = {}): string {
  try {
    configFromDocument(document, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('the config was accepted');
}

describe('config defaults', () => {
  it('fills in every default from a minimal worker list', () => {
    const config = validateConfig({ workers: [worker()] });
    expect(config.port).toBe(8000);
    expect(config.adminToken).toBeNull();
    expect(config.limits).toEqual(DEFAULTS.limits);
    expect(config.models).toHaveLength(1);
    const model = config.models[0]!;
    expect(model).toMatchObject({ name: 'llama', tokenizer: 'tiktoken:o200k_base', blockSize: 16, selection: { type: 'ttft', params: {} }, defaultClass: 'default' });
    expect(config.workers[0]).toMatchObject({ kvEvents: { source: 'none' }, dataParallelSize: 1, totalBlocks: 0, taints: [], apiKey: null });
  });

  it('strips a trailing /v1 from worker URLs and infers the model when only one is declared', () => {
    const config = validateConfig({ models: [{ name: 'm' }], workers: [{ id: 'a', url: 'http://h:9000/v1/' }] });
    expect(config.workers[0]).toMatchObject({ url: 'http://h:9000', model: 'm' });
  });

  it('lets a model override the top-level settings', () => {
    const config = validateConfig({
      block_size: 32,
      selection: { policy: 'two-tier' },
      models: [{ name: 'a' }, { name: 'b', block_size: 64, selection: { policy: 'kv', params: { overlap_credit: 0.5 } } }],
      workers: [worker({ model: 'a' }), worker({ id: 'w1', model: 'b' })],
    });
    expect(config.models.map((m) => [m.blockSize, m.selection.type])).toEqual([[32, 'two-tier'], [64, 'kv']]);
  });
});

describe('config validation names the bad field', () => {
  it.each([
    [/^workers\[2\]\.kv_events\.endpoint: must be a ZeroMQ address/, { workers: [worker(), worker({ id: 'w1' }), worker({ id: 'w2', kv_events: { source: 'zmq', endpoint: 'localhost:5557' } })] }],
    [/^workers\[1\]\.kv_events\.endpoint: .*rank r uses port \+ r/, { workers: [worker({ kv_events: { endpoint: 'tcp://h:5557' }, data_parallel_size: 2 }), worker({ id: 'w1', data_parallel_size: 2, kv_events: { endpoint: 'ipc:///tmp/x' } })] }],
    [/^workers\[0\]\.url: must use http or https/, { workers: [worker({ url: 'ftp://x' })] }],
    [/^workers\[0\]\.url: must be an http\(s\) URL/, { workers: [worker({ url: 'not a url' })] }],
    [/^workers\[0\]\.id: /, { workers: [worker({ id: 'bad id' })] }],
    [/^workers\[1\]\.id: worker "w0" is declared twice/, { workers: [worker(), worker()] }],
    [/^workers\[0\]\.total_blocks: must be >= 0, got -1/, { workers: [worker({ total_blocks: -1 })] }],
    [/^workers\[0\]\.taints\[0\]: must be a "key=value" string/, { workers: [worker({ taints: ['zone'] })] }],
    [/^workers\[0\]\.kv_event: unknown field/, { workers: [worker({ kv_event: {} })] }],
    [/^workers\[0\]\.kv_events\.source: must be one of zmq, http, nats, none/, { workers: [worker({ kv_events: { source: 'kafka' } })] }],
    [/^workers\[0\]\.block_size: is 64 but model "llama" routes with block_size 16/, { models: [{ name: 'llama', block_size: 16 }], workers: [worker({ block_size: 64 })] }],
    [/^workers\[0\]\.block_size: is 64 but model "llama" routes with block_size 32/, { block_size: 32, workers: [worker({ block_size: 64 })] }],
    [/^workers\[0\]\.model: is required/, { models: [{ name: 'a' }, { name: 'b' }], workers: [worker({ model: undefined })] }],
    [/^workers\[0\]\.model: no model named "llama"/, { models: [{ name: 'a' }], workers: [worker({ model: 'llama' })] }],
    [/^port: must be <= 65535/, { port: 70000, workers: [worker()] }],
    [/^admin_token: must be at least 8 characters/, { admin_token: 'short', workers: [worker()] }],
    [/^limits\.max_retries: must be >= 0/, { limits: { max_retries: -1 }, workers: [worker()] }],
    [/^tokenizer: unknown tiktoken encoding "o300k"/, { tokenizer: 'tiktoken:o300k', workers: [worker()] }],
    [/^selection: unknown selection policy "magic"/, { selection: { policy: 'magic' }, workers: [worker()] }],
    [/^selection: kv: unknown parameter "overlap"/, { selection: { policy: 'kv', params: { overlap: 1 } }, workers: [worker()] }],
    [/^policy_classes\[0\]\.queue_policy: must be one of fcfs, wspt/, { policy_classes: [{ name: 'a', queue_policy: 'lifo' }], workers: [worker()] }],
    [/^policy_classes\[0\]\.busy: set at least one of/, { policy_classes: [{ name: 'a', busy: {} }], workers: [worker()] }],
    [/^default_class: no policy class named "b"/, { policy_classes: [{ name: 'a' }], default_class: 'b', workers: [worker()] }],
    [/^models\[0\]\.policy_classes\[1\]\.name: class "x" is defined twice/, { models: [{ name: 'm', policy_classes: [{ name: 'x' }, { name: 'x' }] }] }],
    [/^request_classifier: unknown request_classifier type "thunder"/, { request_classifier: { type: 'thunder' }, workers: [worker()] }],
    [/^models: the config declares no model and no worker/, {}],
  ] as const)('%s', (message, document) => {
    expect(failure(document)).toMatch(message);
  });
});

describe('KV events over HTTP beyond loopback', () => {
  const http = worker({ kv_events: { source: 'http' } });

  it('refuse to start without kv_ingest_token, naming the token, the host and the worker', () => {
    const message = failure({ workers: [worker({ id: 'zmq', kv_events: { endpoint: 'tcp://h:1' } }), http] });
    expect(message).toMatch(/^kv_ingest_token: is required: host "0\.0\.0\.0" is not a loopback address and workers\[1\]\.kv_events\.source is http/);
    expect(failure({ host: '10.0.0.2', workers: [http] })).toMatch(/host "10\.0\.0\.2"/);
    expect(failure({ host: '127.0.0.1', workers: [http] }, { HOST: '::' })).toMatch(/^kv_ingest_token: .*host "::"/);
  });

  it('start on a loopback address, or with a token', () => {
    for (const host of ['127.0.0.1', '127.8.9.10', 'localhost', '::1', '[::1]']) expect(configFromDocument({ host, workers: [http] }).host).toBe(host);
    expect(configFromDocument({ workers: [http] }, { KVROUTER_KV_INGEST_TOKEN: 'long-enough' }).kvIngestToken).toBe('long-enough');
    // Without an HTTP source nothing can be posted: any host.
    expect(configFromDocument({ workers: [worker()] }).host).toBe('0.0.0.0');
  });
});

describe('ledger sweep and KV ingest limits', () => {
  it('default to a 300 s sweep age every 60 s and caps of 65,536 blocks per call and 2^20 per worker', () => {
    expect(validateConfig({ workers: [worker()] }).limits).toMatchObject({ ledgerSweepAgeMs: 300_000, ledgerSweepIntervalMs: 60_000, kvIngestMaxBlocksPerCall: 65_536, kvIngestMaxBlocksPerWorker: 1_048_576 });
  });

  it('are configurable and checked', () => {
    const limits = { ledger_sweep_age_ms: 900_000, ledger_sweep_interval_ms: 10, kv_ingest_max_blocks_per_call: 8, kv_ingest_max_blocks_per_worker: 20 };
    expect(validateConfig({ limits, workers: [worker()] }).limits).toMatchObject({ ledgerSweepAgeMs: 900_000, ledgerSweepIntervalMs: 10, kvIngestMaxBlocksPerCall: 8, kvIngestMaxBlocksPerWorker: 20 });
    expect(failure({ limits: { ledger_sweep_interval_ms: 0 }, workers: [worker()] })).toMatch(/^limits\.ledger_sweep_interval_ms: must be >= 10/);
    expect(failure({ limits: { ledger_sweep_age_ms: 0 }, workers: [worker()] })).toMatch(/^limits\.ledger_sweep_age_ms: must be >= 1/);
    expect(failure({ limits: { kv_ingest_max_blocks_per_call: 1.5 }, workers: [worker()] })).toMatch(/^limits\.kv_ingest_max_blocks_per_call: must be an integer/);
    expect(validateConfig({ limits: { body_reuse_bytes: 0 }, workers: [worker()] }).limits.bodyReuseBytes).toBe(0);
    expect(failure({ limits: { body_reuse_bytes: -1 }, workers: [worker()] })).toMatch(/^limits\.body_reuse_bytes: must be >= 0/);
  });
});

describe('environment overrides', () => {
  it('override the file and name the variable when invalid', () => {
    const config = configFromDocument({ port: 1, workers: [worker()] }, { PORT: '9001', KVROUTER_ADMIN_TOKEN: 'from-the-env', KVROUTER_MAX_BODY_BYTES: '65536', KVROUTER_REQUEST_LOG: 'yes' });
    expect(config).toMatchObject({ port: 9001, adminToken: 'from-the-env', requestLog: true, limits: { maxBodyBytes: 65536 } });
    expect(failure({ workers: [worker()] }, { PORT: 'eighty' })).toBe('PORT: must be an integer, got "eighty"');
    expect(failure({ workers: [worker()] }, { PORT: '99999' })).toBe('PORT (port): must be <= 65535, got 99999');
    expect(failure({ workers: [worker()] }, { KVROUTER_LOG_LEVEL: 'loud' })).toMatch(/^KVROUTER_LOG_LEVEL \(log_level\): must be one of/);
  });
});

describe('config files', () => {
  it('loads YAML and JSON and names the file in errors', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvrouter-config-'));
    const yaml = join(dir, 'router.yaml');
    await writeFile(yaml, 'workers:\n  - id: w0\n    url: http://h:8000\n    model: m\n');
    expect((await loadConfigFile(yaml)).workers[0]!.id).toBe('w0');
    const json = join(dir, 'router.json');
    await writeFile(json, JSON.stringify({ workers: [worker({ kv_events: { endpoint: 'tcp://h:1', replay_endpoint: 'udp://x' } })] }));
    await expect(loadConfigFile(json)).rejects.toThrow(`${json}: workers[0].kv_events.replay_endpoint: must be a ZeroMQ address`);
    const broken = join(dir, 'broken.yaml');
    await writeFile(broken, 'workers:\n  - id: [unclosed\n');
    await expect(loadConfigFile(broken)).rejects.toThrow(/broken\.yaml: is not valid YAML/);
    await expect(loadConfigFile(join(dir, 'missing.yaml'))).rejects.toThrow(/missing\.yaml: cannot read the config file: ENOENT/);
  });
});

describe('request classifier seam', () => {
  it('builds the configured classifier type and passes its parameter errors through by name', () => {
    const ok = validateConfig({ request_classifier: { type: 'cold_pool', params: { workers: 2 } }, workers: [worker()] });
    expect(ok.models[0]!.requestClassifier).toEqual({ type: 'cold_pool', params: { workers: 2 } });
    expect(failure({ models: [{ name: 'm', request_classifier: { type: 'thunderagent', params: { pause_treshold: 0.9 } } }] })).toMatch(
      /^models\[0\]\.request_classifier: thunderagent: unknown parameter "pause_treshold"/,
    );
    expect(failure({ request_classifier: { type: 'thunderagent', params: { scheduler_interval_seconds: 5 } }, workers: [worker()] })).toMatch(
      /scheduler_interval_seconds" was removed/,
    );
    expect(failure({ request_classifier: { type: 'cold-pool' }, workers: [worker()] })).toMatch(/known: thunderagent, cold_pool\)/);
  });
});

describe('index_memory_bytes', () => {
  it('defaults to a quarter of the machine memory, at most 3 GiB, and may be set at the top and per model', () => {
    expect(DEFAULTS.indexMemoryBytes).toBe(Math.min(Math.floor(totalmem() / 4), 3 * 2 ** 30));
    expect(validateConfig({ workers: [worker()] }).models[0]!.indexMemoryBytes).toBe(DEFAULTS.indexMemoryBytes);
    const config = validateConfig({
      index_memory_bytes: 6 * 2 ** 30,
      models: [{ name: 'a' }, { name: 'b', index_memory_bytes: 0 }],
      workers: [worker({ model: 'a' }), worker({ id: 'w1', model: 'b' })],
    });
    expect(config.models.map((m) => m.indexMemoryBytes)).toEqual([6 * 2 ** 30, 0]);
    expect(configFromDocument({ workers: [worker()] }, { KVROUTER_INDEX_MEMORY_BYTES: '1073741824' }).models[0]!.indexMemoryBytes).toBe(2 ** 30);
  });

  it('takes 0 (no bound) or at least 1 MiB, and names the field', () => {
    expect(failure({ index_memory_bytes: 1000, workers: [worker()] })).toBe('index_memory_bytes: must be 0 (no bound) or at least 1048576 (1 MiB), got 1000');
    expect(failure({ models: [{ name: 'llama', index_memory_bytes: -1 }], workers: [worker()] })).toMatch(/^models\[0\]\.index_memory_bytes: must be >= 0/);
    expect(failure({ workers: [worker()] }, { KVROUTER_INDEX_MEMORY_BYTES: 'lots' })).toBe('KVROUTER_INDEX_MEMORY_BYTES: must be an integer, got "lots"');
  });
});
