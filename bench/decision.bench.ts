// npm run bench -- --only decision
//
// One whole routing decision through the model fleet, as the server makes it:
// hash an 8,192-token prompt at block size 64 and find its cached prefixes
// (prepare: one core call), then project load onto the workers it touches,
// cost and pick (choose: one core call), with busy thresholds on. The fleets
// carry load (two requests in flight per worker) and cached prefixes: the
// prompt's first 16 blocks on a tenth of the workers, its first 64 on a
// hundredth of those, all 128 on one; every worker also holds other chains.
// The same decisions run on the pure-TS twins side by side for the speedup.
// At 10,000 workers it also measures decisions under constraints (required
// and preferred taints and an earlier failure excluded; a pin), for a class
// whose busy thresholds are not the default's, and the cost of a decision on
// an idle fleet of 10,000 against one of 100 (what grows with the fleet).
import { VirtualClock } from '../router/clock.js';
import { RouterError } from '../router/errors.js';
import type { KvEventBatch } from '../router/kv-events.js';
import { ModelFleet, plainFields, type RequestFields } from '../router/model-fleet.js';
import { createSelectionPolicy } from '../router/selection/policies/index.js';
import type { BusyThresholds } from '../router/scheduler/contracts.js';
import type { WorkerKey } from '../bindings/workers.js';
import type { BenchSuite, Figure } from './figures.js';
import { percentile, round, sampleMicros, sideBySide } from './stats.js';

const BLOCK = 64;
const PROMPT_TOKENS = 8192;
const OTHER_BLOCKS = 8;
const BUSY: BusyThresholds = { prefillFraction: 0.9, decodeFraction: 0.95 };
/** Another class's thresholds: its own fast-path view. */
const OTHER_BUSY: BusyThresholds = { prefillTokens: 4096, decodeFraction: 0.9 };
/** Taints of the constrained fleet: a zone on every other worker, a fast GPU on every fourth. */
const ZONE = 'zone=a';
const FAST = 'gpu=fast';

// As the tokenizer hands them over: a Uint32Array.
const promptTokens = Uint32Array.from({ length: PROMPT_TOKENS }, (_, i) => 1_000_000 + i);

function chainEvent(tokens: number[], tag: bigint): KvEventBatch {
  const blocks = tokens.length / BLOCK;
  return {
    ts: 0,
    dpRank: 0,
    events: [{ type: 'stored', blockHashes: Array.from({ length: blocks }, (_, i) => tag + BigInt(i)), parentBlockHash: null, tokenIds: tokens, blockSize: BLOCK, loraName: null, medium: 'GPU' }],
  };
}

let ids = 0;
function fields(overrides: Partial<RequestFields> = {}): RequestFields {
  return plainFields(`d${ids++}`, overrides);
}

interface FleetOptions {
  kernels: 'wasm' | 'reference';
  /** Workers carry the bench's taints. */
  taints?: boolean;
  /** No load and no cached prefixes. */
  idle?: boolean;
  /** The selection policy (default kv, the figures' reference; ttft for its own figures). */
  policy?: 'kv' | 'ttft';
}

function buildFleet(workers: number, { kernels, taints = false, idle = false, policy = 'kv' }: FleetOptions): ModelFleet {
  const selection = createSelectionPolicy(policy, {});
  const p = new ModelFleet({ model: 'bench', blockSize: BLOCK, clock: new VirtualClock(0), seed: 1, kernels, fastPathBusy: BUSY, policy: selection });
  const holders16 = Math.max(1, Math.floor(workers / 10));
  const holders64 = Math.max(1, Math.floor(holders16 / 100));
  for (let w = 0; w < workers; w++) {
    const id = `w${w}`;
    const workerTaints = taints ? [...(w % 2 === 0 ? [ZONE] : []), ...(w % 4 === 0 ? [FAST] : [])] : undefined;
    p.addWorker({ id, totalBlocks: 16_384, maxBatchedTokens: 8192, taints: workerTaints });
    if (idle) continue;
    const worker = { id, rank: 0 };
    const depth = w === 0 ? 128 : w < holders64 ? 64 : w < holders16 ? 16 : 0;
    if (depth > 0) p.applyEvents(worker, chainEvent([...promptTokens.subarray(0, depth * BLOCK)], BigInt(w) << 20n));
    const other = Array.from({ length: OTHER_BLOCKS * BLOCK }, (_, i) => 50_000_000 + w * OTHER_BLOCKS * BLOCK + i);
    p.applyEvents(worker, chainEvent(other, (BigInt(w) << 20n) + 1000n));
    for (let r = 0; r < 2; r++) {
      const inFlight = p.prepare(fields(), other.slice(0, (r + 1) * 4 * BLOCK));
      p.book(inFlight, worker, (w * 37 + r * 11) % 4 === 0 ? 0 : ((w * 97 + r) % 8) * BLOCK);
    }
  }
  return p;
}

interface Decision {
  request?: Partial<RequestFields>;
  busy?: BusyThresholds;
  exclude?: readonly WorkerKey[];
}

function decide(p: ModelFleet, { request = {}, busy = BUSY, exclude = [] }: Decision = {}): () => void {
  return () => {
    const routed = p.prepare(fields(request), promptTokens);
    const choice = p.choose(routed, null, busy, null, exclude);
    if (RouterError.is(choice)) throw choice;
  };
}

/** The constrained decision: required and preferred taints, and the worker with the deepest prefix failed already. */
const CONSTRAINED: Decision = {
  request: { requiredTaints: [ZONE], preferredTaints: [{ taint: FAST, weight: 0.5 }] },
  exclude: [{ id: 'w0', rank: 0 }],
};

/** Warm-up time: the core's functions start in the baseline compiler and switch to optimised code compiled in the background. */
const WARMUP_MS = 400;

/** Samples after a warm-up long enough for the optimised code. */
function measure(fn: () => void, samples: number): Float64Array {
  const until = performance.now() + WARMUP_MS;
  while (performance.now() < until) fn();
  return sampleMicros(fn, samples, 0);
}

export const decisionSuite: BenchSuite = {
  name: 'decision',
  async run({ quick }): Promise<Figure[]> {
    const figures: Figure[] = [];
    const how = 'hash 8k tokens + find matches + project + cost + pick';
    const sizes = [
      { workers: 10_000, samples: quick ? 300 : 2000, paired: quick ? 5 : 20 },
      { workers: 1000, samples: quick ? 500 : 5000, paired: quick ? 20 : 100 },
      { workers: 32, samples: quick ? 1000 : 10_000, paired: quick ? 50 : 400 },
    ];
    for (const { workers, samples, paired } of sizes) {
      const label = workers === 10_000 ? '10k' : workers === 1000 ? '1k' : String(workers);
      const wasm = buildFleet(workers, { kernels: 'wasm' });
      const alone = measure(decide(wasm), samples);
      figures.push({ key: `select_p50_us_${label}_workers`, value: round(percentile(alone, 50), 2), unit: 'us', goal: workers === 10_000 ? '<= 15' : undefined, note: how });
      if (workers === 10_000) {
        figures.push({ key: 'select_p99_us_10k_workers', value: round(percentile(alone, 99), 2), unit: 'us', goal: '<= 40' });
        // The ttft cost on the same fleet, and side by side with kv (the ratio is what to read on a busy machine).
        const ttft = buildFleet(workers, { kernels: 'wasm', policy: 'ttft' });
        const ttftAlone = measure(decide(ttft), samples);
        figures.push({ key: 'select_p50_us_10k_workers_ttft', value: round(percentile(ttftAlone, 50), 2), unit: 'us', goal: '<= 15', note: `${how}, by the ttft cost` });
        const [byKv, byTtft] = sideBySide(decide(wasm), decide(ttft), paired * 20);
        figures.push({
          key: 'select_ttft_over_kv_10k_workers',
          value: round(percentile(byTtft, 50) / percentile(byKv, 50), 2),
          unit: 'x',
          goal: '<= 1.1',
          note: 'ttft p50 / kv p50, the same decisions side by side',
        });
        const prepared = wasm.prepare(fields(), promptTokens);
        const choose = measure(() => {
          if (RouterError.is(wasm.choose(prepared, null, BUSY))) throw new Error('no worker');
        }, samples);
        figures.push({
          key: 'select_choose_p50_us_10k_workers',
          value: round(percentile(choose, 50), 2),
          unit: 'us',
          note: 'the decision alone on a prepared prompt (its matches in core memory): project + cost + pick, one core call',
        });
        const busyClass = measure(decide(wasm, { busy: OTHER_BUSY }), samples);
        figures.push({
          key: 'select_p50_us_10k_workers_busy_class',
          value: round(percentile(busyClass, 50), 2),
          unit: 'us',
          goal: '<= 15',
          note: "the same decision for a class whose busy thresholds are not the default's (its own fast-path view)",
        });
        const tainted = buildFleet(workers, { kernels: 'wasm', taints: true });
        const constrained = measure(decide(tainted, CONSTRAINED), samples);
        figures.push({
          key: 'select_p50_us_10k_workers_constrained',
          value: round(percentile(constrained, 50), 2),
          unit: 'us',
          goal: '<= 15',
          note: 'a required taint (half the fleet), a preferred taint (a quarter) and the deepest-cached worker excluded',
        });
        const pinned = measure(decide(tainted, { request: { pin: { id: 'w4', rank: 0 } } }), samples);
        figures.push({ key: 'select_p50_us_10k_workers_pinned', value: round(percentile(pinned, 50), 2), unit: 'us', note: 'pinned to one worker' });
      }
      if (workers >= 1000) {
        const twin = buildFleet(workers, { kernels: 'reference' });
        const [w, t] = sideBySide(decide(wasm), decide(twin), paired);
        const speedup = percentile(t, 50) / percentile(w, 50);
        figures.push({
          key: workers === 10_000 ? 'select_speedup_vs_twin' : `select_speedup_vs_twin_${label}_workers`,
          value: round(speedup, 1),
          unit: 'x',
          goal: workers === 10_000 ? '>= 2' : undefined,
          note: 'twin p50 / wasm p50, the same decisions side by side',
        });
      }
    }
    // What grows with the fleet: idle fleets of 100 and 10,000, a cold prompt, side by side.
    const small = buildFleet(100, { kernels: 'wasm', idle: true });
    const large = buildFleet(10_000, { kernels: 'wasm', idle: true });
    const [a, b] = sideBySide(decide(small), decide(large), quick ? 500 : 4000);
    figures.push({
      key: 'decision_cost_ratio_10k_vs_100_idle_workers',
      value: round(percentile(b, 50) / percentile(a, 50), 2),
      unit: 'x',
      goal: '<= 2',
      note: 'p50 of one decision on 10,000 idle workers over 100, side by side',
    });
    return figures;
  },
};
