import { xxhash3 } from 'hash-wasm';
import { describe, expect, it } from 'vitest';
import { ReferenceRendezvous } from '../../bindings/reference/rendezvous.js';
import { Rendezvous } from '../../bindings/rendezvous.js';
import type { WorkerKey } from '../../bindings/workers.js';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import type { RequestFields, RoutedRequest } from '../../router/model-fleet.js';
import { createClassifier } from '../../router/plugins/classifiers.js';
import { coldPool, COLD_POOL_DEFAULTS, COLD_RECHECK_MS, createColdPool, POOL_KEY, poolSize, routingId, type ColdPool } from '../../router/plugins/cold-pool/index.js';
import { PluginConfigError } from '../../router/plugins/params.js';
import type { ColdPoolConstruction } from '../../router/plugins/cold-pool/options.js';
import type { Admission, ClassifyResult, GateVerdict } from '../../router/scheduler/contracts.js';

const THRESHOLD = 1000;
const key = (id: string): WorkerKey => ({ id, rank: 0 });

function fleet(options: Partial<ColdPoolConstruction> = {}, setup: { workers?: string[]; kvEvents?: boolean } = {}) {
  const clock = new VirtualClock(0);
  const pool: ColdPool<RoutedRequest> = coldPool<RoutedRequest>({ requestThreshold: THRESHOLD, workers: 2, softDrainTimeoutMs: 5000, ...options });
  // Every gate answer, to see what was held and when it was asked again.
  const checks: { id: string; now: number; verdict: GateVerdict }[] = [];
  const install = pool.installGate.bind(pool);
  pool.installGate = (handle) => {
    const gate = install(handle);
    const check = gate.check.bind(gate);
    gate.check = (head, now) => {
      const verdict = check(head, now);
      checks.push({ id: head.request.id, now, verdict });
      return verdict;
    };
    return gate;
  };
  const classified = new Map<string, ClassifyResult>();
  const classify = pool.classify.bind(pool);
  pool.classify = (request) => {
    const result = classify(request);
    classified.set(request.request.id, result);
    return result;
  };
  const route = new ModelRouter({ model: 'm', blockSize: 16, clock, seed: 1, classifier: pool, tickMs: 1e9, sweepIntervalMs: 0 });
  const workers = setup.workers ?? ['w0', 'w1', 'w2', 'w3', 'w4', 'w5'];
  for (const id of workers) route.addWorker({ id, totalBlocks: 10_000, maxBatchedTokens: 8192, kvEvents: setup.kvEvents });
  const outcome = new Map<string, Admission | RouterError>();
  let n = 0;
  /** Submits a prompt of `length` tokens; `from` shares the first tokens of an earlier prompt's numbering. */
  const submit = (length: number, over: Partial<RequestFields> = {}, from = ++n * 1_000_000) => {
    const id = `r${n++}`;
    const tokens = Array.from({ length }, (_, i) => from + i);
    const fields: RequestFields = { id, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null, ...over };
    route.submit(fields, tokens, { dispatch: (a) => outcome.set(id, a), reject: (e) => outcome.set(id, e) });
    return id;
  };
  const workerOf = (id: string) => {
    const o = outcome.get(id);
    return o && !RouterError.is(o) ? o.worker.id : undefined;
  };
  const finish = (id: string) => {
    route.sent(id, (outcome.get(id) as Admission).worker);
    route.firstToken(id);
    route.completed(id);
  };
  const members = pool.poolMembers();
  const others = workers.filter((w) => !members.includes(w));
  /** Warm work pinned to each of the given workers. */
  const warmOn = (ids: readonly string[]) => ids.map((id) => submit(100, { pin: key(id) }));
  const allowedOf = (id: string) => {
    const r = classified.get(id);
    return r && !r.reject && r.allowedWorkers ? r.allowedWorkers.map((w) => w.id).sort() : null;
  };
  return { clock, pool, route, checks, classified, submit, workerOf, finish, members, others, warmOn, allowedOf };
}

describe('C5: Cold Pool parameters', () => {
  it('C5: defaults, and every parameter read from config', () => {
    expect(createClassifier('cold_pool').name).toBe('cold_pool');
    expect((createColdPool() as ColdPool).options).toEqual(COLD_POOL_DEFAULTS);
    const p = createColdPool({ request_threshold: 64_000, workers: 0, soft_drain_timeout_ms: 0, steer_warm: false });
    expect(p.options).toEqual({ requestThreshold: 64_000, workers: 0, softDrainTimeoutMs: 0, steerWarm: false });
  });

  it('C5: an unknown or out-of-range parameter fails start-up by name', () => {
    expect(() => createClassifier('cold_pool', { soft_drain_ms: 10 })).toThrow(/cold_pool: unknown parameter "soft_drain_ms" \(known: request_threshold, workers, soft_drain_timeout_ms, steer_warm\)/);
    expect(() => createColdPool({ workers: -1 })).toThrow(/parameter "workers" must be >= 0/);
    expect(() => createColdPool({ workers: 1.5 })).toThrow(/parameter "workers" must be an integer/);
    expect(() => createColdPool({ request_threshold: 0 })).toThrow(/parameter "request_threshold" must be >= 1/);
    expect(() => createColdPool({ steer_warm: 'yes' })).toThrow(/parameter "steer_warm" must be true or false/);
    expect(() => coldPool({ softDrainTimeoutMs: -5 })).toThrow(/softDrainTimeoutMs must be a finite time >= 0/);
    expect(() => createClassifier('cold-pool')).toThrow(/unknown request_classifier type "cold-pool" \(known: thunderagent, cold_pool\)/);
    expect(() => createClassifier('toString')).toThrow(PluginConfigError);
  });
});

describe('P: Cold Pool', () => {
  it('P1: Warm under the threshold, Cold when the uncached part is at or over it, otherwise unmanaged', () => {
    // Workers without KV events: what the router routes there counts as cached.
    const f = fleet({}, { kvEvents: false });
    const warm = f.submit(THRESHOLD - 1);
    const cold = f.submit(THRESHOLD, {}, 7_000_000);
    expect(f.classified.get(cold)).toMatchObject({ lane: 'cold' });
    expect(f.pool.snapshot().warm).toEqual({ [f.workerOf(warm)!]: 1 });
    expect(f.pool.snapshot().cold).toEqual({ [f.workerOf(cold)!]: 1 });
    // The first 62 blocks (992 tokens) of the Cold prompt are cached now: 2000 tokens leave 1008 uncached, still Cold.
    const stillCold = f.submit(2 * THRESHOLD, {}, 7_000_000);
    expect(f.classified.get(stillCold)).toMatchObject({ lane: 'cold' });
    // 1500 tokens leave 508 uncached: long but cache-affine, so routed normally.
    const cached = f.submit(THRESHOLD + 500, {}, 7_000_000);
    expect(f.classified.get(cached)).toEqual({});
    expect(f.workerOf(cached)).toBeDefined();
    // The unmanaged prompt is not counted as Cold work; the two Cold ones run on the pool.
    const cold2 = f.pool.snapshot().cold;
    expect(Object.values(cold2).reduce((s, v) => s + v, 0)).toBe(2);
    for (const w of Object.keys(cold2)) expect(f.members).toContain(w);
  });

  it('P2: the pool is the rendezvous top-k of XXH3-64 routing ids, capped at a third of the workers', async () => {
    const f = fleet({ workers: 5 }, { workers: ['w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6'] });
    expect(f.members).toHaveLength(2); // floor(7 / 3)
    // The routing id is the plain XXH3-64 of the worker's label, checked against an independent implementation.
    for (const id of ['w0', 'w6']) expect(routingId(key(id))).toBe(BigInt(`0x${await xxhash3(id)}`));
    const ids = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6'].map((id) => routingId(key(id)));
    const expected = new ReferenceRendezvous().topK(ids, POOL_KEY, 2).map((i) => `w${i}`);
    expect(f.members).toEqual(expected);
    expect([poolSize(1, 3), poolSize(2, 3), poolSize(3, 3), poolSize(6, 1), poolSize(6, 5), poolSize(9, 5), poolSize(9, 0)]).toEqual([0, 1, 1, 1, 2, 3, 0]);
  });

  it('P2: membership does not depend on registration order or on the hasher, and moves at most one member when a worker joins', () => {
    const names = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5'];
    const a = fleet({}, { workers: names });
    const b = fleet({ rendezvous: new ReferenceRendezvous() }, { workers: [...names].reverse() });
    expect([...b.members].sort()).toEqual([...a.members].sort());
    expect(b.members).toEqual(a.members);
    a.route.addWorker({ id: 'w6', totalBlocks: 10_000, maxBatchedTokens: 8192 });
    const after = a.pool.poolMembers();
    expect(after).toHaveLength(2);
    expect(after.filter((m) => !a.members.includes(m)).length).toBeLessThanOrEqual(1);
  });

  it('P2: a draining member leaves the pool; with fewer than two workers there is no pool', () => {
    const f = fleet({ workers: 1 });
    const [first] = f.members;
    f.route.setDraining(first!, true);
    expect(f.pool.poolMembers()).toHaveLength(1);
    expect(f.pool.poolMembers()).not.toContain(first);
    const solo = fleet({}, { workers: ['only'] });
    expect(solo.members).toEqual([]);
    solo.warmOn(['only']);
    const cold = solo.submit(2 * THRESHOLD);
    expect(solo.classified.get(cold)).toEqual({ lane: 'cold' });
    expect(solo.workerOf(cold)).toBe('only');
  });

  it('P3: Cold may use only the pool, waits in its own lane, and goes to the first member without Warm work', () => {
    const f = fleet();
    const [m1, m2] = f.members as [string, string];
    const [, w2] = f.warmOn([m1, m2]);
    const cold = f.submit(2 * THRESHOLD);
    expect(f.allowedOf(cold)).toEqual([m1, m2].sort());
    expect(f.classified.get(cold)).toMatchObject({ lane: 'cold' });
    expect(f.workerOf(cold)).toBeUndefined();
    // Its own lane: sessionless Warm work behind it in time is not blocked by the held head.
    const warm = f.submit(100);
    expect(f.workerOf(warm)).toBeDefined();
    f.finish(w2!);
    expect(f.workerOf(cold)).toBe(m2);
    expect(f.checks.filter((c) => c.id === cold).at(-1)!.verdict).toEqual({ go: true, target: key(m2) });
  });

  it('P3: a drained member running the least Cold work is preferred', () => {
    const f = fleet({ softDrainTimeoutMs: 1 });
    const [m1, m2] = f.members as [string, string];
    const first = f.submit(2 * THRESHOLD); // nothing on the pool yet: the best-ranked member
    expect(f.workerOf(first)).toBe(m1);
    const second = f.submit(2 * THRESHOLD);
    expect(f.workerOf(second)).toBe(m2);
  });

  it('P4: after soft_drain_timeout_ms a held Cold head may go to any pool member', () => {
    const f = fleet();
    const [m1, m2] = f.members as [string, string];
    f.warmOn([m1, m2]);
    f.clock.advanceTo(1000);
    const cold = f.submit(2 * THRESHOLD);
    f.clock.advanceTo(5999);
    expect(f.workerOf(cold)).toBeUndefined();
    f.clock.advanceTo(6000);
    expect([m1, m2]).toContain(f.workerOf(cold));
    expect(f.checks.filter((c) => c.id === cold).at(-1)).toEqual({ id: cold, now: 6000, verdict: { go: true } });
  });

  it('P5: Warm keeps off the pool while Cold is pending, then off just the workers running Cold', () => {
    const f = fleet();
    const [m1, m2] = f.members as [string, string];
    const [w1] = f.warmOn([m1, m2]);
    const cold = f.submit(2 * THRESHOLD);
    const pending = Array.from({ length: 6 }, () => f.submit(100));
    for (const id of pending) {
      expect(f.allowedOf(id)).toEqual([...f.others].sort());
      expect(f.members).not.toContain(f.workerOf(id));
    }
    f.finish(w1!);
    expect(f.workerOf(cold)).toBe(m1);
    const running = f.submit(100);
    expect(f.allowedOf(running)).toEqual(['w0', 'w1', 'w2', 'w3', 'w4', 'w5'].filter((w) => w !== m1));
    f.finish(cold);
    expect(f.classified.get(f.submit(100))).toEqual({});
  });

  it('P6: workers: 0 keeps the classification and the Cold lane without containment', () => {
    const f = fleet({ workers: 0 });
    expect(f.members).toEqual([]);
    f.warmOn(['w0', 'w1', 'w2', 'w3', 'w4', 'w5']);
    const cold = f.submit(2 * THRESHOLD);
    expect(f.classified.get(cold)).toEqual({ lane: 'cold' });
    expect(f.workerOf(cold)).toBeDefined();
    const warm = f.submit(100);
    expect(f.classified.get(warm)).toEqual({});
    expect(f.pool.snapshot()).toMatchObject({ pendingCold: 0, cold: { [f.workerOf(cold)!]: 1 } });
  });

  it('P6: steer_warm: false keeps Warm on every worker while Cold is still contained', () => {
    const f = fleet({ steerWarm: false });
    const [m1, m2] = f.members as [string, string];
    f.warmOn([m1, m2]);
    const cold = f.submit(2 * THRESHOLD);
    expect(f.workerOf(cold)).toBeUndefined();
    expect(f.allowedOf(cold)).toEqual([m1, m2].sort());
    const warm = f.submit(100);
    expect(f.classified.get(warm)).toEqual({});
  });

  it('P6: soft_drain_timeout_ms: 0 is pool-only: Cold goes at once to the pool, Warm is still steered', () => {
    const f = fleet({ softDrainTimeoutMs: 0 });
    const [m1, m2] = f.members as [string, string];
    f.warmOn([m1, m2]);
    const cold = f.submit(2 * THRESHOLD);
    expect([m1, m2]).toContain(f.workerOf(cold));
    const warm = f.submit(100);
    expect(f.allowedOf(warm)).toEqual(['w0', 'w1', 'w2', 'w3', 'w4', 'w5'].filter((w) => w !== f.workerOf(cold)));
  });

  it('P7: a held Cold head is asked again at least every 100 ms', () => {
    const f = fleet();
    f.warmOn(f.members);
    const cold = f.submit(2 * THRESHOLD);
    expect(f.checks.filter((c) => c.id === cold).at(-1)!.verdict).toEqual({ go: false, until: COLD_RECHECK_MS });
    expect(f.clock.nextAt()).toBe(COLD_RECHECK_MS);
    f.clock.advanceTo(1000);
    const times = f.checks.filter((c) => c.id === cold).map((c) => c.now);
    expect(times).toEqual(Array.from({ length: 11 }, (_, i) => i * COLD_RECHECK_MS));
  });

  it('G9: a Sent changes what held heads wait for only when it moves Warm work off a worker', () => {
    const f = fleet();
    const [m1, m2] = f.members as [string, string];
    const [w1] = f.warmOn([m1]);
    expect(f.pool.onEvent({ type: 'sent', requestId: w1!, worker: key(m1) })).toBe(false);
    // A retry that moved it: m1 has no Warm work any more.
    expect(f.pool.onEvent({ type: 'sent', requestId: w1!, worker: key(m2) })).toBe(true);
    expect(f.pool.snapshot().warm).toEqual({ [m2]: 1 });
    // The first Sent of a request the gate never saw only places it.
    const request = { id: 'ungated', promptTokens: 100, sessionId: null, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null };
    f.pool.classify({ request: request as RoutedRequest, now: 0, cachedTokens: 0, defaultCost: 100 });
    expect(f.pool.onEvent({ type: 'sent', requestId: 'ungated', worker: key(m1) })).toBe(false);
    expect(f.pool.snapshot().warm).toEqual({ [m1]: 1, [m2]: 1 });
  });

  it('a Cold request rejected or cancelled before dispatch is no longer pending', () => {
    const f = fleet();
    f.warmOn(f.members);
    const cold = f.submit(2 * THRESHOLD);
    expect(f.pool.snapshot().pendingCold).toBe(1);
    f.route.aborted(cold);
    expect(f.pool.snapshot().pendingCold).toBe(0);
    expect(f.classified.get(f.submit(100))).toEqual({});
  });

  it('the wasm and reference rendezvous hashers pick the same pool for many fleets', () => {
    const wasm = new Rendezvous();
    const twin = new ReferenceRendezvous();
    for (let n = 2; n <= 40; n++) {
      const ids = Array.from({ length: n }, (_, i) => routingId(key(`worker-${i}`)));
      const k = poolSize(n, 4);
      expect(wasm.topK(ids, POOL_KEY, k)).toEqual(twin.topK(ids, POOL_KEY, k));
    }
  });
});
