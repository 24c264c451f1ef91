// Token-block hashing: the wasm core through the zero-copy path (tokens
// already written into core memory) against the pure-TS twin, on one prompt
// of 100,000 tokens and one of 8,192, at block size 64 with chained sequence
// hashes (the whole hashing step of a routing decision: both lists in one
// pass of the core).
import { BlockHasher, DEFAULT_SEED } from '../bindings/block-hasher.js';
import { BlockHasher as TwinBlockHasher } from '../bindings/reference/block-hasher.js';
import type { BenchSuite, Figure } from './figures.js';
import { percentile, round, sampleMicros, sideBySide } from './stats.js';

const BLOCK_SIZE = 64;
/**
 * Hashing time before timing starts: the core's functions start in the
 * baseline compiler and switch to optimised code compiled in the background,
 * which takes a while on a busy machine.
 */
const WARMUP_TOKENS = 20_000_000;
/** A vocabulary the size of common tokenizers'. */
const VOCABULARY = 150_000;

/** Deterministic token ids (xorshift32), so every run hashes the same prompt. */
function promptTokens(n: number): Uint32Array {
  const out = new Uint32Array(n);
  let x = 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = (x >>> 0) % VOCABULARY;
  }
  return out;
}

interface Measured {
  /** wasm p50 in microseconds, from its own long run. */
  wasmMicros: number;
  /** twin p50 / wasm p50, from one side-by-side run. */
  speedup: number;
}

function measure(tokens: number, wasmSamples: number, pairedSamples: number): Measured {
  const prompt = promptTokens(tokens);
  const wasm = new BlockHasher();
  const twin = new TwinBlockHasher();
  wasm.tokenView(tokens).set(prompt);
  twin.tokenView(tokens).set(prompt);
  const hashWasm = () => void wasm.hashInto(tokens, BLOCK_SIZE, DEFAULT_SEED, true);
  const hashTwin = () => void twin.hashInto(tokens, BLOCK_SIZE, DEFAULT_SEED, true);
  // The wasm alone first: after the twin, the collector is still busy with its BigInts.
  const wasmAlone = sampleMicros(hashWasm, wasmSamples, Math.ceil(WARMUP_TOKENS / tokens));
  const [wasmPaired, twinPaired] = sideBySide(hashWasm, hashTwin, pairedSamples);
  return {
    wasmMicros: percentile(wasmAlone, 50),
    speedup: percentile(twinPaired, 50) / percentile(wasmPaired, 50),
  };
}

export const hashSuite: BenchSuite = {
  name: 'hash',
  async run({ quick }): Promise<Figure[]> {
    // The twin takes tens of milliseconds on the large prompt, so it gets few samples.
    const large = measure(100_000, quick ? 200 : 2000, quick ? 5 : 25);
    const small = measure(8192, quick ? 500 : 5000, quick ? 10 : 50);
    const how = `block size ${BLOCK_SIZE}, chained, seed 1337, zero-copy path, p50`;
    return [
      { key: 'hash_100k_tokens_ms', value: round(large.wasmMicros / 1000, 4), unit: 'ms', goal: '<= 0.05', note: how },
      { key: 'hash_speedup_vs_twin', value: round(large.speedup, 1), unit: 'x', goal: '>= 3', note: 'twin p50 / wasm p50, 100k tokens, side by side' },
      { key: 'hash_8k_tokens_us', value: round(small.wasmMicros, 2), unit: 'us', goal: '<= 4', note: how },
      { key: 'hash_8k_speedup_vs_twin', value: round(small.speedup, 1), unit: 'x', note: 'twin p50 / wasm p50, 8,192 tokens, side by side' },
    ];
  },
};
