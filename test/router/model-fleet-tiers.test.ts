// The model fleet's index of offloaded tiers, hybrid models' KV cache groups
// and media keys, from KV events as engines publish them, on the wasm kernels
// and on the twins alike.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import type { BlockStored, KvEventBatch } from '../../router/kv-events.js';
import { ModelFleet, plainFields, type ModelFleetOptions, type RequestFields, type RoutedRequest } from '../../router/model-fleet.js';
import { creditedBlocks, tierOf, tierWeights } from '../../router/model-fleet/tiers.js';
import type { Admission } from '../../router/scheduler/contracts.js';

const BS = 4;
const w = (id: string) => ({ id, rank: 0 });
let n = 0;
const fields = (over: Partial<RequestFields> = {}): RequestFields => plainFields(`t${n++}`, over);
const prompt = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function setup(kernels: 'wasm' | 'reference', extra: Partial<ModelFleetOptions> = {}) {
  const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 3, kernels, ...extra });
  for (const id of ['a', 'b']) p.addWorker({ id, totalBlocks: 1000, maxBatchedTokens: 8192 });
  return p;
}

function store(tokens: number[], over: Partial<BlockStored> = {}, tag = 100n): BlockStored {
  const blocks = tokens.length / BS;
  return { type: 'stored', blockHashes: Array.from({ length: blocks }, (_, i) => tag + BigInt(i)), parentBlockHash: null, tokenIds: tokens, blockSize: BS, loraName: null, medium: 'GPU', ...over };
}

const batch = (...events: KvEventBatch['events']): KvEventBatch => ({ ts: 0, dpRank: null, events });

function admit(p: ModelFleet, r: RoutedRequest): Admission {
  const a = p.admit(r, null, null, null, []);
  if (RouterError.is(a)) throw a;
  return a;
}

describe('tiers: weights and credit', () => {
  it('credits each block at the best weight among the tiers holding it', () => {
    const weights = tierWeights();
    expect(creditedBlocks({ gpu: 2, cpu: 6, disk: 10 }, weights)).toBe(2 * 1 + 4 * 0.75 + 4 * 0.25);
    expect(creditedBlocks({ gpu: 6, cpu: 4, disk: 0 }, weights)).toBe(6);
    expect(creditedBlocks({ gpu: 0, cpu: 0, disk: 3 }, weights)).toBe(0.75);
    // a slower tier weighted above a faster one credits the blocks both hold at its weight
    expect(creditedBlocks({ gpu: 4, cpu: 4, disk: 0 }, tierWeights({ gpu: 0.5, cpu: 0.9 }))).toBeCloseTo(3.6, 12);
  });

  it('names tiers from the mediums vLLM and SGLang publish; a medium it does not know is none', () => {
    expect([null, 'GPU', 'gpu', 'CPU', 'cpu_tier1', 'STORAGE', 'disk', 'L3', 'NPU'].map(tierOf)).toEqual(['gpu', 'gpu', 'gpu', 'cpu', 'cpu', 'disk', 'disk', 'disk', null]);
  });

  it('rejects a weight outside [0, 1]', () => {
    expect(() => tierWeights({ cpu: 1.5 })).toThrow(/cpu/);
    expect(() => tierWeights({ disk: -0.1 })).toThrow(/disk/);
    expect(() => tierWeights({ gpu: Number.NaN })).toThrow(/gpu/);
  });
});

describe.each(['wasm', 'reference'] as const)('ModelFleet tiers (%s kernels)', (kernels) => {
  it('a block moved from GPU to CPU (stored on CPU, removed on GPU) is credited at the CPU weight, and explain shows it per tier', () => {
    const p = setup(kernels);
    const tokens = prompt(16);
    p.applyEvents(w('a'), batch(store(tokens)));
    // The engine offloads the chain and evicts its last two blocks from the GPU.
    p.applyEvents(w('a'), batch(store(tokens, { medium: 'CPU' }), { type: 'removed', blockHashes: [102n, 103n], medium: 'GPU' }));
    const r = p.prepare(fields(), prompt(20));
    const a = p.explain(r).workers.find((x) => x.worker === 'a')!;
    expect(a.overlapByTier).toEqual({ gpu: 2, cpu: 4, disk: 0 });
    expect(a.overlapBlocks).toBe(4);
    expect(a.creditedBlocks).toBe(2 + 2 * 0.75);
    // The projection charges the prefill the credit leaves: 20 tokens less 3.5 blocks of 4.
    expect(a.prefillTokens).toBe(20 - 3.5 * BS);
    expect(p.eventCounts('a')).toMatchObject({ stored: 2, removed: 1 });
  });

  it('prefers a GPU-resident prefix to a longer one on disk when the credit says so', () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(prompt(8))));
    p.applyEvents(w('b'), batch(store(prompt(24), { medium: 'STORAGE' })));
    // b: 6 blocks at 0.25 = 1.5 blocks; a: 2 blocks at 1
    expect(admit(p, p.prepare(fields(), prompt(24))).worker.id).toBe('a');
    // with the disk tier weighted like the GPU, the longer prefix wins
    const q = setup(kernels, { tierWeights: { disk: 1 } });
    q.applyEvents(w('a'), batch(store(prompt(8))));
    q.applyEvents(w('b'), batch(store(prompt(24), { medium: 'STORAGE' })));
    expect(admit(q, q.prepare(fields(), prompt(24))).worker.id).toBe('b');
  });

  it('books the prefill the credit leaves uncovered', () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(prompt(16), { medium: 'CPU' })));
    const r = p.prepare(fields(), prompt(16));
    expect(admit(p, r)).toMatchObject({ worker: { id: 'a' }, overlapBlocks: 4 });
    // 4 blocks at 0.75 save 12 of the 16 tokens
    expect(p.load().find((x) => x.worker === 'a')!.prefillTokens).toBe(4);
  });

  it('a GPU weight below 1 credits device blocks below their depth from the start', () => {
    const p = setup(kernels, { tierWeights: { gpu: 0.5 } });
    p.applyEvents(w('a'), batch(store(prompt(16))));
    expect(p.explain(p.prepare(fields(), prompt(16))).workers.find((x) => x.worker === 'a')).toMatchObject({ overlapBlocks: 4, creditedBlocks: 2 });
  });

  it('clearing, a stale stream and removing the worker forget every tier', () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(prompt(16), { medium: 'CPU' }), store(prompt(8))));
    p.applyEvents(w('a'), batch({ type: 'cleared' }));
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
    p.applyEvents(w('b'), batch(store(prompt(16), { medium: 'CPU' })));
    p.markStale(w('b'));
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
    p.applyEvents(w('a'), batch(store(prompt(16), { medium: 'CPU' })));
    p.removeWorker('a');
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
  });

  it('counts a placeholder store (hash only) and indexes nothing from it', () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch({ type: 'stored', blockHashes: [9n], parentBlockHash: null, tokenIds: [], blockSize: 0, loraName: null, medium: 'CPU', groupIdx: 0 }));
    expect(p.eventCounts('a')).toMatchObject({ stored: 0, placeholderStores: 1 });
    expect(p.cachedTokens(p.prepare(fields(), prompt(8)), null)).toBe(0);
  });
});

describe.each(['wasm', 'reference'] as const)('ModelFleet hybrid KV cache groups (%s kernels)', (kernels) => {
  it("indexes the full-attention group only; a sliding-window group's blocks are counted and ignored", () => {
    const p = setup(kernels);
    const full = store(prompt(16), { groupIdx: 0, specKind: 'full_attention' });
    const window = store(prompt(16, 500), { groupIdx: 1, specKind: 'sliding_window', slidingWindow: 8 }, 900n);
    p.applyEvents(w('a'), batch(full, window));
    expect(p.eventCounts('a')).toMatchObject({ stored: 1, otherGroups: 1 });
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(16);
    // the window group's tokens make no prefix
    expect(p.cachedTokens(p.prepare(fields(), prompt(16, 500)), null)).toBe(0);
  });

  it("never mixes groups in one chain: a second full-attention group's events, and removals naming another group, leave the index alone", () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(prompt(16), { groupIdx: 2, specKind: 'full_attention' })));
    // the same tokens in group 3 (engine hashes of its own) and a removal in group 3 of ids group 2 uses
    p.applyEvents(w('a'), batch(store(prompt(16), { groupIdx: 3, specKind: 'mla_attention' }, 500n), { type: 'removed', blockHashes: [100n, 101n, 102n, 103n], medium: 'GPU', groupIdx: 3 }));
    expect(p.eventCounts('a')).toMatchObject({ stored: 1, otherGroups: 2, removed: 0 });
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(16);
    // a removal in the prefix group applies
    p.applyEvents(w('a'), batch({ type: 'removed', blockHashes: [102n, 103n], medium: 'GPU', groupIdx: 2 }));
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(8);
  });

  it("a Mamba group's state blocks are ignored, and a removal without a group still applies", () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(prompt(16), { groupIdx: 0, specKind: 'full_attention' }), store(prompt(4, 700), { groupIdx: 1, specKind: 'mamba' }, 800n)));
    p.applyEvents(w('a'), batch({ type: 'removed', blockHashes: [103n], medium: 'GPU' }));
    expect(p.eventCounts('a')).toMatchObject({ stored: 1, otherGroups: 1, removed: 1 });
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(12);
  });
});

describe.each(['wasm', 'reference'] as const)('ModelFleet media keys (%s kernels)', (kernels) => {
  // 16 tokens: text in block 0, an image's 6-token run from token 5 (blocks 1 and 2), text after.
  const tokens = prompt(16);
  const image = (id: string) => [{ id, offset: 5, length: 6 }];
  const engineKeys = (id: string) => [null, [{ id, offset: 1 }], [{ id, offset: -3 }], null];

  it('a prompt with an image matches the worker that cached that image, past the blocks before it', () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(tokens, { media: engineKeys('cat') })));
    p.applyEvents(w('b'), batch(store(tokens, { media: engineKeys('dog') }, 200n)));
    const cat = p.prepare(fields({ media: image('cat') }), tokens);
    const a = admit(p, cat);
    expect(a).toMatchObject({ worker: { id: 'a' }, overlapBlocks: 4 });
    const explained = p.explain(p.prepare(fields({ media: image('dog') }), tokens)).workers;
    expect(explained.map((x) => [x.worker, x.overlapBlocks])).toEqual([
      ['a', 1],
      ['b', 4],
    ]);
  });

  it('the same tokens without the image match only the text block before it', () => {
    const p = setup(kernels);
    p.applyEvents(w('a'), batch(store(tokens, { media: engineKeys('cat') })));
    expect(p.cachedTokens(p.prepare(fields(), tokens), null)).toBe(4);
    // and an image at another position in the run is another key
    expect(p.cachedTokens(p.prepare(fields({ media: [{ id: 'cat', offset: 6, length: 5 }] }), tokens), null)).toBe(4);
  });
});
