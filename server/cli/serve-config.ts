// Where `kvrouter serve` gets its config: the file --config (or
// KVROUTER_CONFIG) names, or else the embedded default, whose simulated
// workers are started here. Precedence: flags over environment variables
// over the file.
import { configFromDocument, loadConfigFile } from '../config/load.js';
import type { RouterConfig } from '../config/schema.js';
import { EMBEDDED_DEFAULTS, startEmbeddedFleet, type EmbeddedFleet } from './embedded-fleet.js';

export interface ServeOptions {
  config?: string;
  port?: number;
  host?: string;
  mockWorkers: number;
  mockSpeedup: number;
  replicas: number;
}

/**
 * The embedded default listens on loopback unless --host or HOST says
 * otherwise: its simulated workers are a local playground, not a service. A
 * config file keeps the configured host (default 0.0.0.0): it describes a
 * deployment whose clients are elsewhere.
 */
export const EMBEDDED_HOST = '127.0.0.1';

/** Set in a replica's environment by the primary: the embedded fleet's config document. */
export const REPLICA_DOCUMENT_ENV = 'KVROUTER_REPLICA_DOCUMENT';

export interface ServeConfig {
  config: RouterConfig;
  /** The config file, when there is one. */
  path: string | undefined;
  /** The simulated workers started for the embedded default (null with a file, and in a replica). */
  embedded: EmbeddedFleet | null;
}

function embeddedConfig(document: Record<string, unknown>, env: NodeJS.ProcessEnv): RouterConfig {
  return configFromDocument({ host: EMBEDDED_HOST, ...document }, env);
}

export async function serveConfig(o: ServeOptions, env: NodeJS.ProcessEnv): Promise<ServeConfig> {
  const merged = { ...env, ...(o.port !== undefined && { PORT: String(o.port) }), ...(o.host !== undefined && { HOST: o.host }) };
  const path = o.config ?? env.KVROUTER_CONFIG;
  if (path) return { config: await loadConfigFile(path, merged), path, embedded: null };
  const replicaDocument = env[REPLICA_DOCUMENT_ENV];
  // A replica forked by `serve --replicas`: the primary runs the embedded fleet.
  if (replicaDocument !== undefined) return { config: embeddedConfig(JSON.parse(replicaDocument) as Record<string, unknown>, merged), path, embedded: null };
  const embedded = await startEmbeddedFleet({ ...EMBEDDED_DEFAULTS, workers: o.mockWorkers, speedup: o.mockSpeedup });
  try {
    return { config: embeddedConfig(embedded.document, merged), path, embedded };
  } catch (error) {
    await embedded.close();
    throw error;
  }
}
