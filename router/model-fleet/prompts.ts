// A request's prompt as the model fleet keeps it: its tokens checked, its seed
// (LoRA adapter and cache salt), both hash lists from one core call (which
// also finds the prompt's cached prefixes; a prompt with media has the blocks
// its items overlap hashed again with their keys, and is matched at its
// decision), and the fields the scheduler and selection read.
import { DEFAULT_SEED, seedFor } from '../../bindings/reference/hash-inputs.js';
import type { DecisionKernel, PromptHashes } from '../../bindings/decision-contract.js';
import { workerLabel } from '../../bindings/workers.js';
import { RouterError } from '../errors.js';
import { blockMedia, foldMedia } from '../media-keys.js';
import { saltedPrompt } from './block-keys.js';
import type { EventHasher } from './kernels.js';
import type { WorkerSet } from './worker-set.js';
import type { RequestFields, RoutedRequest } from './types.js';

/** Distinct (LoRA, salt) seeds kept before the memo starts over (salts come from clients). */
const SEED_LIMIT = 4096;

/** Token ids must be u32 integers; one tight loop per array kind keeps element access monomorphic. */
function checkTokens(tokens: ArrayLike<number>): void {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t >>> 0 !== t) throw new RangeError(`tokens[${i}] must be an integer in [0, 2^32), got ${t}`);
  }
}

export class Prompts {
  private readonly seeds = new Map<string, bigint>();

  constructor(
    private readonly model: string,
    private readonly workers: WorkerSet,
    private readonly decider: DecisionKernel,
    private readonly hasher: EventHasher,
  ) {}

  /** Hashes a prompt into blocks and validates the pin; the result is what the scheduler queues. */
  prepare(fields: RequestFields, tokens: ArrayLike<number>): RoutedRequest {
    if (fields.pin) {
      const meta = this.workers.get(fields.pin.id);
      if (!meta || fields.pin.rank >= meta.slots.length) {
        throw new RouterError('KVR_ERR_UNKNOWN_WORKER', `worker ${workerLabel(fields.pin)} does not serve model ${this.model}`);
      }
    }
    if (!(tokens instanceof Uint32Array)) checkTokens(tokens);
    const lora = fields.loraName || null;
    const salt = fields.cacheSalt || null;
    let { local, sequence } = this.hashes(tokens, lora, salt);
    const media = fields.media?.length ? blockMedia(fields.media, local.length, this.decider.blockSize) : null;
    if (media) {
      const base = this.seedOf(lora, null);
      local = foldMedia(this.hasher, tokens, local, media, this.decider.blockSize, base, this.seedOf(lora, salt));
      sequence = this.hasher.sequenceHashes(local, base);
    }
    return {
      id: fields.id,
      promptTokens: tokens.length,
      sessionId: fields.sessionId,
      sessionFinal: fields.sessionFinal,
      policyClass: fields.policyClass,
      priority: fields.priority,
      tier: fields.tier,
      pin: fields.pin,
      allowedWorkers: fields.allowedWorkers,
      localHashes: local,
      seqHashes: sequence,
      requiredTaints: fields.requiredTaints ?? [],
      preferredTaints: fields.preferredTaints ?? [],
    };
  }

  /** The prompt's hashes under its adapter, its first block under the salt as well (block-keys.ts). */
  private hashes(tokens: ArrayLike<number>, lora: string | null, salt: string | null): PromptHashes {
    const base = this.seedOf(lora, null);
    const prompt = this.decider.prepare(tokens, base);
    if (salt === null) return prompt;
    return saltedPrompt(this.hasher, prompt, tokens, this.decider.blockSize, { base, salted: this.seedOf(lora, salt) });
  }

  /** The hash seed of a LoRA adapter and cache salt. */
  seedOf(lora: string | null, salt: string | null): bigint {
    if (!lora && !salt) return DEFAULT_SEED;
    const key = `${lora ?? ''}\u0000${salt ?? ''}`;
    let seed = this.seeds.get(key);
    if (seed === undefined) {
      seed = seedFor({ lora, salt });
      if (this.seeds.size >= SEED_LIMIT) this.seeds.clear();
      this.seeds.set(key, seed);
    }
    return seed;
  }
}
