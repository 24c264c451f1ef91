// A request the router refuses, at whatever stage, leaves nothing behind: no
// lane, no session binding, no ledger booking. Random streams of submits
// (valid and invalid tiers, priorities, pins, classes; classifier rejections
// and odd costs), aborts, first tokens, completions, drains and clock moves
// run through a real ModelRouter (wasm core), and everything returns to empty.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import { plainFields, type RoutedRequest } from '../../router/model-fleet.js';
import type { ClassifyResult, PolicyClass, RequestClassifier } from '../../router/scheduler/contracts.js';
import { ClassQueue, ItemIds } from '../../router/scheduler/lanes.js';
import { Scheduler } from '../../router/scheduler/scheduler.js';
import { LaneHeap } from '../../bindings/lane-heap.js';
import { TablePlacement } from './helpers/table-placement.js';
import { Outcomes, policy, req } from './helpers/requests.js';

const BUSY = { prefillTokens: 40 };
const CLASSES: PolicyClass[] = [
  { name: 'default', quantum: 64, queuePolicy: 'fcfs', busy: BUSY, queueLimit: { requests: 3, tokens: null }, sloMs: 500 },
  { name: 'wspt', quantum: 32, queuePolicy: 'wspt', busy: BUSY, queueLimit: { requests: null, tokens: null }, sloMs: null },
  { name: 'direct', quantum: 64, queuePolicy: 'fcfs', busy: BUSY, queueLimit: { requests: 0, tokens: null }, sloMs: null },
];
const TTL_MS = 1000;

type Verdict = 'pass' | 'reject' | 'lane' | 'tiny-cost' | 'past-deadline';

/** Decides per request what the classifier says, from a script keyed by request id. */
class ScriptClassifier implements RequestClassifier<RoutedRequest> {
  readonly name = 'script';
  readonly verdicts = new Map<string, Verdict>();
  classify({ request, now }: { request: RoutedRequest; now: number }): ClassifyResult {
    switch (this.verdicts.get(request.id) ?? 'pass') {
      case 'reject':
        return { reject: { message: 'scripted' } };
      case 'lane':
        return { lane: 'cold' };
      case 'tiny-cost':
        return { cost: 1e-300 };
      case 'past-deadline':
        return { deadline: now };
      default:
        return {};
    }
  }
}

const submitOp = fc.record({
  kind: fc.constant('submit' as const),
  session: fc.constantFrom(null, 's0', 's1', 's2'),
  cls: fc.constantFrom(null, 'default', 'wspt', 'direct', 'unknown'),
  tier: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(2 ** 31, -(2 ** 31), 99_999_999_999, 0.5)),
  priority: fc.oneof(fc.integer({ min: -50, max: 50 }), fc.constantFrom(1e300, -1e300, Number.MAX_VALUE)),
  pin: fc.constantFrom(null, 'a', 'b', 'zz'),
  tokens: fc.integer({ min: 1, max: 90 }),
  verdict: fc.constantFrom<Verdict>('pass', 'pass', 'reject', 'lane', 'tiny-cost', 'past-deadline'),
});
const pick = (kind: 'abort' | 'first' | 'complete') => fc.record({ kind: fc.constant(kind), index: fc.nat() });
const op = fc.oneof(
  { weight: 4, arbitrary: submitOp },
  { weight: 1, arbitrary: pick('abort') },
  { weight: 2, arbitrary: pick('first') },
  { weight: 2, arbitrary: pick('complete') },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 700 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drain' as const), worker: fc.constantFrom('a', 'b'), draining: fc.boolean() }) },
);

function expectNoEmptyLanes(route: ModelRouter): void {
  for (const [name, q] of Object.entries(route.scheduler.stats().queued)) {
    // A lane exists only while it holds a request.
    expect(q.lanes <= q.requests, `class ${name}: ${q.lanes} lanes for ${q.requests} queued requests`).toBe(true);
    expect(q.lanes === 0, `class ${name}: lanes without requests`).toBe(q.requests === 0);
  }
}

describe('admission leaves no state behind for refused requests', () => {
  it('random submit, reject, abort and completion streams return lanes, bindings and ledger to empty', () => {
    let serial = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 60 }), (ops) => {
        const clock = new VirtualClock(0);
        const classifier = new ScriptClassifier();
        const route = new ModelRouter({ model: 'm', blockSize: 4, clock, seed: 1, classes: CLASSES, classifier, sessionAffinity: { ttlMs: TTL_MS }, tickMs: 100 });
        route.addWorker({ id: 'a', totalBlocks: 100, maxBatchedTokens: 64 });
        route.addWorker({ id: 'b', totalBlocks: 100, maxBatchedTokens: 64 });
        const calls = new Map<string, number>();
        const dispatchedSessions = new Set<string>();
        const ids: string[] = [];
        const sessionOf = new Map<string, string | null>();
        try {
          for (const o of ops) {
            if (o.kind === 'submit') {
              const id = `q${serial++}`;
              ids.push(id);
              sessionOf.set(id, o.session);
              classifier.verdicts.set(id, o.verdict);
              const fields = plainFields(id, { sessionId: o.session, policyClass: o.cls, tier: o.tier, priority: o.priority, pin: o.pin ? { id: o.pin, rank: 0 } : null });
              const tokens = Array.from({ length: o.tokens }, (_, i) => serial * 100 + i);
              const count = () => calls.set(id, (calls.get(id) ?? 0) + 1);
              // The contract: exactly one handler runs, now or later; submit itself never throws.
              route.submit(fields, tokens, {
                dispatch: () => {
                  count();
                  if (o.session !== null) dispatchedSessions.add(o.session);
                },
                reject: (error) => {
                  count();
                  expect(RouterError.is(error)).toBe(true);
                  expect(error.code).not.toBe('KVR_ERR_INTERNAL');
                },
              });
            } else if (o.kind === 'abort' || o.kind === 'first' || o.kind === 'complete') {
              if (ids.length === 0) continue;
              const id = ids[o.index % ids.length]!;
              if (o.kind === 'abort') route.aborted(id);
              else if (o.kind === 'first') route.firstToken(id);
              else route.completed(id);
            } else if (o.kind === 'advance') {
              clock.advanceTo(clock.now() + o.ms);
            } else if (o.kind === 'drain') {
              route.setDraining(o.worker, o.draining);
            }
            expectNoEmptyLanes(route);
            for (const [session] of route.sessions!.list(clock.now())) expect(dispatchedSessions.has(session)).toBe(true);
          }
          // Settle everything still live: dispatched requests complete, queued ones are abandoned.
          route.setDraining('a', false);
          route.setDraining('b', false);
          for (const id of ids) {
            if (route.scheduler.stateOf(id) === 'dispatched') route.completed(id);
            else route.aborted(id);
          }
          for (const id of ids) expect(calls.get(id), `handlers run for ${id}`).toBe(1);
          const stats = route.scheduler.stats();
          for (const q of Object.values(stats.queued)) expect(q).toMatchObject({ requests: 0, tokens: 0, lanes: 0, blockedLanes: 0 });
          expect(stats.inFlight).toBe(0);
          expect(route.fleet.bookedRequests).toBe(0);
          expect(route.fleet.load().every((w) => w.prefillTokens === 0 && w.decodeBlocks === 0 && w.activeRequests === 0)).toBe(true);
          // Bindings end with their TTL (the sweep drops them), and only sessions that were dispatched had any.
          clock.advanceTo(clock.now() + TTL_MS + 60_001);
          expect(route.sessions!.size).toBe(0);
        } finally {
          route.close();
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('the queue refuses an order the lane heap cannot key before it takes any state', () => {
  function setup(classes = [policy({ busy: { prefillTokens: 50 } })]) {
    const clock = new VirtualClock(0);
    const placement = new TablePlacement(1);
    const scheduler = new Scheduler({ clock, placement, classes });
    const out = new Outcomes();
    return { clock, placement, scheduler, out };
  }

  it('a tier past 32 bits is a 400 and leaves no lane', () => {
    const { placement, scheduler, out } = setup();
    placement.worker('w0').prefillTokens = 1000; // busy: the request would queue
    for (let i = 0; i < 100; i++) {
      const r = req({ tier: 99_999_999_999, sessionId: `s${i}` });
      scheduler.submit(r, out.handlers(r.id));
      expect(out.rejected.get(r.id)?.status).toBe(400);
      expect(out.rejected.get(r.id)?.code).toBe('KVR_ERR_INVALID_REQUEST');
    }
    expect(scheduler.stats().queued.default).toMatchObject({ requests: 0, lanes: 0 });
    const ok = req({ sessionId: 's0' });
    scheduler.submit(ok, out.handlers(ok.id));
    expect(scheduler.stats().queued.default).toMatchObject({ requests: 1, lanes: 1 });
  });

  it('a wspt key that overflows (a huge priority over a tiny classifier cost) is a 400 and leaves no lane', () => {
    const clock = new VirtualClock(0);
    const placement = new TablePlacement(1);
    const classifier: RequestClassifier = { name: 'tiny', classify: () => ({ cost: 1e-300 }) };
    const scheduler = new Scheduler({ clock, placement, classes: [policy({ queuePolicy: 'wspt', busy: { prefillTokens: 50 } })], classifier });
    const out = new Outcomes();
    placement.worker('w0').prefillTokens = 1000;
    const r = req({ priority: 1e300, sessionId: 'x' });
    scheduler.submit(r, out.handlers(r.id));
    expect(out.rejected.get(r.id)?.message).toMatch(/key must be finite/);
    expect(scheduler.stats().queued.default).toMatchObject({ requests: 0, lanes: 0 });
  });

  it('a lane queue that refuses an entry keeps no lane for it', () => {
    const heap = new LaneHeap();
    const ids = new ItemIds();
    const queue = new ClassQueue(policy(), heap, ids);
    const entry = (tier: number) => ({ item: ids.take(), order: { tier, deadline: Infinity, key: 0, seq: 0 }, promptTokens: 10 });
    expect(() => queue.enqueue('session:x', entry(2 ** 40))).toThrow(/tier/);
    expect(queue.lanes.size).toBe(0);
    expect(queue.queuedRequests).toBe(0);
    const ok = entry(1);
    queue.enqueue('session:x', ok);
    expect(() => queue.enqueue('session:x', entry(2 ** 40))).toThrow(/tier/);
    expect([queue.lanes.size, queue.lanes.get('session:x')!.size, queue.queuedRequests]).toEqual([1, 1, 1]);
    queue.remove('session:x', ok);
    expect(queue.lanes.size).toBe(0);
    queue.destroy();
  });
});
