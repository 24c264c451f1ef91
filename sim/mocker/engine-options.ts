// The mock engine's knobs, their defaults (the mocker's vLLM-mode defaults)
// and their validation, shared by the engine, the HTTP server and the CLI.
import type { Clock } from '../../router/clock.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import type { HashBlocks } from './block-hash.js';
import { checkSpeedup } from './timing.js';

export interface EngineShape {
  /** KV cache capacity in blocks. */
  numBlocks: number;
  /** Tokens per KV block. */
  blockSize: number;
  /** Token budget of one step (prefill chunks plus decodes). */
  maxBatchedTokens: number;
  /** Most requests running at once. */
  maxNumSeqs: number;
  /** Divides every modelled duration. */
  speedup: number;
  /** Data-parallel rank stamped on event batches. */
  dpRank: number | null;
  /**
   * Blocks of a host-memory (CPU) offload tier: each full block is written
   * through to it when computed and published with medium CPU, the least
   * recently used evicted past the capacity; 0: no tier. A request whose
   * prefix goes on into the tier past its GPU hits loads those blocks back.
   */
  offloadBlocks: number;
  /**
   * Time to load one token's KV from the offload tier back to the GPU, ms
   * (before speedup). The default, 0.005, is about 128 KiB of KV per token
   * over 25 GB/s of PCIe: a third of the prefill's linear term.
   */
  offloadLoadMsPerToken: number;
}

export interface MockEngineOptions extends Partial<EngineShape> {
  clock: Clock;
  /** Receives one batch per engine step that changed the cache (none for steps that did not). */
  onEvents?(batch: KvEventBatch): void;
  /** Called as each step starts, with what it computes and how long it takes. */
  onStep?(step: StepReport): void;
  /** Chained block hashes; defaults to the engine's own cheap 64-bit hash. */
  hashBlocks?: HashBlocks;
}

export interface StepReport {
  startMs: number;
  durationMs: number;
  /** Prefill (and recompute) tokens computed in the step. */
  prefillTokens: number;
  /** Requests decoding one token each. */
  decodes: number;
  /** Requests given tokens in the step (decodes and prefill chunks). */
  requests: number;
  /** Active blocks / total blocks after the step's allocations. */
  kvUsage: number;
}

export const ENGINE_DEFAULTS: EngineShape = {
  numBlocks: 16_384,
  blockSize: 64,
  maxBatchedTokens: 8192,
  maxNumSeqs: 256,
  speedup: 1,
  dpRank: 0,
  offloadBlocks: 0,
  offloadLoadMsPerToken: 0.005,
};

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be an integer >= 1, got ${value}`);
  return value;
}

/** Fills in defaults and rejects bad values with an error naming the field. */
export function resolveEngineShape(options: Partial<EngineShape>): EngineShape {
  const shape = { ...ENGINE_DEFAULTS };
  for (const [key, value] of Object.entries(options)) {
    if (value !== undefined && key in shape) (shape as Record<string, unknown>)[key] = value;
  }
  positiveInteger('numBlocks', shape.numBlocks);
  positiveInteger('blockSize', shape.blockSize);
  positiveInteger('maxBatchedTokens', shape.maxBatchedTokens);
  positiveInteger('maxNumSeqs', shape.maxNumSeqs);
  checkSpeedup(shape.speedup);
  if (!Number.isInteger(shape.offloadBlocks) || shape.offloadBlocks < 0) throw new RangeError(`offloadBlocks must be an integer >= 0, got ${shape.offloadBlocks}`);
  if (typeof shape.offloadLoadMsPerToken !== 'number' || !Number.isFinite(shape.offloadLoadMsPerToken) || shape.offloadLoadMsPerToken < 0) {
    throw new RangeError(`offloadLoadMsPerToken must be a finite number >= 0, got ${shape.offloadLoadMsPerToken}`);
  }
  if (shape.dpRank !== null && (!Number.isInteger(shape.dpRank) || shape.dpRank < 0)) {
    throw new RangeError(`dpRank must be an integer >= 0 or null, got ${shape.dpRank}`);
  }
  return shape;
}
