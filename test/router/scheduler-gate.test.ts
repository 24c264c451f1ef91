import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { PolicyClass } from '../../router/scheduler/contracts.js';
import { Scheduler } from '../../router/scheduler/scheduler.js';
import { ScriptedClassifier } from './helpers/scripted-gate.js';
import { TablePlacement } from './helpers/table-placement.js';
import { Outcomes, policy, req } from './helpers/requests.js';

const busyAt150 = policy({ busy: { prefillTokens: 150 } });

function setup(classes: PolicyClass[] = [busyAt150], workers = 2) {
  const clock = new VirtualClock(0);
  const placement = new TablePlacement(workers);
  const classifier = new ScriptedClassifier();
  const gate = classifier.gate!;
  const scheduler = new Scheduler({ clock, placement, classes, classifier, tickMs: 1000 });
  const out = new Outcomes();
  const submit = (over: Parameters<typeof req>[0] = {}) => {
    const r = req(over);
    scheduler.submit(r, out.handlers(r.id));
    return r;
  };
  return { clock, placement, scheduler, out, submit, classifier, gate };
}

describe('G: the dispatch gate', () => {
  it('G1: the gate is asked before the capacity check, and Go may carry a soft target that selection honours', () => {
    const { submit, out, gate, placement } = setup();
    for (let i = 0; i < 4; i++) submit();
    gate.checks.length = 0;
    const r = submit(); // every worker is busy
    expect(gate.checks).toEqual([r.id]);
    expect(out.dispatched.has(r.id)).toBe(false);
    placement.worker('w0').prefillTokens = 0;
    placement.worker('w1').prefillTokens = 0;
    gate.decide = () => ({ go: true, target: { id: 'w1', rank: 0 } });
    const t = submit({ sessionId: 'x' });
    expect(out.dispatched.get(t.id)?.id).toBe('w1');
  });

  it('G2: a held head is asked again on a recheck, when the gate reports a change and at its until time, not on a capacity change alone', () => {
    const { submit, gate, scheduler, classifier, clock, out } = setup();
    const warm = submit({ sessionId: 'other' });
    let hold = true;
    gate.decide = (head) => (hold && head.request.sessionId === 'h' ? { go: false, until: 5000 } : { go: true });
    const held = submit({ sessionId: 'h' });
    expect(gate.checksOf(held.id)).toBe(1);
    scheduler.firstToken(warm.id); // capacity change the gate does not report
    expect(gate.checksOf(held.id)).toBe(1);
    classifier.handle.recheck();
    expect(gate.checksOf(held.id)).toBe(2);
    classifier.sentChanges = true;
    scheduler.sent(warm.id, out.dispatched.get(warm.id)!); // the gate's ledger changed
    expect(gate.checksOf(held.id)).toBe(3);
    clock.advanceTo(4999);
    expect(gate.checksOf(held.id)).toBe(3); // a hold with a time is not asked at the ticks
    hold = false;
    clock.advanceTo(5000);
    expect(gate.checksOf(held.id)).toBe(4);
    expect(out.dispatched.has(held.id)).toBe(true);
  });

  it('G2: a reported change asks every held lane again, not only the lane of the request whose event it was', () => {
    const { submit, gate, scheduler, classifier } = setup();
    const first = submit({ sessionId: 'warm' });
    gate.decide = (head) => (head.request.sessionId?.startsWith('h') ? { go: false } : { go: true });
    const h1 = submit({ sessionId: 'h1', pin: { id: 'w0', rank: 0 } });
    const h2 = submit({ sessionId: 'h2', pin: { id: 'w1', rank: 0 } });
    classifier.endChanges = true;
    scheduler.completed(first.id);
    expect(gate.checksOf(h1.id)).toBe(2);
    expect(gate.checksOf(h2.id)).toBe(2);
  });

  it('G3: the gate recheck wakes the queue also for classes without busy thresholds', () => {
    const { submit, gate, classifier, out } = setup([policy()]);
    let open = false;
    gate.decide = () => (open ? { go: true } : { go: false });
    const r = submit();
    expect(out.dispatched.has(r.id)).toBe(false);
    open = true;
    classifier.handle.recheck();
    expect(out.dispatched.has(r.id)).toBe(true);
  });

  it('G4: a Hold whose until is not in the future arms no timer and does not spin; the tick asks it again', () => {
    const { submit, gate, clock } = setup([policy()]);
    gate.decide = (_h, now) => ({ go: false, until: now });
    const r = submit();
    expect(gate.checksOf(r.id)).toBe(1);
    // Only the periodic tick (1 s) is armed: nothing asks the gate before it.
    expect(clock.nextAt()).toBe(1000);
    clock.advanceTo(999);
    expect(gate.checksOf(r.id)).toBe(1);
    clock.advanceTo(1000);
    expect(gate.checksOf(r.id)).toBe(2);
  });

  it('G5: for a class without busy thresholds the gate is still asked first; only the capacity check is skipped', () => {
    const { submit, gate, out, placement } = setup([policy()]);
    placement.worker('w0').prefillTokens = 1e9;
    placement.worker('w1').prefillTokens = 1e9;
    const r = submit();
    expect(gate.checksOf(r.id)).toBe(1);
    expect(out.dispatched.has(r.id)).toBe(true);
  });

  it('G6: dispatched(head, worker) runs exactly once, when the head leaves the queue', () => {
    const { submit, gate, scheduler, out } = setup();
    const warm = [submit(), submit(), submit(), submit()];
    const queued = submit();
    expect(gate.dispatched_.filter((d) => d.id === queued.id)).toHaveLength(0);
    scheduler.firstToken(warm[0]!.id);
    expect(out.dispatched.has(queued.id)).toBe(true);
    const w = out.dispatched.get(queued.id)!;
    scheduler.sent(queued.id, w);
    scheduler.firstToken(queued.id);
    scheduler.completed(queued.id);
    expect(gate.dispatched_.filter((d) => d.id === queued.id)).toEqual([{ id: queued.id, worker: w.id, lane: 'shared' }]);
  });

  it('G7: a class with a zero queue limit never queues, is admitted without the gate, and commits Sent through dispatched', () => {
    const { submit, gate, scheduler, out } = setup([policy({ queueLimit: { requests: 0, tokens: null } })]);
    gate.decide = () => ({ go: false });
    const r = submit();
    expect(gate.checksOf(r.id)).toBe(0);
    expect(out.dispatched.has(r.id)).toBe(true);
    expect(gate.dispatched_).toHaveLength(0);
    scheduler.sent(r.id, out.dispatched.get(r.id)!);
    expect(gate.dispatched_).toEqual([{ id: r.id, worker: out.dispatched.get(r.id)!.id, lane: 'shared' }]);
    scheduler.sent(r.id, out.dispatched.get(r.id)!);
    expect(gate.dispatched_).toHaveLength(1);
  });

  it('G8: cancelling a lane root asks the newly exposed head at once and arms its Hold-until timer', () => {
    const { submit, gate, scheduler, clock } = setup([policy()]);
    let rootId = '';
    gate.decide = (head) => (head.request.id === rootId ? { go: false } : { go: false, until: 700 });
    const root = req({ sessionId: 's' });
    rootId = root.id;
    scheduler.submit(root, new Outcomes().handlers(root.id));
    const next = submit({ sessionId: 's' });
    expect(gate.checksOf(next.id)).toBe(0);
    scheduler.aborted(root.id);
    expect(gate.checksOf(next.id)).toBe(1);
    expect(clock.nextAt()).toBe(700);
  });

  it('G8: the earliest pending until wins', () => {
    const { submit, gate, clock } = setup([policy()]);
    gate.decide = (head) => ({ go: false, until: head.request.sessionId === 'a' ? 900 : 300 });
    submit({ sessionId: 'a' });
    submit({ sessionId: 'b' });
    expect(clock.nextAt()).toBe(300);
  });

  it('G9: a Sent that changes nothing in the gate ledger does not wake the queue again', () => {
    const { submit, gate, scheduler, classifier, out } = setup([policy()]);
    gate.decide = (head) => (head.request.sessionId === 'held' ? { go: false } : { go: true });
    const held = submit({ sessionId: 'held' });
    const r = submit();
    const checks = gate.checksOf(held.id);
    scheduler.sent(r.id, out.dispatched.get(r.id)!);
    expect(gate.checksOf(held.id)).toBe(checks);
    classifier.sentChanges = true;
    const r2 = submit({ sessionId: 'y' });
    expect(gate.checksOf(held.id)).toBe(checks);
    scheduler.sent(r2.id, out.dispatched.get(r2.id)!);
    expect(gate.checksOf(held.id)).toBe(checks + 1);
  });
});
