import { describe, expect, it } from 'vitest';
import { BlockHasher } from '../../bindings/reference/block-hasher.js';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { ModelFleet, plainFields, type RequestFields, type RoutedRequest, type WorkerSpec } from '../../router/model-fleet.js';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import { WorkerInputs } from '../../router/worker-inputs.js';

const BS = 4;
const w = (id: string, rank = 0) => ({ id, rank });
const spec = (id: string, extra: Partial<WorkerSpec> = {}): WorkerSpec => ({ id, totalBlocks: 1000, maxBatchedTokens: 8192, ...extra });

let n = 0;
const fields = (over: Partial<RequestFields> = {}): RequestFields => plainFields(`q${n++}`, over);

function setup(workers: string[] = ['a', 'b', 'c'], policy = 'kv', extra: Partial<WorkerSpec> = {}) {
  const clock = new VirtualClock(0);
  const p = new ModelFleet({ model: 'm', blockSize: BS, clock, seed: 7, policy: createSelectionPolicy(policy) });
  for (const id of workers) p.addWorker(spec(id, extra));
  return { p, clock };
}

/** What an engine publishes after caching `tokens` (whole blocks), with engine hashes of its own. */
function stored(tokens: number[], parent: bigint | null = null, engineTag = 1000n, lora: string | null = null): KvEventBatch {
  const blocks = Math.floor(tokens.length / BS);
  const blockHashes = Array.from({ length: blocks }, (_, i) => engineTag + BigInt(i));
  return { ts: 0, dpRank: 0, events: [{ type: 'stored', blockHashes, parentBlockHash: parent, tokenIds: tokens.slice(0, blocks * BS), blockSize: BS, loraName: lora, medium: 'GPU' }] };
}

const prompt = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function admit(p: ModelFleet, r: RoutedRequest, busy = null as Parameters<ModelFleet['admit']>[2], target: { id: string; rank: number } | null = null): Admission {
  const a = p.admit(r, r.allowedWorkers, busy, target, []);
  if (RouterError.is(a)) throw a;
  return a;
}

describe('ModelFleet: cache-aware placement from KV events', () => {
  it('sends a prompt to the worker whose cache holds its prefix, with the overlap and cached tokens', () => {
    const { p } = setup();
    p.applyEvents(w('b'), stored(prompt(16)));
    const r = p.prepare(fields(), prompt(20));
    const a = admit(p, r);
    expect(a.worker.id).toBe('b');
    expect(a.overlapBlocks).toBe(4);
    expect(a.cachedTokens).toBe(16);
    expect(p.cachedTokens(r, null)).toBe(16);
  });

  it('recomputes block hashes from the event tokens: the engine hashes are only ids', () => {
    const { p } = setup();
    p.applyEvents(w('c'), stored(prompt(8), null, 0xdeadbeefn));
    p.applyEvents(w('c'), stored(prompt(8, 9), 0xdeadbeefn + 1n, 0xfeedn));
    const r = p.prepare(fields(), prompt(16));
    expect(admit(p, r)).toMatchObject({ worker: { id: 'c' }, overlapBlocks: 4 });
  });

  it('skips a stored event whose block size differs from the router block size, and counts it', () => {
    const { p } = setup();
    const batch = stored(prompt(16));
    (batch.events[0] as { blockSize: number }).blockSize = 8;
    p.applyEvents(w('a'), batch);
    expect(p.eventCounts('a')).toMatchObject({ stored: 0, blockSizeMismatches: 1 });
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
  });

  it('keys blocks by LoRA adapter: a LoRA cache does not match the base model prompt', () => {
    const { p } = setup();
    p.applyEvents(w('a'), stored(prompt(16), null, 1000n, 'sql-adapter'));
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
    expect(p.cachedTokens(p.prepare(fields({ loraName: 'sql-adapter' }), prompt(16)), null)).toBe(16);
  });

  it('indexes offloaded tiers, skips a medium it does not know, and forgets a stale worker', () => {
    const { p } = setup();
    const cpu = stored(prompt(16));
    (cpu.events[0] as { medium: string }).medium = 'CPU';
    const unknown = stored(prompt(16));
    (unknown.events[0] as { medium: string }).medium = 'NPU';
    p.applyEvents(w('a'), cpu);
    p.applyEvents(w('a'), unknown);
    expect(p.eventCounts('a')).toMatchObject({ stored: 1, otherMedium: 1 });
    p.applyEvents(w('a'), { ts: 0, events: [{ type: 'cleared' }], dpRank: null });
    p.applyEvents(w('b'), stored(prompt(16)));
    p.markStale(w('b'));
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
    expect(p.eventCounts('b')).toMatchObject({ stale: 1 });
  });

  it('hashes the same way as the reference hasher at the router block size', () => {
    const { p } = setup();
    const r = p.prepare(fields(), prompt(10));
    expect([...r.localHashes]).toEqual([...new BlockHasher().localHashes(prompt(10), BS)]);
    expect(r.promptTokens).toBe(10);
  });
});

describe('ModelFleet: eligibility and errors', () => {
  it('rejects a pin to an unknown worker or rank with 400', () => {
    const { p } = setup();
    expect(() => p.prepare(fields({ pin: w('zz') }), prompt(8))).toThrow(expect.objectContaining({ code: 'KVR_ERR_UNKNOWN_WORKER', status: 400 }));
    expect(() => p.prepare(fields({ pin: w('a', 3) }), prompt(8))).toThrow(expect.objectContaining({ code: 'KVR_ERR_UNKNOWN_WORKER' }));
  });

  it('honours a pin, an allowed set and required taints', () => {
    const { p } = setup(['a', 'b']);
    p.addWorker(spec('gpu-east', { taints: ['zone=east'] }));
    expect(admit(p, p.prepare(fields({ pin: w('b') }), prompt(8))).worker.id).toBe('b');
    expect(admit(p, p.prepare(fields({ allowedWorkers: [w('a')] }), prompt(8))).worker.id).toBe('a');
    expect(admit(p, p.prepare(fields({ requiredTaints: ['zone=east'] }), prompt(8))).worker.id).toBe('gpu-east');
  });

  it('names the error: all overloaded, pinned worker overloaded, no workers', () => {
    const { p } = setup(['a', 'b']);
    const busy = { prefillTokens: 10 };
    admit(p, p.prepare(fields(), prompt(20)), busy);
    admit(p, p.prepare(fields(), prompt(20)), busy);
    const all = p.admit(p.prepare(fields(), prompt(8)), null, busy, null, []);
    expect(RouterError.is(all) && all.code).toBe('KVR_ERR_ALL_OVERLOADED');
    const pinned = p.admit(p.prepare(fields({ pin: w('a') }), prompt(8)), null, busy, null, []);
    expect(RouterError.is(pinned) && pinned.code).toBe('KVR_ERR_PINNED_OVERLOADED');
    const none = setup([]).p;
    const err = none.admit(none.prepare(fields(), prompt(8)), null, null, null, []);
    expect(RouterError.is(err) && err.status).toBe(503);
  });

  it('excludes workers that already failed this request', () => {
    const { p } = setup(['a', 'b']);
    p.applyEvents(w('a'), stored(prompt(16)));
    const r = p.prepare(fields(), prompt(16));
    const a = p.admit(r, null, null, null, [w('a')]);
    expect(!RouterError.is(a) && a.worker.id).toBe('b');
  });

  it('honours a soft target when it is eligible, and ignores it when it is busy', () => {
    const { p } = setup(['a', 'b']);
    p.applyEvents(w('a'), stored(prompt(16)));
    expect(admit(p, p.prepare(fields(), prompt(16)), null, w('b')).worker.id).toBe('b');
    const busy = { prefillTokens: 1 };
    expect(admit(p, p.prepare(fields(), prompt(16)), busy, w('b')).worker.id).toBe('a');
  });

  it('stops sending new requests to a draining worker', () => {
    const { p } = setup(['a', 'b']);
    p.applyEvents(w('a'), stored(prompt(16)));
    p.setDraining('a', true);
    expect(p.liveWorkers()).toBe(1);
    expect(admit(p, p.prepare(fields(), prompt(16))).worker.id).toBe('b');
    expect(p.explain(p.prepare(fields(), prompt(16))).workers.find((x) => x.worker === 'a')?.filtered).toBe('draining');
  });
});

describe('ModelFleet: load ledger through the lifecycle', () => {
  it('books prefill load until the first token and decode load until release, and balances by it', () => {
    const { p } = setup(['a', 'b']);
    const r1 = p.prepare(fields(), prompt(400));
    const a1 = admit(p, r1);
    const r2 = p.prepare(fields(), prompt(400, 5000));
    const a2 = admit(p, r2);
    expect(a2.worker.id).not.toBe(a1.worker.id);
    expect(p.bookedRequests).toBe(2);
    p.firstToken(r1.id);
    const afterFirst = p.load().find((l) => l.worker === a1.worker.id)!;
    expect(afterFirst.prefillTokens).toBe(0);
    expect(afterFirst.decodeBlocks).toBe(100);
    p.release(r1.id);
    p.release(r2.id);
    expect(p.bookedRequests).toBe(0);
    expect(p.load().every((l) => l.prefillTokens === 0 && l.decodeBlocks === 0 && l.activeRequests === 0)).toBe(true);
  });

  it('the sweep reclaims bookings past the age whose request is gone, and keeps live ones however old', () => {
    const { p, clock } = setup(['a']);
    admit(p, p.prepare(fields({ id: 'gone' }), prompt(40)));
    admit(p, p.prepare(fields({ id: 'streaming' }), prompt(40, 100)));
    clock.advanceTo(1_000);
    admit(p, p.prepare(fields({ id: 'young' }), prompt(40, 200)));
    const live = new Set(['streaming']);
    const asked: string[] = [];
    const isLive = (id: string) => {
      asked.push(id);
      return live.has(id);
    };
    expect(p.sweep(1_000, isLive)).toEqual([]);
    expect(asked).toEqual([]);
    clock.advanceTo(1_001);
    expect(p.sweep(1_000, isLive)).toEqual(['gone']);
    // Bookings younger than the age are not even asked about.
    expect(asked).toEqual(['gone', 'streaming']);
    expect(p.bookedRequests).toBe(2);
    clock.advanceTo(10_000_000);
    expect(p.sweep(1_000, isLive)).toEqual(['young']);
    expect(p.bookedRequests).toBe(1);
    expect(p.load()[0]!.activeRequests).toBe(1);
    p.release('streaming');
    expect(p.sweep(1_000, () => false)).toEqual([]);
    expect(p.bookedRequests).toBe(0);
  });

  it('approximate mode: a worker without KV events learns from what was routed to it', () => {
    const { p } = setup(['a', 'b', 'c'], 'kv', { kvEvents: false });
    const turn1 = p.prepare(fields(), prompt(32));
    const first = admit(p, turn1);
    p.release(turn1.id);
    const second = admit(p, p.prepare(fields(), prompt(40)));
    expect(second.worker).toEqual(first.worker);
    expect(second.overlapBlocks).toBe(8);
  });

  it('removing a worker drops its index entries and returns its booked requests', () => {
    const { p } = setup(['a', 'b']);
    p.applyEvents(w('a'), stored(prompt(16)));
    const r = p.prepare(fields(), prompt(16));
    admit(p, r);
    expect(p.removeWorker('a')).toEqual([r.id]);
    expect(p.cachedTokens(p.prepare(fields(), prompt(16)), null)).toBe(0);
    expect(p.hasWorker('a')).toBe(false);
  });
});

describe('ModelFleet: explain', () => {
  it('explains why a request misses or hits the cache on each worker without booking anything', () => {
    const { p } = setup(['a', 'b']);
    p.applyEvents(w('b'), stored(prompt(12)));
    const x = p.explain(p.prepare(fields(), prompt(16)), { prefillTokens: 1000 });
    expect(x.chosen).toBe('b');
    expect(x.promptBlocks).toBe(4);
    const b = x.workers.find((e) => e.worker === 'b')!;
    expect(b).toMatchObject({ overlapBlocks: 3, cachedTokens: 12, prefillTokens: 4, eligible: true, filtered: null });
    expect(b.cost).toBeLessThan(x.workers.find((e) => e.worker === 'a')!.cost!);
    expect(p.bookedRequests).toBe(0);
  });

  it('names the filter that removed a worker', () => {
    const { p } = setup(['a', 'b']);
    admit(p, p.prepare(fields({ pin: w('a') }), prompt(100)));
    const x = p.explain(p.prepare(fields(), prompt(8)), { prefillTokens: 50 });
    expect(x.workers.find((e) => e.worker === 'a')).toMatchObject({ eligible: false, filtered: expect.stringMatching(/busy/) });
    expect(x.chosen).toBe('b');
  });
});

describe('ModelFleet: classifier rows', () => {
  it('W2: builds only the declared groups, for the eligible workers including busy ones', () => {
    const { p } = setup(['a', 'b']);
    p.applyEvents(w('a'), stored(prompt(8)));
    const r = p.prepare(fields(), prompt(16));
    const cacheOnly = p.rows(r, null, WorkerInputs.CACHE);
    expect(cacheOnly.count).toBe(2);
    expect(cacheOnly.cachedTokens).toBeDefined();
    expect(cacheOnly.prefillTokens).toBeUndefined();
    expect([...cacheOnly.cachedTokens!]).toEqual([8, 0]);
    const load = p.rows(r, [w('b')], WorkerInputs.LOAD);
    expect(load.workers).toEqual([w('b')]);
    expect([...load.prefillTokens!]).toEqual([16]);
  });

  it('W3: rows are a snapshot of the call; later load does not change them', () => {
    const { p } = setup(['a']);
    const r = p.prepare(fields(), prompt(16));
    const rows = p.rows(r, null, WorkerInputs.LOAD);
    admit(p, p.prepare(fields(), prompt(40)));
    expect([...rows.activeRequests!]).toEqual([0]);
    expect([...p.rows(r, null, WorkerInputs.LOAD).activeRequests!]).toEqual([1]);
  });
});

describe('ModelFleet: built-in selection policies', () => {
  const pick = (p: ModelFleet, len = 8, start = 1) => admit(p, p.prepare(fields(), prompt(len, start))).worker.id;

  it('round-robin cycles through the workers in order', () => {
    const { p } = setup(['a', 'b', 'c'], 'round-robin');
    expect([pick(p), pick(p), pick(p), pick(p)]).toEqual(['a', 'b', 'c', 'a']);
  });

  it('least-loaded takes the worker with the fewest requests in flight', () => {
    const { p } = setup(['a', 'b', 'c'], 'least-loaded');
    const seen = new Set([pick(p), pick(p), pick(p)]);
    expect(seen.size).toBe(3);
  });

  it('random spreads requests over every worker', () => {
    const { p } = setup(['a', 'b', 'c', 'd'], 'random');
    const counts: Record<string, number> = {};
    for (let i = 0; i < 400; i++) {
      const id = pick(p);
      counts[id] = (counts[id] ?? 0) + 1;
    }
    expect(Object.keys(counts).sort()).toEqual(['a', 'b', 'c', 'd']);
    for (const c of Object.values(counts)) expect(c).toBeGreaterThan(60);
  });

  it('power-of-two never picks the busier of two when loads differ', () => {
    const { p } = setup(['a', 'b'], 'power-of-two');
    const first = pick(p);
    expect(pick(p)).not.toBe(first);
  });

  it('two-tier follows the cache while load is balanced, and the least loaded when it is not', () => {
    const { p } = setup(['a', 'b'], 'two-tier');
    p.applyEvents(w('a'), stored(prompt(16)));
    expect(pick(p, 16)).toBe('a');
    const imbalanced = setup(['a', 'b'], 'two-tier').p;
    imbalanced.applyEvents(w('a'), stored(prompt(16)));
    for (let i = 0; i < 40; i++) admit(imbalanced, imbalanced.prepare(fields({ pin: w('a') }), prompt(4, 9000 + i * 10)));
    expect(pick(imbalanced, 16)).toBe('b');
  });

  it('rejects unknown policies and unknown parameters by name', () => {
    expect(() => createSelectionPolicy('fastest')).toThrow(/unknown selection policy "fastest"/);
    expect(() => createSelectionPolicy('kv', { overlap_credits: 1 })).toThrow(/kv: unknown parameter "overlap_credits"/);
    expect(() => createSelectionPolicy('two-tier', { cache_threshold: 2 })).toThrow(/cache_threshold" must be <= 1/);
  });
});
