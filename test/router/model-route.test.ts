import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRoute } from '../../router/model-route.js';
import { plainFields, type RequestFields } from '../../router/partition.js';
import type { Admission } from '../../router/scheduler/contracts.js';

let n = 0;
const fields = (over: Partial<RequestFields> = {}): RequestFields => plainFields(`m${n++}`, over);
const tokens = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function route(busy: { prefillTokens: number } | null = null) {
  const clock = new VirtualClock(0);
  const r = new ModelRoute({
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

describe('ModelRoute: the partition and the scheduler together', () => {
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
    expect(r.partition.bookedRequests).toBe(0);
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
    expect(r.partition.bookedRequests).toBe(2);
    // Its prefill done, the first request's worker is under the threshold again, and the explanation chooses it.
    r.firstToken(first);
    expect(r.explain(fields(), tokens(16, 5000)).chosen).toBe((done.get(first) as Admission).worker.id);
    expect(r.partition.bookedRequests).toBe(2);
  });

  it('a worker that joins wakes the queue', () => {
    const { r, done, submit } = route({ prefillTokens: 50 });
    submit(fields(), tokens(60));
    submit(fields(), tokens(60, 1000));
    const c = submit(fields(), tokens(60, 2000));
    r.addWorker({ id: 'c', totalBlocks: 100, maxBatchedTokens: 64 });
    expect((done.get(c) as Admission).worker.id).toBe('c');
  });

  it('the periodic sweep frees a request whose completion was lost and wakes the queue', () => {
    const { r, clock, done, submit } = route({ prefillTokens: 50 });
    submit(fields(), tokens(60));
    submit(fields(), tokens(60, 1000));
    const c = submit(fields(), tokens(60, 2000));
    clock.advanceTo(360_001);
    expect(done.has(c)).toBe(true);
    r.close();
  });
});
