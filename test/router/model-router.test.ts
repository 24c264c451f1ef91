import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import { plainFields, type RequestFields } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';

let n = 0;
const fields = (over: Partial<RequestFields> = {}): RequestFields => plainFields(`m${n++}`, over);
const tokens = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function route(busy: { prefillTokens: number } | null = null) {
  const clock = new VirtualClock(0);
  const r = new ModelRouter({
    model: 'm',
    blockSize: 4,
    clock,
    seed: 1,
    classes: [{ name: 'default', quantum: 100, queuePolicy: 'fcfs', busy, queueLimit: { requests: null, tokens: null }, sloMs: null }],
  });
  r.addWorker({ id: 'a', totalBlocks: 100, maxBatchedTokens: 64 });
  r.addWorker({ id: 'b', totalBlocks: 100, maxBatchedTokens: 64 });
  const done = new Map<string, Admission | RouterError>();
  const submit = (f: RequestFields, t: number[]) => {
    r.submit(f, t, { dispatch: (a) => done.set(f.id, a), reject: (e) => done.set(f.id, e) });
    return f.id;
  };
  return { r, clock, done, submit };
}

describe('ModelRouter: the model fleet and the scheduler together', () => {
  it('queues on the real ledger while every worker is busy and dispatches when a prefill completes', () => {
    const { r, done, submit } = route({ prefillTokens: 50 });
    const a = submit(fields(), tokens(60));
    const b = submit(fields(), tokens(60, 1000));
    const c = submit(fields(), tokens(60, 2000));
    expect(done.has(a) && done.has(b)).toBe(true);
    expect(done.has(c)).toBe(false);
    r.firstToken(a);
    expect((done.get(c) as Admission).worker).toEqual((done.get(a) as Admission).worker);
    for (const id of [a, b, c]) r.completed(id);
    expect(r.fleet.bookedRequests).toBe(0);
  });

  it('changes busy thresholds at runtime', () => {
    const { r, done, submit } = route({ prefillTokens: 50 });
    submit(fields(), tokens(60));
    submit(fields(), tokens(60, 1000));
    const c = submit(fields(), tokens(60, 2000));
    expect(done.has(c)).toBe(false);
    r.setBusyThresholds('default', { prefillTokens: 1000 });
    expect(done.has(c)).toBe(true);
    expect(r.busyThresholds()).toEqual({ default: { prefillTokens: 1000 } });
    expect(() => r.setBusyThresholds('nope', null)).toThrow(/no policy class "nope"/);
  });

  it('rejects a request pinned to an unknown worker through the handlers', () => {
    const { done, submit } = route();
    const id = submit(fields({ pin: { id: 'zz', rank: 0 } }), tokens(8));
    expect((done.get(id) as RouterError).status).toBe(400);
  });

  it('explains with the default class thresholds without booking', () => {
    const { r, done, submit } = route({ prefillTokens: 50 });
    // 60 prefill tokens on each worker: busy under the default class (50), eligible without thresholds.
    const first = submit(fields(), tokens(60));
    submit(fields(), tokens(60, 1000));
    const x = r.explain(fields(), tokens(16, 5000));
    expect(x.workers).toHaveLength(2);
    expect(x.chosen).toBeNull();
    expect(x.workers.map((w) => [w.worker, w.eligible, w.filtered])).toEqual([
      ['a', false, 'busy: active prefill tokens over the threshold'],
      ['b', false, 'busy: active prefill tokens over the threshold'],
    ]);
    expect(r.fleet.bookedRequests).toBe(2);
    // Its prefill done, the first request's worker is under the threshold again, and the explanation chooses it.
    r.firstToken(first);
    expect(r.explain(fields(), tokens(16, 5000)).chosen).toBe((done.get(first) as Admission).worker.id);
    expect(r.fleet.bookedRequests).toBe(2);
  });

  it('a worker that joins wakes the queue', () => {
    const { r, done, submit } = route({ prefillTokens: 50 });
    submit(fields(), tokens(60));
    submit(fields(), tokens(60, 1000));
    const c = submit(fields(), tokens(60, 2000));
    r.addWorker({ id: 'c', totalBlocks: 100, maxBatchedTokens: 64 });
    expect((done.get(c) as Admission).worker.id).toBe('c');
  });

  it('the periodic sweep keeps the booking of a dispatched request however long it runs', () => {
    const { r, clock, done, submit } = route({ prefillTokens: 50 });
    const a = submit(fields(), tokens(60));
    const b = submit(fields(), tokens(60, 1000));
    const c = submit(fields(), tokens(60, 2000));
    // Ten sweep ages: both requests still run, so their load still counts and c still waits.
    clock.advanceTo(3_000_001);
    expect(r.fleet.bookedRequests).toBe(2);
    expect(r.sweepStats).toEqual({ reclaimed: 0, longRunning: 2 });
    expect(done.has(c)).toBe(false);
    r.completed(a);
    expect(done.has(c)).toBe(true);
    r.completed(b);
    r.completed(c);
    clock.advanceTo(3_060_001);
    expect(r.sweepStats).toEqual({ reclaimed: 0, longRunning: 0 });
    expect(r.fleet.bookedRequests).toBe(0);
    r.close();
  });

  it('the periodic sweep reclaims a booking no live request holds and wakes the queue', () => {
    const { r, clock, done, submit } = route({ prefillTokens: 50 });
    // Booked on the model fleet directly, as the replica layer books a peer's choice: the scheduler does not hold it.
    const orphan = r.fleet.prepare(fields(), tokens(60, 5000));
    r.fleet.book(orphan, { id: 'a', rank: 0 }, 0);
    const peer = r.fleet.prepare(fields(), tokens(60, 6000));
    r.fleet.book(peer, { id: 'b', rank: 0 }, 0);
    const held = new Set([peer.id]);
    r.addBookingHolder((id) => held.has(id));
    const c = submit(fields(), tokens(60, 2000));
    expect(done.has(c)).toBe(false);
    clock.advanceTo(299_999);
    expect(done.has(c)).toBe(false);
    clock.advanceTo(360_001);
    expect(r.sweepStats).toEqual({ reclaimed: 1, longRunning: 1 });
    expect((done.get(c) as Admission).worker.id).toBe('a');
    held.clear();
    clock.advanceTo(420_001);
    expect(r.sweepStats.reclaimed).toBe(2);
    r.close();
  });

  it('configureSweep changes the age and the interval', () => {
    const { r, clock, submit } = route();
    r.configureSweep(10, 50);
    const orphan = r.fleet.prepare(fields(), tokens(8));
    r.fleet.book(orphan, { id: 'a', rank: 0 }, 0);
    const live = submit(fields(), tokens(8, 100));
    clock.advanceTo(50);
    expect(r.fleet.bookedRequests).toBe(2);
    clock.advanceTo(60);
    expect(r.fleet.bookedRequests).toBe(1);
    expect(r.sweepStats).toEqual({ reclaimed: 1, longRunning: 1 });
    r.completed(live);
    expect(() => r.configureSweep(-1, 50)).toThrow(/interval/);
    expect(() => r.configureSweep(10, Number.NaN)).toThrow(/age/);
    r.close();
  });
});
