import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import { ModelFleet } from '../../router/model-fleet.js';

const BS = 4;
// Prompts drawn from a few shared prefixes so caches and active sequences overlap.
const prefixes = [0, 1, 2].map((p) => Array.from({ length: 12 }, (_, i) => 100 * (p + 1) + i));

/** The KV event of an engine that cached the first `blocks` blocks of a prefix. */
function storedPrefix(prefix: number, blocks: number): KvEventBatch {
  const tokens = prefixes[prefix]!.slice(0, blocks * BS);
  const blockHashes = Array.from({ length: blocks }, (_, i) => BigInt(prefix * 10 + i + 1));
  return { ts: 0, dpRank: 0, events: [{ type: 'stored', blockHashes, parentBlockHash: null, tokenIds: tokens, blockSize: BS, loraName: null, medium: 'GPU' }] };
}

const step = fc.oneof(
  fc.record({ kind: fc.constant('store' as const), worker: fc.nat(3), prefix: fc.nat(2), blocks: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('route' as const), prefix: fc.nat(2), tail: fc.nat(20), len: fc.integer({ min: 4, max: 30 }) }),
  fc.record({ kind: fc.constant('first' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
);

describe('ModelFleet on the wasm core against the same fleet on the pure-TS twins', () => {
  it('makes the same decision, with the same overlap, at every step of random event and request streams', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), fc.nat(1000), (steps, seed) => {
        const make = (kernels: 'wasm' | 'reference') => {
          const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed, kernels });
          for (const id of ['a', 'b', 'c', 'd']) p.addWorker({ id, totalBlocks: 64, maxBatchedTokens: 64 });
          return p;
        };
        const wasm = make('wasm');
        const twin = make('reference');
        const live: string[] = [];
        let n = 0;
        for (const s of steps) {
          if (s.kind === 'store') {
            const batch = storedPrefix(s.prefix, s.blocks);
            const worker = { id: 'abcd'[s.worker]!, rank: 0 };
            wasm.applyEvents(worker, batch);
            twin.applyEvents(worker, batch);
          } else if (s.kind === 'route') {
            const tokens = [...prefixes[s.prefix]!, ...Array.from({ length: s.tail }, (_, i) => 9000 + i)].slice(0, s.len);
            const fields = { id: `r${n++}`, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null };
            const busy = { prefillTokens: 60 };
            const a = wasm.admit(wasm.prepare(fields, tokens), null, busy, null, []);
            const b = twin.admit(twin.prepare(fields, tokens), null, busy, null, []);
            if (RouterError.is(a) || RouterError.is(b)) {
              expect(RouterError.is(a) && RouterError.is(b) && a.code === b.code).toBe(true);
            } else {
              expect(a).toEqual(b);
              live.push(fields.id);
            }
          } else if (live.length > 0) {
            const id = live[s.pick % live.length]!;
            if (s.kind === 'first') {
              wasm.firstToken(id);
              twin.firstToken(id);
            } else {
              wasm.release(id);
              twin.release(id);
              live.splice(live.indexOf(id), 1);
            }
          }
          expect(wasm.load()).toEqual(twin.load());
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('ModelFleet on the wasm core against the twins and an index sharded over two cores, with constraints and busy classes', () => {
  const TAINTS = [[], ['zone=a'], ['zone=a', 'gpu=fast'], ['gpu=fast']];
  const BUSY = [null, { prefillTokens: 60 }, { decodeFraction: 0.3 }];
  const routeStep = fc.record({
    kind: fc.constant('route' as const),
    prefix: fc.nat(2),
    tail: fc.nat(20),
    len: fc.integer({ min: 4, max: 30 }),
    busy: fc.nat(BUSY.length - 1),
    capacityFirst: fc.boolean(),
    required: fc.option(fc.constantFrom('zone=a', 'gpu=fast'), { freq: 3 }),
    preferred: fc.option(fc.record({ taint: fc.constantFrom('zone=a', 'gpu=fast'), weight: fc.constantFrom(0.5, 1, -0.5) }), { freq: 3 }),
    pin: fc.option(fc.nat(4), { freq: 5 }),
    exclude: fc.option(fc.nat(4), { freq: 4 }),
    target: fc.option(fc.nat(4), { freq: 4 }),
  });
  const anyStep = fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('store' as const), worker: fc.nat(4), prefix: fc.nat(2), blocks: fc.integer({ min: 1, max: 3 }) }) },
    { weight: 4, arbitrary: routeStep },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('first' as const), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('drain' as const), worker: fc.nat(4), draining: fc.boolean() }) },
  );
  const key = (w: number) => ({ id: 'abcde'[w]!, rank: 0 });

  it('makes the same decisions, capacity verdicts and errors at every step', () => {
    fc.assert(
      fc.property(fc.array(anyStep, { maxLength: 60 }), fc.nat(1000), (steps, seed) => {
        const make = (kernels: 'wasm' | 'reference', indexShards?: number) => {
          const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed, kernels, fastPathBusy: BUSY[1], indexShards });
          // e publishes no KV events: its routed prompts are recorded in the index (in the core, or by the host when sharded).
          ['a', 'b', 'c', 'd', 'e'].forEach((id, i) => p.addWorker({ id, totalBlocks: 64, maxBatchedTokens: 64, taints: TAINTS[i % TAINTS.length], kvEvents: id !== 'e' }));
          return p;
        };
        const sides = [make('wasm'), make('reference'), make('wasm', 2)] as const;
        const live: string[] = [];
        let n = 0;
        for (const s of steps) {
          if (s.kind === 'store') {
            const batch = storedPrefix(s.prefix, s.blocks);
            for (const p of sides) p.applyEvents(key(s.worker), batch);
          } else if (s.kind === 'drain') {
            for (const p of sides) p.setDraining(key(s.worker).id, s.draining);
          } else if (s.kind === 'route') {
            const tokens = [...prefixes[s.prefix]!, ...Array.from({ length: s.tail }, (_, i) => 9000 + i)].slice(0, s.len);
            const fields = {
              id: `r${n++}`,
              sessionId: null,
              sessionFinal: false,
              policyClass: null,
              priority: 0,
              tier: 0,
              pin: s.pin === null ? null : key(s.pin),
              allowedWorkers: null,
              requiredTaints: s.required ? [s.required] : [],
              preferredTaints: s.preferred ? [s.preferred] : [],
            };
            const busy = BUSY[s.busy]!;
            const exclude = s.exclude === null ? [] : [key(s.exclude)];
            const target = s.target === null ? null : key(s.target);
            const results = sides.map((p) => {
              const r = p.prepare(fields, tokens);
              const cached = p.cachedTokens(r, null);
              const capacity = s.capacityFirst ? p.capacity(r, null, busy) : null;
              const a = p.admit(r, null, busy, target, exclude);
              return { cached, capacity, admission: RouterError.is(a) ? a.code : a };
            });
            expect(results[0]).toEqual(results[1]);
            expect(results[2]).toEqual(results[0]);
            if (!RouterError.is(results[0]!.admission) && typeof results[0]!.admission !== 'string') live.push(fields.id);
          } else if (live.length > 0) {
            const id = live[s.pick % live.length]!;
            if (s.kind === 'first') sides.forEach((p) => p.firstToken(id));
            else {
              sides.forEach((p) => p.release(id));
              live.splice(live.indexOf(id), 1);
            }
          }
          expect(sides[0].load()).toEqual(sides[1].load());
          expect(sides[2].load()).toEqual(sides[0].load());
          expect(sides[2].indexStats().routedBlocks).toBe(sides[0].indexStats().routedBlocks);
        }
      }),
      { numRuns: 200 },
    );
  });
});
