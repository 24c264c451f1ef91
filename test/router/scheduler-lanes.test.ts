import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { Scheduler } from '../../router/scheduler/scheduler.js';
import { ScriptedClassifier } from './helpers/scripted-gate.js';
import { TablePlacement } from './helpers/table-placement.js';
import { Outcomes, policy, req } from './helpers/requests.js';

const busyAt150 = policy({ busy: { prefillTokens: 150 } });
const w0 = { id: 'w0', rank: 0 };

function setup(withClassifier = false, workers = 2) {
  const clock = new VirtualClock(0);
  const placement = new TablePlacement(workers);
  const classifier = withClassifier ? new ScriptedClassifier() : undefined;
  const scheduler = new Scheduler({ clock, placement, classes: [busyAt150], classifier });
  const out = new Outcomes();
  const submit = (over: Parameters<typeof req>[0] = {}) => {
    const r = req(over);
    scheduler.submit(r, out.handlers(r.id));
    return r;
  };
  return { clock, placement, scheduler, out, submit, classifier };
}

describe('L: lanes', () => {
  it('L1: a request with a session id waits in its own lane, without any gate installed', () => {
    const { submit, out, placement } = setup(false);
    placement.worker('w0').prefillTokens = 1000; // w0 is full
    const stuck = submit({ sessionId: 'a', pin: w0 });
    const shared = submit();
    const other = submit({ sessionId: 'b' });
    expect(out.dispatched.has(stuck.id)).toBe(false);
    expect(out.dispatched.get(shared.id)?.id).toBe('w1');
    expect(out.dispatched.get(other.id)?.id).toBe('w1');
  });

  it('L2: a sessionless request waits in the lane its classifier named; a session lane takes precedence', () => {
    const { submit, out, placement, classifier } = setup(true);
    const gate = classifier!.gate!;
    classifier!.overrides = () => ({ lane: 'cold' });
    const lanes: Record<string, string> = {};
    gate.decide = (head) => {
      lanes[head.request.id] = head.lane;
      return head.lane === 'named:cold' ? { go: false } : { go: true };
    };
    placement.worker('w0').prefillTokens = 0;
    const named = submit();
    const session = submit({ sessionId: 's' });
    const behind = submit();
    expect(lanes[named.id]).toBe('named:cold');
    expect(lanes[session.id]).toMatch(/^session:/);
    expect(out.dispatched.has(session.id)).toBe(true);
    // The held named lane holds only itself: 'behind' waits in it too (same named lane), nothing else.
    expect(out.dispatched.has(named.id) || out.dispatched.has(behind.id)).toBe(false);
  });

  it('L3: a head held by the gate blocks only its own lane', () => {
    const { submit, out, classifier } = setup(true);
    classifier!.gate!.decide = (head) => (head.request.sessionId === 'held' ? { go: false } : { go: true });
    const held = submit({ sessionId: 'held' });
    const heldNext = submit({ sessionId: 'held' });
    const shared = submit();
    const other = submit({ sessionId: 'x' });
    expect(out.dispatched.has(held.id) || out.dispatched.has(heldNext.id)).toBe(false);
    expect(out.dispatched.has(shared.id) && out.dispatched.has(other.id)).toBe(true);
  });

  it('L3: a head whose allowed workers are all full blocks only its own lane', () => {
    const { submit, out, placement } = setup(false);
    placement.worker('w0').prefillTokens = 1000;
    const onlyW0 = submit({ sessionId: 'a', allowedWorkers: [w0] });
    const free = submit({ sessionId: 'b' });
    expect(out.dispatched.has(onlyW0.id)).toBe(false);
    expect(out.dispatched.get(free.id)?.id).toBe('w1');
  });

  it('L4: a sessionless request pinned to a full worker holds the shared lane until that worker frees', () => {
    const { submit, out, placement, scheduler } = setup(false);
    const occupant = submit({ pin: w0 });
    submit({ pin: w0 }); // w0 now over 150
    const pinned = submit({ pin: w0 });
    const unpinned = submit();
    expect(placement.worker('w1').prefillTokens).toBe(0);
    expect(out.dispatched.has(pinned.id) || out.dispatched.has(unpinned.id)).toBe(false);
    scheduler.firstToken(occupant.id);
    expect(out.order.slice(-2)).toEqual([pinned.id, unpinned.id]);
  });

  it('L5: a session bound to a busy worker delays only its own later turns', () => {
    const { submit, out, placement } = setup(false);
    placement.worker('w0').prefillTokens = 1000;
    const turn1 = submit({ sessionId: 's', pin: w0 });
    const turn2 = submit({ sessionId: 's' }); // unpinned, but behind its own session's head
    const stranger = submit({ sessionId: 't' });
    expect(out.dispatched.has(turn1.id) || out.dispatched.has(turn2.id)).toBe(false);
    expect(out.dispatched.has(stranger.id)).toBe(true);
  });

  it('L6: lane keys from client session ids are hashed with a per-process random key', () => {
    const laneOf = (secret?: Buffer) => {
      const clock = new VirtualClock(0);
      const classifier = new ScriptedClassifier();
      const lanes: string[] = [];
      classifier.gate!.decide = (head) => {
        lanes.push(head.lane);
        return { go: true };
      };
      const s = new Scheduler({ clock, placement: new TablePlacement(1), classes: [policy()], classifier, laneKeySecret: secret });
      const out = new Outcomes();
      for (const id of ['session-1', 'session-1', 'session-2']) {
        const r = req({ sessionId: id });
        s.submit(r, out.handlers(r.id));
      }
      return lanes;
    };
    const a = laneOf();
    const b = laneOf();
    expect(a[0]).toBe(a[1]);
    expect(a[0]).not.toBe(a[2]);
    expect(a[0]).not.toContain('session-1');
    // Another process (another key) maps the same id elsewhere, so no client can aim at a lane.
    expect(a[0]).not.toBe(b[0]);
    const fixed = Buffer.alloc(32, 7);
    expect(laneOf(fixed)[0]).toBe(laneOf(fixed)[0]);
  });
});
