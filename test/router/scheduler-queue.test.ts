import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { PolicyClass } from '../../router/scheduler/contracts.js';
import { Scheduler } from '../../router/scheduler/scheduler.js';
import { TablePlacement } from './helpers/table-placement.js';
import { Outcomes, policy, req } from './helpers/requests.js';

function setup(classes: PolicyClass[], workers = 2) {
  const clock = new VirtualClock(0);
  const placement = new TablePlacement(workers);
  const scheduler = new Scheduler({ clock, placement, classes });
  const out = new Outcomes();
  const submit = (over: Parameters<typeof req>[0] = {}) => {
    const r = req(over);
    scheduler.submit(r, out.handlers(r.id));
    return r;
  };
  return { clock, placement, scheduler, out, submit };
}

// Two requests of 100 tokens make a worker busy at a 150-token threshold.
const busyAt150 = policy({ busy: { prefillTokens: 150 } });

describe('Q1: a class queues only while every eligible worker is busy', () => {
  it('Q1: dispatches while some eligible worker is free and queues once all are busy', () => {
    const { submit, out } = setup([busyAt150]);
    const rs = [submit(), submit(), submit(), submit()];
    expect(rs.every((r) => out.dispatched.has(r.id))).toBe(true);
    const waiting = submit();
    expect(out.dispatched.has(waiting.id)).toBe(false);
  });

  it('Q1: a new arrival never overtakes its class backlog', () => {
    const { submit, out, scheduler } = setup([busyAt150]);
    const first = [submit(), submit(), submit(), submit()];
    const queuedA = submit();
    const queuedB = submit();
    scheduler.firstToken(first[0]!.id); // one worker drops below the threshold
    const late = submit();
    expect(out.order.slice(4)).toEqual([queuedA.id]);
    scheduler.firstToken(first[1]!.id);
    expect(out.order.slice(4)).toEqual([queuedA.id, queuedB.id]);
    expect(out.dispatched.has(late.id)).toBe(false);
  });

  it('Q1: only eligible workers count: a pin to a busy worker waits while another worker is free', () => {
    const { submit, out, placement } = setup([busyAt150]);
    placement.worker('w0').prefillTokens = 1000;
    const pinned = submit({ pin: { id: 'w0', rank: 0 } });
    const free = submit({ sessionId: 'other' });
    expect(out.dispatched.has(pinned.id)).toBe(false);
    expect(out.dispatched.get(free.id)?.id).toBe('w1');
  });
});

describe('Q3: limits and deadlines', () => {
  it('Q3: over the queue limit (requests per live worker) rejects with 529, the class and the stage', () => {
    const { submit, out } = setup([policy({ ...busyAt150, queueLimit: { requests: 1, tokens: null } })]);
    for (let i = 0; i < 4; i++) submit();
    const a = submit();
    const b = submit(); // the one that crosses the limit (2 = 1 x 2 live workers) is accepted
    const c = submit();
    expect(out.rejected.has(a.id) || out.rejected.has(b.id)).toBe(false);
    const err = out.rejected.get(c.id)!;
    expect(err.status).toBe(529);
    expect(err.code).toBe('KVR_ERR_QUEUE_FULL');
    expect(err.details).toMatchObject({ policy_class: 'default', stage: 'admission', limit: 'requests' });
  });

  it('Q3: the queue limit scales with live workers', () => {
    const { submit, out, placement } = setup([policy({ ...busyAt150, queueLimit: { requests: 1, tokens: null } })], 1);
    submit();
    submit();
    submit(); // queued: usage 0 < 1
    const rejected = submit();
    expect(out.rejected.get(rejected.id)?.code).toBe('KVR_ERR_QUEUE_FULL');
    placement.add('w9', { prefillTokens: 1000 });
    const accepted = submit(); // limit is now 2
    expect(out.rejected.has(accepted.id)).toBe(false);
  });

  it('Q3: the token queue limit counts queued prompt tokens', () => {
    const { submit, out } = setup([policy({ ...busyAt150, queueLimit: { requests: null, tokens: 100 } })]);
    for (let i = 0; i < 4; i++) submit();
    submit({ promptTokens: 150 });
    submit({ promptTokens: 60 });
    const over = submit({ promptTokens: 10 });
    expect(out.rejected.get(over.id)?.details).toMatchObject({ limit: 'tokens' });
  });

  it('Q3: past its deadline a queued request gets 529 at stage dispatch', () => {
    const { submit, out, clock } = setup([policy({ ...busyAt150, sloMs: 500 })]);
    for (let i = 0; i < 4; i++) submit();
    const late = submit();
    clock.advanceTo(499);
    expect(out.rejected.has(late.id)).toBe(false);
    clock.advanceTo(500);
    const err = out.rejected.get(late.id)!;
    expect(err.status).toBe(529);
    expect(err.details).toMatchObject({ policy_class: 'default', stage: 'dispatch' });
  });

  it('Q3: a request already past its deadline is rejected at stage admission', () => {
    const clock = new VirtualClock(1000);
    const placement = new TablePlacement(1);
    const scheduler = new Scheduler({
      clock,
      placement,
      classes: [policy()],
      classifier: { name: 'late', classify: () => ({ deadline: 900 }) },
    });
    const out = new Outcomes();
    const r = req();
    scheduler.submit(r, out.handlers(r.id));
    expect(out.rejected.get(r.id)?.details).toMatchObject({ stage: 'admission' });
  });

  it('Q3: all eligible workers busy with queueing off answers 503', () => {
    const { submit, out } = setup([policy({ ...busyAt150, queueLimit: { requests: 0, tokens: null } })]);
    for (let i = 0; i < 4; i++) submit();
    const r = submit();
    expect(out.rejected.get(r.id)?.status).toBe(503);
    expect(out.rejected.get(r.id)?.code).toBe('KVR_ERR_ALL_OVERLOADED');
  });

  it('Q3: no live worker answers 503 at once', () => {
    const { submit, out } = setup([busyAt150], 0);
    const r = submit();
    expect(out.rejected.get(r.id)?.code).toBe('KVR_ERR_NO_WORKERS');
  });

  it('Q3: an unknown policy class falls back to the default class', () => {
    // Both workers hold 1000 prefill tokens: busy for the default class (150), not for batch (no thresholds).
    const { submit, out, scheduler, placement } = setup([busyAt150, policy({ name: 'batch', quantum: 10 })]);
    for (const w of placement.workers) w.prefillTokens = 1000;
    const unknown = submit({ policyClass: 'nope' });
    const batch = submit({ policyClass: 'batch' });
    expect(out.dispatched.has(batch.id)).toBe(true);
    expect(out.dispatched.has(unknown.id)).toBe(false);
    expect(out.rejected.has(unknown.id)).toBe(false);
    expect(scheduler.stats().queued['default']!.requests).toBe(1);
    expect(scheduler.stats().queued['batch']!.requests).toBe(0);
    // It leaves with the default class's queue once a worker is under that class's threshold.
    placement.worker('w0').prefillTokens = 0;
    scheduler.capacityChanged();
    expect(out.dispatched.get(unknown.id)?.id).toBe('w0');
  });
});

describe('Q4: cancellation never leaks load', () => {
  it('Q4: a request cancelled while queued leaves without a dispatch', () => {
    const { submit, out, scheduler } = setup([busyAt150]);
    const first = [submit(), submit(), submit(), submit()];
    const q = submit();
    scheduler.aborted(q.id);
    expect(out.rejected.get(q.id)?.code).toBe('KVR_ERR_ABORTED');
    scheduler.completed(first[0]!.id);
    expect(out.dispatched.has(q.id)).toBe(false);
  });

  it('Q4: a request cancelled after dispatch frees its ledger entry', () => {
    const { submit, scheduler, placement } = setup([busyAt150]);
    const r = submit();
    expect(placement.outstanding()).toBeGreaterThan(0);
    scheduler.aborted(r.id);
    expect(placement.outstanding()).toBe(0);
  });

  it('Q4: random submit/cancel/first-token/complete interleavings leave the ledger empty', () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constant('submit' as const), tokens: fc.integer({ min: 1, max: 400 }), session: fc.option(fc.nat(4)), cls: fc.constantFrom('a', 'b') }),
      fc.record({ kind: fc.constantFrom('cancel' as const, 'first' as const, 'complete' as const, 'retry' as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 2000 }) }),
    );
    fc.assert(
      fc.property(fc.array(action, { maxLength: 80 }), (actions) => {
        const { submit, scheduler, placement, clock, out } = setup(
          [
            policy({ name: 'a', busy: { prefillTokens: 300 }, sloMs: 3000, quantum: 200 }),
            policy({ name: 'b', busy: { prefillTokens: 600 }, queueLimit: { requests: 3, tokens: null }, quantum: 50 }),
          ],
          3,
        );
        const ids: string[] = [];
        for (const a of actions) {
          if (a.kind === 'submit') ids.push(submit({ promptTokens: a.tokens, sessionId: a.session === null ? null : `s${a.session}`, policyClass: a.cls }).id);
          else if (a.kind === 'advance') clock.advanceTo(clock.now() + a.ms);
          else if (ids.length > 0) {
            const id = ids[a.pick % ids.length]!;
            if (a.kind === 'cancel') scheduler.aborted(id);
            else if (a.kind === 'first') scheduler.firstToken(id);
            else if (a.kind === 'complete') scheduler.completed(id);
            else {
              const w = out.dispatched.get(id);
              if (w && scheduler.stateOf(id) === 'dispatched') scheduler.retry(id, w);
            }
          }
        }
        // Every request ends one way or the other.
        for (const id of ids) scheduler.aborted(id);
        for (const id of ids) expect(out.dispatched.has(id) || out.rejected.has(id)).toBe(true);
        expect(placement.outstanding()).toBe(0);
        expect(placement.booked.size).toBe(0);
        const stats = scheduler.stats();
        expect(stats.inFlight).toBe(0);
        for (const q of Object.values(stats.queued)) expect(q).toMatchObject({ requests: 0, tokens: 0, lanes: 0 });
      }),
      { numRuns: 200 },
    );
  });
});
