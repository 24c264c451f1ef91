// The selection kernels of one routing decision, wasm against the pure-TS
// twins side by side: project the request, then eligibility (busy thresholds
// on), the default cost and a temperature-0 pick. The wasm decides on its fast
// path (the touched workers plus the ledger's trees, picking exactly the
// worker the scan would) and, for comparison, through the full scan. Fleets
// of 10,000, 1,000 and 32 workers carry varied load: two active requests
// each, sharing a system prompt across groups of workers, and the request
// matches a cached prefix on a sparse set of them (every 20th worker: the
// prefix index's output shape). An idle 10k fleet with a cold request, where
// every worker ties, is measured on its own, and the 10k decision again for a
// second class whose busy thresholds have a fast-path view of their own.
// Hashing and find-matches are not included; the decision bench measures
// those end to end, through the fused core call.
import { LoadTable } from '../bindings/load-table.js';
import { ReferenceLoadTable } from '../bindings/reference/load-table.js';
import { ReferenceSelector } from '../bindings/reference/selector.js';
import type {
  FastPathConfig,
  LoadLedger,
  OverlapList,
  ProjectionRequest,
  SelectOptions,
  Selection,
  WorkerSelector,
} from '../bindings/selection-contract.js';
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
/** A second class's thresholds: a view of their own, kept next to the default's. */
const OTHER_CLASS: SelectOptions = { busy: { prefillTokens: 1500, decodeFraction: 0.9 } };

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

/** The model fleet's parameters, fixed ahead so the wasm selector can take its fast path. */
const FAST_PATH: FastPathConfig = { blockSize: BLOCK_SIZE, busy: OPTIONS.busy };
const FULL_SCAN: SelectOptions = { ...OPTIONS, fullScan: true };
/** Decisions before the fast path is timed: a microsecond call needs many to reach optimised code. */
const FAST_WARMUP = 1000;

/** An idle fleet and a cold request: every worker ties (the tie-break's worst case). */
function idleRequest(): ProjectionRequest {
  return { seqHashes: hashes(9_999_999, 0, PROMPT_BLOCKS), promptTokens: PROMPT_BLOCKS * BLOCK_SIZE, blockSize: BLOCK_SIZE };
}

interface Fleet {
  ledger: LoadTable;
  selector: Selector;
  request: ProjectionRequest;
}

function wasmFleet(workers: number, loaded: boolean): Fleet {
  const ledger = new LoadTable();
  if (loaded) loadFleet(ledger, workers);
  else for (let w = 0; w < workers; w++) ledger.setWorker(ledger.workers.ensure(`worker-${w}`), { totalBlocks: 4096, maxBatchedTokens: 8192 });
  const selector = new Selector({ ledger, seed: 1 });
  selector.enableFastPath(FAST_PATH);
  return { ledger, selector, request: loaded ? decisionRequest(workers) : idleRequest() };
}

const decide = (ledger: LoadLedger, selector: WorkerSelector, request: ProjectionRequest, options: SelectOptions) => () => {
  ledger.project(request);
  selector.select(options);
};

/** Fails the bench when the fast path did not answer, or answered differently from the full scan. */
function checkFastPath({ ledger, selector, request }: Fleet, scan: Selection, scanEligible: Uint8Array): void {
  ledger.project(request);
  const fast = selector.select(OPTIONS);
  if (selector.lastPath !== 'fast') throw new Error('the fast path did not answer the bench decision');
  if (fast.cost !== scan.cost || scanEligible[fast.slot] !== 1) {
    throw new Error(`fast path picked ${fast.slot} (${fast.cost}), the full scan's minimum is ${scan.cost}`);
  }
}

interface Measured {
  /** wasm fast-path p50 from its own run (the twin's heap churn would evict the wasm's columns from cache). */
  fastMicros: number;
  /** wasm full-scan p50 from its own run. */
  scanMicros: number;
  /** twin p50 from the side-by-side run. */
  twinMicros: number;
  /** twin p50 / wasm fast-path p50, both from the side-by-side run. */
  speedup: number;
}

function measure(workers: number, wasmSamples: number, pairedSamples: number, inner: number): Measured {
  const fleet = wasmFleet(workers, true);
  const twinLedger = new ReferenceLoadTable();
  loadFleet(twinLedger, workers);
  const twin = new ReferenceSelector({ ledger: twinLedger, seed: 1 });
  const { ledger, selector, request } = fleet;
  // The full scans must agree exactly (same seed, same draws), and the fast path on the minimum.
  ledger.project(request);
  twinLedger.project(request);
  const a = selector.select(FULL_SCAN);
  const b = twin.select(OPTIONS);
  if (a.slot !== b.slot || a.cost !== b.cost) throw new Error(`wasm picked ${a.slot} (${a.cost}), twin ${b.slot} (${b.cost})`);
  checkFastPath(fleet, b, twin.columns.eligible);
  const [fastPaired, twinPaired] = sideBySide(decide(ledger, selector, request, OPTIONS), decide(twinLedger, twin, request, OPTIONS), pairedSamples, inner);
  const fastAlone = sampleMicros(decide(ledger, selector, request, OPTIONS), wasmSamples, FAST_WARMUP, inner);
  const scanAlone = sampleMicros(decide(ledger, selector, request, FULL_SCAN), wasmSamples, Math.min(100, wasmSamples), inner);
  const twinMicros = percentile(twinPaired, 50);
  return {
    fastMicros: percentile(fastAlone, 50),
    scanMicros: percentile(scanAlone, 50),
    twinMicros,
    speedup: twinMicros / percentile(fastPaired, 50),
  };
}

/** The 10k decision for another class: p50 on the fast path with both classes' views open. */
function measureBusyClass(workers: number, samples: number): number {
  const fleet = wasmFleet(workers, true);
  const { ledger, selector, request } = fleet;
  selector.enableFastPath({ ...FAST_PATH, busy: OTHER_CLASS.busy });
  ledger.project(request);
  selector.select(OTHER_CLASS);
  if (selector.lastPath !== 'fast') throw new Error("the other class's decision did not take the fast path");
  return percentile(sampleMicros(decide(ledger, selector, request, OTHER_CLASS), samples, FAST_WARMUP), 50);
}

/** The idle fleet, where all workers tie: [fast path p50, full scan p50]. */
function measureIdle(workers: number, samples: number): [number, number] {
  const fleet = wasmFleet(workers, false);
  const { ledger, selector, request } = fleet;
  ledger.project(request);
  const scan = selector.select(FULL_SCAN);
  checkFastPath(fleet, scan, selector.columns.eligible.slice());
  const fast = sampleMicros(decide(ledger, selector, request, OPTIONS), samples, FAST_WARMUP);
  const full = sampleMicros(decide(ledger, selector, request, FULL_SCAN), samples);
  return [percentile(fast, 50), percentile(full, 50)];
}

export const selectKernelsSuite: BenchSuite = {
  name: 'select-kernels',
  async run({ quick }): Promise<Figure[]> {
    // The twin projects worker by worker over every prompt block, so it gets few paired samples at 10k.
    const large = measure(10_000, quick ? 300 : 3000, quick ? 8 : 40, 1);
    const medium = measure(1000, quick ? 1000 : 10_000, quick ? 30 : 200, 1);
    const small = measure(32, quick ? 2000 : 20_000, quick ? 200 : 2000, 10);
    const [idleFast, idleScan] = measureIdle(10_000, quick ? 300 : 3000);
    const busyClass = measureBusyClass(10_000, quick ? 300 : 3000);
    const how = 'project + eligibility + cost + pick on the fast path, p50 of the wasm alone';
    const scanHow = 'the same decision forced through the full scan (fullScan: true)';
    const sizes = [
      ['10k', large, 'select_kernels_speedup_vs_twin'],
      ['1k', medium, 'select_kernels_speedup_vs_twin_1k_workers'],
      ['32', small, 'select_kernels_speedup_vs_twin_32_workers'],
    ] as const;
    const figures: Figure[] = [];
    for (const [label, m, speedupKey] of sizes) {
      figures.push(
        { key: `select_kernels_p50_us_${label}_workers`, value: round(m.fastMicros, 2), unit: 'us', note: how },
        { key: `select_kernels_scan_p50_us_${label}_workers`, value: round(m.scanMicros, 2), unit: 'us', note: scanHow },
        { key: speedupKey, value: round(m.speedup, 1), unit: 'x', note: 'twin p50 / wasm fast-path p50, side by side' },
        { key: `select_kernels_twin_p50_us_${label}_workers`, value: round(m.twinMicros, 2), unit: 'us', note: 'pure-TS twin, side by side' },
      );
    }
    figures.push(
      { key: 'select_kernels_idle_p50_us_10k_workers', value: round(idleFast, 2), unit: 'us', note: 'idle fleet, cold request: all 10k workers tie; fast path' },
      { key: 'select_kernels_idle_scan_p50_us_10k_workers', value: round(idleScan, 2), unit: 'us', note: 'the idle decision through the full scan' },
      {
        key: 'select_kernels_p50_us_10k_workers_busy_class',
        value: round(busyClass, 2),
        unit: 'us',
        note: "the 10k decision for a class whose busy thresholds are not the default's: fast path, its own view",
      },
    );
    return figures;
  },
};
