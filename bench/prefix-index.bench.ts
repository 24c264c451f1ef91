// Prefix index: event ingest and findMatches, wasm and twin side by side.
//
// ingest: 1,000 workers publishing KV events as vLLM does (see EngineFleet):
// stored events of 16-64 new blocks chained to their parents, and removals
// keeping each worker at its cache capacity, applied in steady state. Only
// stored events are timed; the absolute figure comes from the wasm index
// running alone, the speedup from batches alternating between the two.
//
// findMatches: a 128-block prompt over 10,000 workers. Its first 16 blocks
// are held by 1,000 workers (each continuing with blocks of its own), its
// first 64 by 10 of them and all 128 by one; besides, every worker holds two
// conversations of 51 blocks under 500 shared system prompts: over 1,000,000
// more (worker, block) pairs (--quick: a fifth of the workers hold them).
// A prompt whose first block nobody holds measures the one-lookup miss.
import { PrefixIndex } from '../bindings/prefix-index.js';
import { ReferencePrefixIndex } from '../bindings/reference/prefix-index.js';
import type { PrefixIndexApi } from '../bindings/prefix-index-api.js';
import type { WorkerKey } from '../bindings/workers.js';
import type { BenchOptions, BenchSuite, Figure } from './figures.js';
import { median, percentile, round, sampleMicros, sideBySide } from './stats.js';

/** Deterministic u64 hashes, many at a time (xorshift32 into a shared buffer). */
class Hashes {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0 || 1;
  }
  take(n: number): BigUint64Array {
    const words = new Uint32Array(n * 2);
    let s = this.state;
    for (let i = 0; i < words.length; i++) {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      words[i] = s >>> 0;
    }
    this.state = s;
    return new BigUint64Array(words.buffer);
  }
  /** An integer in [0, n). */
  pick(n: number): number {
    let s = this.state;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    this.state = s;
    return (s >>> 0) % n;
  }
}

interface StoredEvent {
  worker: WorkerKey;
  parent: bigint | null;
  external: BigUint64Array;
  local: BigUint64Array;
}

interface RemovedEvent {
  worker: WorkerKey;
  external: BigUint64Array;
}

function workerKeys(n: number): WorkerKey[] {
  return Array.from({ length: n }, (_, i) => ({ id: `worker-${i}`, rank: 0 }));
}

interface Prompt {
  local: BigUint64Array;
  external: BigUint64Array;
}

interface Conversation {
  prompt: Prompt;
  chains: BigUint64Array[];
}

/**
 * Engines publishing KV events at a fixed cache capacity, the way vLLM does:
 * each step is one stored event of 16-64 newly computed blocks, either a new
 * conversation under one of 200 shared system prompts (the prompt's blocks
 * included only when the worker does not cache it yet; otherwise the event
 * hangs off the prompt's last block) or a continuation of the worker's latest
 * conversation. Removed events then evict least recently used blocks back
 * under `capacity`: the oldest conversation from its tail, and a prompt once
 * no conversation of the worker uses it.
 */
class EngineFleet {
  private readonly prompts: Prompt[];
  private readonly held = new Map<WorkerKey, { conversations: Conversation[]; prompts: Map<Prompt, number>; blocks: number }>();

  constructor(
    private readonly workers: WorkerKey[],
    private readonly capacity: number,
    private readonly rnd: Hashes,
  ) {
    this.prompts = Array.from({ length: 200 }, () => {
      const length = 8 + rnd.pick(9);
      return { local: rnd.take(length), external: rnd.take(length) };
    });
  }

  step(): { stored: StoredEvent; removed: RemovedEvent[] } {
    const rnd = this.rnd;
    const worker = this.workers[rnd.pick(this.workers.length)]!;
    let held = this.held.get(worker);
    if (!held) this.held.set(worker, (held = { conversations: [], prompts: new Map(), blocks: 0 }));
    const length = 16 + rnd.pick(49);
    const latest = held.conversations.at(-1);
    let stored: StoredEvent;
    if (latest && rnd.pick(3) !== 0) {
      const tail = latest.chains.at(-1)!;
      stored = { worker, parent: tail[tail.length - 1]!, external: rnd.take(length), local: rnd.take(length) };
      latest.chains.push(stored.external);
      held.blocks += length;
    } else {
      const prompt = this.prompts[rnd.pick(this.prompts.length)]!;
      const users = held.prompts.get(prompt) ?? 0;
      held.prompts.set(prompt, users + 1);
      if (users > 0) {
        stored = { worker, parent: prompt.external[prompt.external.length - 1]!, external: rnd.take(length), local: rnd.take(length) };
        held.blocks += length;
      } else {
        const own = Math.max(1, length - prompt.local.length);
        const local = new BigUint64Array(prompt.local.length + own);
        const external = new BigUint64Array(local.length);
        local.set(prompt.local);
        local.set(rnd.take(own), prompt.local.length);
        external.set(prompt.external);
        external.set(rnd.take(own), prompt.local.length);
        stored = { worker, parent: null, external, local };
        held.blocks += local.length;
      }
      // The conversation's own part of the first event (the prompt is tracked apart).
      const ownStart = users > 0 ? 0 : prompt.external.length;
      held.conversations.push({ prompt, chains: [stored.external.subarray(ownStart)] });
    }
    const removed: RemovedEvent[] = [];
    while (held.blocks > this.capacity && held.conversations.length > 1) {
      const oldest = held.conversations[0]!;
      const chain = oldest.chains.pop()!;
      held.blocks -= chain.length;
      removed.push({ worker, external: chain.slice().reverse() });
      if (oldest.chains.length > 0) continue;
      held.conversations.shift();
      const users = held.prompts.get(oldest.prompt)! - 1;
      if (users > 0) {
        held.prompts.set(oldest.prompt, users);
      } else {
        held.prompts.delete(oldest.prompt);
        held.blocks -= oldest.prompt.external.length;
        removed.push({ worker, external: oldest.prompt.external.slice().reverse() });
      }
    }
    return { stored, removed };
  }
}

function apply(index: PrefixIndexApi, events: readonly StoredEvent[]): void {
  for (const e of events) index.applyStored(e.worker, e.parent, e.external, e.local);
}

function evict(index: PrefixIndexApi, events: readonly RemovedEvent[]): void {
  for (const e of events) index.applyRemoved(e.worker, e.external);
}

/** Replays steps, evictions just after their store as engines publish them; returns the microseconds spent in stored events. */
function replay(index: PrefixIndexApi, steps: readonly { stored: StoredEvent; removed: RemovedEvent[] }[]): number {
  let ms = 0;
  for (const { stored, removed } of steps) {
    const t0 = performance.now();
    index.applyStored(stored.worker, stored.parent, stored.external, stored.local);
    ms += performance.now() - t0;
    evict(index, removed);
  }
  return ms * 1000;
}

async function ingest(quick: boolean): Promise<Figure[]> {
  const capacity = quick ? 200 : 1000;
  const batch = quick ? 300 : 1000;
  const samples = quick ? 5 : 12;
  const fleet = new EngineFleet(workerKeys(1000), capacity, new Hashes(7));
  const stepsOf = () => Array.from({ length: batch }, () => fleet.step());
  const blocksOf = (steps: ReturnType<typeof stepsOf>) => steps.reduce((n, step) => n + step.stored.local.length, 0);
  const history: ReturnType<typeof stepsOf>[] = [];
  const wasm = new PrefixIndex();
  // Fill every worker's cache first: ingest is measured in steady state,
  // where stores and evictions balance and the index no longer grows.
  for (let filled = 0; filled < capacity * 1000 * 2; ) {
    const steps = stepsOf();
    replay(wasm, steps);
    history.push(steps);
    filled += blocksOf(steps);
  }
  // Throughput: the wasm index alone, before the twin exists, so the twin's
  // heap (and the collector's work on it) stays out of the samples.
  const rates: number[] = [];
  for (let s = 0; s < samples; s++) {
    const steps = stepsOf();
    rates.push(blocksOf(steps) / (replay(wasm, steps) / 1e6));
    history.push(steps);
  }
  // Speedup: the twin replays the same history, then both take each batch in turn.
  const twin = new ReferencePrefixIndex();
  for (const steps of history.splice(0)) replay(twin, steps);
  const ratios: number[] = [];
  for (let s = 0; s < samples; s++) {
    const steps = stepsOf();
    const w = replay(wasm, steps);
    ratios.push(replay(twin, steps) / w);
  }
  const stats = wasm.stats();
  if (stats.unknownParents + stats.unknownRemovals > 0 || stats.blocks !== twin.stats().blocks) {
    throw new Error(`ingest fixture broken: ${stats.unknownParents} unknown parents, ${stats.unknownRemovals} unknown removals`);
  }
  return [
    {
      key: 'ingest_blocks_per_s',
      value: Math.round(median(rates)),
      unit: 'blocks/s',
      goal: '>= 5000000',
      note: `1,000 workers at ${capacity} blocks each, evictions interleaved (untimed); median of ${samples} batches of ${batch} stored events; index: ${stats.nodes} nodes, ${stats.blocks} blocks`,
    },
    { key: 'ingest_speedup_vs_twin', value: round(median(ratios), 2), unit: 'x', note: 'median over alternating batches of twin time / wasm time' },
  ];
}

interface MatchFixture {
  prompt: BigUint64Array;
  miss: BigUint64Array;
  build(index: PrefixIndexApi): void;
  /** (worker, block) pairs of the prompt's holders, for telling the rest apart. */
  holderBlocks: number;
}

function matchFixture(quick: boolean): MatchFixture {
  const rnd = new Hashes(11);
  const workers = workerKeys(10_000);
  const prompt = rnd.take(128);
  const promptIds = rnd.take(128); // engines with the same hashing give a block the same id
  const systems = Array.from({ length: 500 }, () => ({ local: rnd.take(16), external: rnd.take(16) }));
  const conversations = quick ? 0.2 : 1;
  const own: StoredEvent[] = [];
  for (const [w, worker] of workers.entries()) {
    // Two conversations per worker (a fifth of the workers with --quick).
    if (w % Math.round(1 / conversations) !== 0) continue;
    for (let c = 0; c < 2; c++) {
      const system = systems[rnd.pick(systems.length)]!;
      own.push({ worker, parent: null, external: system.external, local: system.local });
      own.push({ worker, parent: system.external[15]!, external: rnd.take(35), local: rnd.take(35) });
    }
  }
  const holders: StoredEvent[] = [];
  let holderBlocks = 0;
  for (let w = 0; w < 1000; w++) {
    const depth = w === 0 ? 128 : w < 10 ? 64 : 16;
    const worker = workers[w]!;
    holders.push({ worker, parent: null, external: promptIds.subarray(0, depth), local: prompt.subarray(0, depth) });
    holders.push({ worker, parent: promptIds[depth - 1]!, external: rnd.take(32), local: rnd.take(32) });
    holderBlocks += depth + 32;
  }
  return {
    prompt,
    miss: rnd.take(128),
    holderBlocks,
    build(index) {
      apply(index, own);
      apply(index, holders);
    },
  };
}

async function findMatches(quick: boolean): Promise<Figure[]> {
  const fixture = matchFixture(quick);
  const wasm = new PrefixIndex();
  const twin = new ReferencePrefixIndex();
  fixture.build(wasm);
  fixture.build(twin);
  const expected = twin.findMatches(fixture.prompt);
  const got = wasm.findMatches(fixture.prompt);
  if (got.count !== 1000 || expected.count !== 1000) throw new Error(`fixture broken: ${got.count} and ${expected.count} workers matched, expected 1000`);
  // Latency: the wasm index alone (as the router calls it), so the twin's
  // allocations and cache traffic do not land in its samples.
  const wasmMicros = sampleMicros(() => wasm.findMatches(fixture.prompt), quick ? 2000 : 10_000);
  const missMicros = sampleMicros(() => wasm.findMatches(fixture.miss), quick ? 500 : 2000, 100, 20);
  // Speedup: both in turn, sharing the machine's noise.
  const [wasmSide, twinSide] = sideBySide(
    () => wasm.findMatches(fixture.prompt),
    () => twin.findMatches(fixture.prompt),
    quick ? 300 : 1000,
  );
  const stats = wasm.stats();
  const scene = `10,000 workers; prompt held 16/64/128 deep by 1,000/10/1; index: ${stats.nodes} nodes, ${stats.blocks} (worker, block) pairs, ${stats.blocks - fixture.holderBlocks} besides the prompt's holders`;
  return [
    { key: 'find_matches_p50_us_10k_workers', value: round(percentile(wasmMicros, 50), 2), unit: 'us', goal: '<= 5', note: scene },
    { key: 'find_matches_p99_us_10k_workers', value: round(percentile(wasmMicros, 99), 2), unit: 'us' },
    { key: 'find_matches_speedup_vs_twin', value: round(percentile(twinSide, 50) / percentile(wasmSide, 50), 1), unit: 'x', note: 'medians of alternating calls, twin / wasm' },
    { key: 'find_matches_miss_p50_us', value: round(percentile(missMicros, 50), 3), unit: 'us', note: 'first block unknown: one lookup' },
  ];
}

export const prefixIndexSuite: BenchSuite = {
  name: 'prefix-index',
  async run({ quick }: BenchOptions): Promise<Figure[]> {
    return [...(await ingest(quick)), ...(await findMatches(quick))];
  },
};
