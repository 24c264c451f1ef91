// A retry goes back through admission like any request: placed at once when
// a worker other than the failed ones is free; otherwise, in a class that
// queues, it waits in its lane at the place its arrival gave it, until
// capacity frees or its deadline passes, and never goes back to a failed
// worker.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { PolicyClass } from '../../router/scheduler/contracts.js';
import { Scheduler } from '../../router/scheduler/scheduler.js';
import { ScriptedClassifier } from './helpers/scripted-gate.js';
import { TablePlacement } from './helpers/table-placement.js';
import { Outcomes, policy, req } from './helpers/requests.js';

// Two requests of 100 tokens make a worker busy at a 150-token threshold.
const busyAt150 = policy({ busy: { prefillTokens: 150 } });
const w0 = { id: 'w0', rank: 0 };

function setup(classes: PolicyClass[] = [busyAt150], classifier?: ScriptedClassifier) {
  const clock = new VirtualClock(0);
  const placement = new TablePlacement(2);
  const scheduler = new Scheduler({ clock, placement, classes, classifier });
  const out = new Outcomes();
  const submit = (over: Parameters<typeof req>[0] = {}) => {
    const r = req(over);
    scheduler.submit(r, out.handlers(r.id));
    return r;
  };
  return { clock, placement, scheduler, out, submit };
}

describe('R: retries through admission', () => {
  it('R1: a retry that finds every other worker busy waits, then goes to a freed worker, never back to the failed one', () => {
    const { submit, scheduler, placement, out } = setup();
    placement.worker('w1').prefillTokens = 1000;
    const r = submit();
    expect(out.dispatched.get(r.id)).toEqual(w0);
    expect(scheduler.retry(r.id, w0)).toBe('queued');
    expect(scheduler.stateOf(r.id)).toBe('queued');
    expect(scheduler.stats().queued.default!.requests).toBe(1);
    // The failed worker is free again, but the retry may not go there.
    scheduler.capacityChanged();
    expect(out.order).toEqual([r.id]);
    placement.worker('w1').prefillTokens = 0;
    scheduler.capacityChanged();
    expect(out.order).toEqual([r.id, r.id]);
    expect(out.dispatched.get(r.id)).toEqual({ id: 'w1', rank: 0 });
    expect(scheduler.stateOf(r.id)).toBe('dispatched');
    expect(out.rejected.has(r.id)).toBe(false);
  });

  it('R2: a waiting retry keeps its place when capacity frees, and does not hold back requests that may use the failed worker', () => {
    const { submit, scheduler, placement, out } = setup();
    placement.worker('w1').prefillTokens = 1000;
    const r = submit();
    submit(); // w0 is busy from here on
    const queued = submit();
    const queuedLater = submit();
    expect(out.dispatched.has(queued.id) || out.dispatched.has(queuedLater.id)).toBe(false);
    expect(scheduler.retry(r.id, w0)).toBe('queued');
    // The retry freed room on w0, which it may not use: the next queued request takes it.
    expect(out.dispatched.get(queued.id)).toEqual(w0);
    expect(out.dispatched.has(queuedLater.id)).toBe(false);
    // w1 frees: the retry arrived before the request still waiting, so it goes first.
    placement.worker('w1').prefillTokens = 0;
    scheduler.capacityChanged();
    expect(out.order.slice(-2)).toEqual([r.id, queuedLater.id]);
    expect(out.dispatched.get(r.id)).toEqual({ id: 'w1', rank: 0 });
  });

  it('R3: a waiting retry past its deadline is refused at stage dispatch; one already past it is refused at once', () => {
    const { submit, scheduler, placement, out, clock } = setup([policy({ ...busyAt150, sloMs: 500 })]);
    placement.worker('w1').prefillTokens = 1000;
    const waiting = submit();
    expect(scheduler.retry(waiting.id, w0)).toBe('queued');
    clock.advanceTo(499);
    expect(out.rejected.has(waiting.id)).toBe(false);
    clock.advanceTo(500);
    expect(out.rejected.get(waiting.id)?.code).toBe('KVR_ERR_DEADLINE_EXPIRED');
    expect(out.rejected.get(waiting.id)?.details).toMatchObject({ stage: 'dispatch' });

    const late = submit(); // admitted at 500, due at 1000
    clock.advanceTo(1000);
    const refused = scheduler.retry(late.id, w0);
    expect(refused).toMatchObject({ code: 'KVR_ERR_DEADLINE_EXPIRED' });
    expect(scheduler.stateOf(late.id)).toBeUndefined();
    expect(placement.booked.size).toBe(0);
  });

  it('R4: in a class that never queues, a retry with every other worker busy is refused at once', () => {
    const { submit, scheduler, placement } = setup([policy({ ...busyAt150, queueLimit: { requests: 0, tokens: null } })]);
    placement.worker('w1').prefillTokens = 1000;
    const r = submit();
    expect(scheduler.retry(r.id, w0)).toMatchObject({ code: 'KVR_ERR_ALL_OVERLOADED' });
    expect(scheduler.stateOf(r.id)).toBeUndefined();
  });

  it('R5: the queue limit does not refuse a waiting retry: it is not new load', () => {
    const { submit, scheduler, placement, out } = setup([policy({ ...busyAt150, queueLimit: { requests: 1, tokens: null } })]);
    placement.worker('w1').prefillTokens = 1000;
    const r = submit();
    placement.worker('w0').prefillTokens += 1000;
    submit(); // queued: 1 of 2
    submit(); // queued: 2 of 2
    expect(out.rejected.get(submit().id)?.code).toBe('KVR_ERR_QUEUE_FULL');
    expect(scheduler.retry(r.id, w0)).toBe('queued');
    expect(scheduler.stats().queued.default!.requests).toBe(3);
  });

  it('R6: the gate, which let the request through once, is not asked again when its retry waits', () => {
    const classifier = new ScriptedClassifier();
    const gate = classifier.gate!;
    const { submit, scheduler, placement, out } = setup([busyAt150], classifier);
    placement.worker('w1').prefillTokens = 1000;
    const r = submit();
    expect(gate.checksOf(r.id)).toBe(1);
    gate.decide = () => ({ go: false });
    expect(scheduler.retry(r.id, w0)).toBe('queued');
    placement.worker('w1').prefillTokens = 0;
    scheduler.capacityChanged();
    expect(out.dispatched.get(r.id)).toEqual({ id: 'w1', rank: 0 });
    expect(gate.checksOf(r.id)).toBe(1);
    expect(gate.dispatched_.filter((d) => d.id === r.id)).toHaveLength(1);
  });
});
