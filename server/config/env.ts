// Environment variables that override the common settings of a config file
// (or of the embedded default). They are applied to the parsed document before
// validation, so an out-of-range value fails with the same rules as the file,
// and the error names the variable.
import { ConfigError } from './fields.js';

type Kind = 'string' | 'integer' | 'boolean';

interface Override {
  env: string;
  path: readonly string[];
  kind: Kind;
}

export const ENV_OVERRIDES: readonly Override[] = [
  { env: 'PORT', path: ['port'], kind: 'integer' },
  { env: 'HOST', path: ['host'], kind: 'string' },
  { env: 'KVROUTER_ADMIN_TOKEN', path: ['admin_token'], kind: 'string' },
  { env: 'KVROUTER_KV_INGEST_TOKEN', path: ['kv_ingest_token'], kind: 'string' },
  { env: 'KVROUTER_LOG_LEVEL', path: ['log_level'], kind: 'string' },
  { env: 'KVROUTER_REQUEST_LOG', path: ['request_log'], kind: 'boolean' },
  { env: 'KVROUTER_TOKENIZER', path: ['tokenizer'], kind: 'string' },
  { env: 'KVROUTER_INDEX_MEMORY_BYTES', path: ['index_memory_bytes'], kind: 'integer' },
  { env: 'KVROUTER_MAX_BODY_BYTES', path: ['limits', 'max_body_bytes'], kind: 'integer' },
  { env: 'KVROUTER_MAX_RETRIES', path: ['limits', 'max_retries'], kind: 'integer' },
  { env: 'KVROUTER_SHUTDOWN_TIMEOUT_MS', path: ['limits', 'shutdown_timeout_ms'], kind: 'integer' },
  { env: 'KVROUTER_NATS_URL', path: ['nats', 'url'], kind: 'string' },
  { env: 'KVROUTER_REPLICA_ID', path: ['nats', 'replica_id'], kind: 'string' },
];

function parse(o: Override, text: string): string | number | boolean {
  const value = text.trim();
  if (o.kind === 'string') {
    if (value === '') throw new ConfigError(o.env, 'is set but empty');
    return value;
  }
  if (o.kind === 'boolean') {
    if (['1', 'true', 'yes', 'on'].includes(value.toLowerCase())) return true;
    if (['0', 'false', 'no', 'off'].includes(value.toLowerCase())) return false;
    throw new ConfigError(o.env, `must be true or false, got ${JSON.stringify(text)}`);
  }
  if (!/^-?\d+$/.test(value)) throw new ConfigError(o.env, `must be an integer, got ${JSON.stringify(text)}`);
  return Number(value);
}

/**
 * Returns a copy of the document with the environment's overrides applied,
 * and which config path each variable set (to name it in validation errors).
 */
export function applyEnv(document: unknown, env: NodeJS.ProcessEnv): { document: unknown; sources: Map<string, string> } {
  const sources = new Map<string, string>();
  const base = document ?? {};
  // Not an object: validation rejects it with its own message.
  if (typeof base !== 'object' || Array.isArray(base)) return { document: base, sources };
  const out = structuredClone(base) as Record<string, unknown>;
  for (const o of ENV_OVERRIDES) {
    const text = env[o.env];
    if (text === undefined) continue;
    const value = parse(o, text);
    let node = out;
    for (const key of o.path.slice(0, -1)) {
      const next = node[key];
      if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
      node = node[key] as Record<string, unknown>;
    }
    node[o.path.at(-1)!] = value;
    sources.set(o.path.join('.'), o.env);
  }
  return { document: out, sources };
}
