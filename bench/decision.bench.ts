// npm run bench -- --only decision
//
// One whole routing decision through the partition, as the server makes it:
// hash an 8,192-token prompt at block size 64, find its cached prefixes, project
// load onto every worker, cost and pick, with busy thresholds on. The fleets
// carry load (two requests in flight per worker) and cached prefixes: the
// prompt's first 16 blocks on a tenth of the workers, its first 64 on a
// hundredth of those, all 128 on one; every worker also holds other chains.
// The same decisions run on the pure-TS twins side by side for the speedup.
import { VirtualClock } from '../router/clock.js';
import { RouterError } from '../router/errors.js';
import type { KvEventBatch } from '../router/kv-events.js';
import { Partition, plainFields, type RequestFields } from '../router/partition.js';
import type { BenchSuite, Figure } from './figures.js';
import { percentile, round, sampleMicros, sideBySide } from './stats.js';

const BLOCK = 64;
const PROMPT_TOKENS = 8192;
const OTHER_BLOCKS = 8;
const BUSY = { prefillFraction: 0.9, decodeFraction: 0.95 };

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
function fields(): RequestFields {
  return plainFields(`d${ids++}`);
}

function buildFleet(workers: number, kernels: 'wasm' | 'reference'): Partition {
  const p = new Partition({ model: 'bench', blockSize: BLOCK, clock: new VirtualClock(0), seed: 1, kernels, fastPathBusy: BUSY });
  const holders16 = Math.max(1, Math.floor(workers / 10));
  const holders64 = Math.max(1, Math.floor(holders16 / 100));
  for (let w = 0; w < workers; w++) {
    const id = `w${w}`;
    p.addWorker({ id, totalBlocks: 16_384, maxBatchedTokens: 8192 });
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

function decide(p: Partition): () => void {
  return () => {
    const request = p.prepare(fields(), promptTokens);
    const choice = p.choose(request, null, BUSY);
    if (RouterError.is(choice)) throw choice;
  };
}

export const decisionSuite: BenchSuite = {
  name: 'decision',
  async run({ quick }): Promise<Figure[]> {
    const figures: Figure[] = [];
    const sizes = [
      { workers: 10_000, samples: quick ? 300 : 2000, paired: quick ? 5 : 20 },
      { workers: 1000, samples: quick ? 500 : 5000, paired: quick ? 20 : 100 },
      { workers: 32, samples: quick ? 1000 : 10_000, paired: quick ? 50 : 400 },
    ];
    for (const { workers, samples, paired } of sizes) {
      const label = workers === 10_000 ? '10k' : workers === 1000 ? '1k' : String(workers);
      const wasm = buildFleet(workers, 'wasm');
      const alone = sampleMicros(decide(wasm), samples, Math.min(200, samples));
      figures.push({
        key: `select_p50_us_${label}_workers`,
        value: round(percentile(alone, 50), 2),
        unit: 'us',
        goal: workers === 10_000 ? '<= 20' : undefined,
        note: 'hash 8k tokens + find matches + project + cost + pick',
      });
      if (workers === 10_000) figures.push({ key: 'select_p99_us_10k_workers', value: round(percentile(alone, 99), 2), unit: 'us' });
      if (workers >= 1000) {
        const twin = buildFleet(workers, 'reference');
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
    return figures;
  },
};
