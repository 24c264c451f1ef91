// Cold Pool's knobs: typed options for code and the config parameters that
// map onto them. Defaults are kvrouter's own choices (the policy's origin
// fixes only the pool cap and the 100 ms recheck).
import type { RendezvousHasher } from '../../../bindings/selection-contract.js';
import { PluginConfigError, readParams } from '../params.js';

export interface ColdPoolOptions {
  /** Prompts under this many tokens are Warm; an effective prefill at or over it is Cold. */
  requestThreshold: number;
  /** Configured pool size; capped at a third of the workers. 0 keeps classification and the Cold lane without containment. */
  workers: number;
  /** How long a Cold head waits for a pool member without Warm work before any member may take it (ms); 0 is pool-only. */
  softDrainTimeoutMs: number;
  /** Steer Warm work off the pool while Cold is pending, and off workers running Cold otherwise. */
  steerWarm: boolean;
}

export interface ColdPoolConstruction extends ColdPoolOptions {
  /** The rendezvous hasher for membership (default: the wasm core's). */
  rendezvous?: RendezvousHasher;
}

export const COLD_POOL_DEFAULTS: Readonly<ColdPoolOptions> = Object.freeze({
  requestThreshold: 32_768,
  workers: 1,
  softDrainTimeoutMs: 5_000,
  steerWarm: true,
});

/** The longest a held Cold head goes without being asked again (P7). */
export const COLD_RECHECK_MS = 100;

/** The lane Cold requests without a session wait in. */
export const COLD_LANE = 'cold';

const spec = {
  request_threshold: { type: 'number', default: COLD_POOL_DEFAULTS.requestThreshold, min: 1, integer: true },
  workers: { type: 'number', default: COLD_POOL_DEFAULTS.workers, min: 0, integer: true },
  soft_drain_timeout_ms: { type: 'number', default: COLD_POOL_DEFAULTS.softDrainTimeoutMs, min: 0 },
  steer_warm: { type: 'boolean', default: COLD_POOL_DEFAULTS.steerWarm },
} as const;

/** Reads `request_classifier: {type: cold_pool, ...}` parameters strictly. */
export function coldPoolParams(raw: unknown): ColdPoolOptions {
  const p = readParams('cold_pool', raw, spec);
  return { requestThreshold: p.request_threshold, workers: p.workers, softDrainTimeoutMs: p.soft_drain_timeout_ms, steerWarm: p.steer_warm };
}

/** Fills defaults and checks each field; errors name it. */
export function checkColdPoolOptions(options: Partial<ColdPoolOptions>): ColdPoolOptions {
  const o: ColdPoolOptions = { ...COLD_POOL_DEFAULTS, ...options };
  if (!Number.isInteger(o.requestThreshold) || o.requestThreshold < 1) throw new PluginConfigError(`cold_pool: requestThreshold must be a positive integer, got ${o.requestThreshold}`);
  if (!Number.isInteger(o.workers) || o.workers < 0) throw new PluginConfigError(`cold_pool: workers must be an integer >= 0, got ${o.workers}`);
  if (!(o.softDrainTimeoutMs >= 0 && o.softDrainTimeoutMs < Infinity)) throw new PluginConfigError(`cold_pool: softDrainTimeoutMs must be a finite time >= 0, got ${o.softDrainTimeoutMs}`);
  if (typeof o.steerWarm !== 'boolean') throw new PluginConfigError(`cold_pool: steerWarm must be a boolean, got ${JSON.stringify(o.steerWarm)}`);
  return o;
}
