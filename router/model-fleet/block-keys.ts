// What besides its tokens names a block, as vLLM hashes it: the LoRA adapter
// is an extra key of every block of the adapter's requests, and a cache salt
// an extra key of a request's first block only. Each block's hash folds in
// its parent's, so the salt still separates the whole chain; and because only
// the first block carries it, a stored event that continues a chain (it has
// a parent) needs nothing but the adapter name the event carries. The router
// mirrors the rule with seeds: block 0 of a salted prompt is hashed under the
// seed of (adapter, salt), every other block under the adapter's seed, and
// the prefix index keeps blocks under their parents, so two tenants' chains
// part at the first block.
import type { BlockStored } from '../kv-events.js';
import type { PromptHashes } from '../../bindings/decision-contract.js';

/** What ModelFleet needs of a block hasher here: the wasm one and its twin both fit. */
export interface KeyedHasher {
  localHashes(tokens: ArrayLike<number>, blockSize: number, seed?: bigint): BigUint64Array;
  sequenceHashes(local: BigUint64Array, seed?: bigint): BigUint64Array;
}

export type SeedOf = (lora: string | null, salt: string | null) => bigint;

/**
 * The cache salt of a stored event: an extra key of its first block when
 * that block starts a request (no parent). vLLM lists a block's keys as the
 * LoRA name, then media keys (tuples), then the salt (a string), then prompt
 * embedding hashes (bytes); so the salt is the first string after the LoRA
 * name. Null when the engine sent no extra keys (older engines: a salted
 * chain then reads as unsalted, which no salted request matches).
 */
export function storedSalt(event: BlockStored): string | null {
  if (event.parentBlockHash !== null) return null;
  const keys = event.extraKeys?.[0];
  if (!keys) return null;
  const strings = keys.filter((k): k is string => typeof k === 'string');
  if (event.loraName !== null && strings[0] === event.loraName) strings.shift();
  return strings.length > 0 && strings[0] !== '' ? strings[0]! : null;
}

/** The router's local hashes of a stored event's blocks, keyed by its adapter and, on a first block, its salt. */
export function storedLocalHashes(hasher: KeyedHasher, event: BlockStored, blockSize: number, seedOf: SeedOf): BigUint64Array {
  const local = hasher.localHashes(event.tokenIds, blockSize, seedOf(event.loraName, null));
  const salt = storedSalt(event);
  if (salt !== null && local.length > 0) local[0] = firstBlockHash(hasher, event.tokenIds, blockSize, seedOf(event.loraName, salt));
  return local;
}

/**
 * A prompt's hashes with its first block salted: local[0] rehashed under the
 * salted seed and the sequence chain recomputed from it (under the adapter's
 * seed, as the rest of the prompt). New arrays, so whatever was matched for
 * the unsalted hashes is not taken for these.
 */
export function saltedPrompt(hasher: KeyedHasher, prompt: PromptHashes, tokens: ArrayLike<number>, blockSize: number, seeds: { base: bigint; salted: bigint }): PromptHashes {
  if (prompt.local.length === 0) return prompt;
  const local = prompt.local.slice();
  local[0] = firstBlockHash(hasher, tokens, blockSize, seeds.salted);
  return { local, sequence: hasher.sequenceHashes(local, seeds.base) };
}

function firstBlockHash(hasher: KeyedHasher, tokens: ArrayLike<number>, blockSize: number, seed: bigint): bigint {
  const first = tokens instanceof Uint32Array ? tokens.subarray(0, blockSize) : Array.from({ length: blockSize }, (_, i) => tokens[i]!);
  return hasher.localHashes(first, blockSize, seed)[0]!;
}
