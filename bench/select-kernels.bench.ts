// The selection kernels of one routing decision, wasm against the pure-TS
// twins side by side: project the request onto every worker, then
// eligibility (busy thresholds on), the default cost and a temperature-0 pick.
// Fleets of 10,000, 1,000 and 32 workers carry load: two active requests each,
// sharing a system prompt across groups of workers, and the request matches a
// cached prefix on a sparse set of them (the prefix index's output shape).
// Hashing and find-matches are not included; the lead's fused decision bench
// measures those end to end.
import { LoadTable } from '../bindings/load-table.js';
import { ReferenceLoadTable } from '../bindings/reference/load-table.js';
import { ReferenceSelector } from '../bindings/reference/selector.js';
import type { LoadLedger, OverlapList, ProjectionRequest, SelectOptions, WorkerSelector } from '../bindings/selection-contract.js';
import { Selector } from '../bindings/selector.js';
import type { BenchSuite, Figure } from './figures.js';
import { percentile, round, sampleMicros, sideBySide } from './stats.js';

const BLOCK_SIZE = 16;
const PROMPT_BLOCKS = 64;
/** Workers per system-prompt group: each group shares the prefix of its requests. */
const GROUP = 50;
const SYSTEM_BLOCKS = 16;
const OWN_BLOCKS = 24;
/** One worker in this many has a cached prefix of the request. */
const OVERLAP_EVERY = 20;

const OPTIONS: SelectOptions = { busy: { prefillFraction: 0.9, decodeFraction: 0.95 } };

/** Deterministic u32 stream (xorshift32) so every run builds the same fleet. */
function stream(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

function hashes(tag: number, from: number, count: number): BigUint64Array {
  const out = new BigUint64Array(count);
  for (let i = 0; i < count; i++) out[i] = (BigInt(tag) << 32n) | BigInt(from + i);
  return out;
}

function loadFleet(ledger: LoadLedger, workers: number): void {
  const next = stream(workers);
  for (let w = 0; w < workers; w++) {
    const slot = ledger.workers.ensure(`worker-${w}`);
    ledger.setWorker(slot, { totalBlocks: 4096, maxBatchedTokens: 8192 });
  }
  for (let w = 0; w < workers; w++) {
    const group = Math.floor(w / GROUP);
    for (let r = 0; r < 2; r++) {
      const prompt = new BigUint64Array(SYSTEM_BLOCKS + OWN_BLOCKS);
      prompt.set(hashes(group + 1, 0, SYSTEM_BLOCKS));
      prompt.set(hashes(1_000_000 + w * 2 + r, 0, OWN_BLOCKS), SYSTEM_BLOCKS);
      ledger.add(`req-${w}-${r}`, w, prompt, next() % 2048, 0);
    }
    if (w % 3 === 0) ledger.prefillComplete(`req-${w}-0`);
  }
}

/** The request: group 1's system prompt, then its own blocks; cached on every OVERLAP_EVERY-th worker. */
function decisionRequest(workers: number): ProjectionRequest {
  const seqHashes = new BigUint64Array(PROMPT_BLOCKS);
  seqHashes.set(hashes(1, 0, SYSTEM_BLOCKS));
  seqHashes.set(hashes(7_777_777, 0, PROMPT_BLOCKS - SYSTEM_BLOCKS), SYSTEM_BLOCKS);
  const next = stream(42);
  const slots: number[] = [];
  const depths: number[] = [];
  for (let w = 0; w < workers; w += OVERLAP_EVERY) {
    slots.push(w);
    depths.push(next() % PROMPT_BLOCKS);
  }
  const overlaps: OverlapList = { slots: Uint32Array.from(slots), depths: Uint32Array.from(depths) };
  return { seqHashes, promptTokens: PROMPT_BLOCKS * BLOCK_SIZE - 5, blockSize: BLOCK_SIZE, overlaps };
}

interface Measured {
  /** wasm p50 from its own run (the twin's heap churn would evict the wasm's columns from cache). */
  wasmMicros: number;
  /** twin p50 from the side-by-side run. */
  twinMicros: number;
  /** twin p50 / wasm p50, both from the side-by-side run. */
  speedup: number;
}

function measure(workers: number, wasmSamples: number, pairedSamples: number, inner: number): Measured {
  const wasmLedger = new LoadTable();
  const twinLedger = new ReferenceLoadTable();
  loadFleet(wasmLedger, workers);
  loadFleet(twinLedger, workers);
  const wasm = new Selector({ ledger: wasmLedger, seed: 1 });
  const twin = new ReferenceSelector({ ledger: twinLedger, seed: 1 });
  const request = decisionRequest(workers);
  const decide = (ledger: LoadLedger, selector: WorkerSelector) => () => {
    ledger.project(request);
    selector.select(OPTIONS);
  };
  // Both must make the same decision, or the comparison means nothing.
  wasmLedger.project(request);
  twinLedger.project(request);
  const a = wasm.select(OPTIONS);
  const b = twin.select(OPTIONS);
  if (a.slot !== b.slot || a.cost !== b.cost) throw new Error(`wasm picked ${a.slot} (${a.cost}), twin ${b.slot} (${b.cost})`);
  const [wasmPaired, twinPaired] = sideBySide(decide(wasmLedger, wasm), decide(twinLedger, twin), pairedSamples, inner);
  const wasmAlone = sampleMicros(decide(wasmLedger, wasm), wasmSamples, Math.min(100, wasmSamples), inner);
  const twinMicros = percentile(twinPaired, 50);
  return { wasmMicros: percentile(wasmAlone, 50), twinMicros, speedup: twinMicros / percentile(wasmPaired, 50) };
}

export const selectKernelsSuite: BenchSuite = {
  name: 'select-kernels',
  async run({ quick }): Promise<Figure[]> {
    // The twin projects worker by worker over every prompt block, so it gets few paired samples at 10k.
    const large = measure(10_000, quick ? 300 : 3000, quick ? 8 : 40, 1);
    const medium = measure(1000, quick ? 1000 : 10_000, quick ? 30 : 200, 1);
    const small = measure(32, quick ? 2000 : 20_000, quick ? 200 : 2000, 10);
    const how = 'project + eligibility + cost + pick, p50 of the wasm alone';
    const sizes = [
      ['10k', large, 'select_kernels_speedup_vs_twin'],
      ['1k', medium, 'select_kernels_speedup_vs_twin_1k_workers'],
      ['32', small, 'select_kernels_speedup_vs_twin_32_workers'],
    ] as const;
    const figures: Figure[] = [];
    for (const [label, m, speedupKey] of sizes) {
      figures.push(
        { key: `select_kernels_p50_us_${label}_workers`, value: round(m.wasmMicros, 2), unit: 'us', note: how },
        { key: speedupKey, value: round(m.speedup, 1), unit: 'x', note: 'twin p50 / wasm p50, side by side' },
        { key: `select_kernels_twin_p50_us_${label}_workers`, value: round(m.twinMicros, 2), unit: 'us', note: 'pure-TS twin, side by side' },
      );
    }
    return figures;
  },
};
