// The replica settings of the config: nats and session_affinity, their
// defaults, environment overrides and errors that name the field.
import { describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { ConfigError } from '../../server/config/fields.js';
import { DEFAULTS } from '../../server/config/schema.js';

const worker = { id: 'w0', url: 'http://127.0.0.1:8000', model: 'm' };

function fails(document: Record<string, unknown>, pattern: RegExp, env: NodeJS.ProcessEnv = {}): void {
  let error: unknown;
  try {
    configFromDocument({ workers: [worker], ...document }, env);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as Error).message).toMatch(pattern);
}

describe('nats config', () => {
  it('is off without a nats block, with every default when only the url is given', () => {
    expect(configFromDocument({ workers: [worker] }).nats).toBeNull();
    const config = configFromDocument({ workers: [worker], nats: { url: 'nats://10.0.0.9:4222' } });
    expect(config.nats).toEqual({
      url: 'nats://10.0.0.9:4222',
      replicaId: null,
      subjectPrefix: DEFAULTS.nats.subjectPrefix,
      ledgerSync: true,
      syncIntervalMs: 1000,
      peerTimeoutMs: 5000,
      kvStream: { maxAgeMs: 3_600_000, maxBytes: 1 << 30 },
    });
  });

  it('takes the url and replica id from the environment', () => {
    const config = configFromDocument({ workers: [worker] }, { KVROUTER_NATS_URL: 'nats://a:4222,nats://b:4222', KVROUTER_REPLICA_ID: 'r-7' });
    expect(config.nats?.url).toBe('nats://a:4222,nats://b:4222');
    expect(config.nats?.replicaId).toBe('r-7');
  });

  it('the peer timeout follows a long sync interval unless set', () => {
    expect(configFromDocument({ workers: [worker], nats: { url: 'nats://x:1', sync_interval_ms: 4000 } }).nats?.peerTimeoutMs).toBe(12_000);
  });

  it('names the bad field', () => {
    fails({ nats: { url: 'http://x:4222' } }, /^nats\.url: must be nats:\/\/host:port/);
    fails({ nats: { url: 'nats://x:1', replica_id: 'a.b' } }, /^nats\.replica_id: must be letters, digits/);
    fails({ nats: { url: 'nats://x:1', subject_prefix: 'kv>' } }, /^nats\.subject_prefix: /);
    fails({ nats: { url: 'nats://x:1', sync_interval_ms: 1000, peer_timeout_ms: 1000 } }, /^nats\.peer_timeout_ms: must be longer than sync_interval_ms/);
    fails({ nats: { url: 'nats://x:1', kv_stream: { max_age: 5 } } }, /^nats\.kv_stream\.max_age: unknown field/);
    fails({ workers: [{ ...worker, kv_events: { source: 'nats' } }] }, /^workers\[0\]\.kv_events\.source: is nats, but the config sets no nats\.url/);
    fails({}, /^KVROUTER_REPLICA_ID \(nats\.replica_id\): must be letters/, { KVROUTER_NATS_URL: 'nats://x:1', KVROUTER_REPLICA_ID: 'a b' });
  });
});

describe('session affinity config', () => {
  it('is off by default, on with a TTL, and a model may turn it off again', () => {
    const config = configFromDocument({
      session_affinity: { ttl_ms: 30_000 },
      models: [{ name: 'm' }, { name: 'n', session_affinity: { ttl_ms: 0 } }],
      workers: [worker],
    });
    expect(config.models.map((m) => m.sessionAffinity)).toEqual([{ ttlMs: 30_000, maxSessions: 1_000_000 }, null]);
    expect(configFromDocument({ workers: [worker] }).models[0]!.sessionAffinity).toBeNull();
  });

  it('names the bad field', () => {
    fails({ session_affinity: { ttl_ms: -1 } }, /^session_affinity\.ttl_ms: must be >= 0/);
    fails({ session_affinity: { ttl: 5 } }, /^session_affinity\.ttl: unknown field/);
  });
});
