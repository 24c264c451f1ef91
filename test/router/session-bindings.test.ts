import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import type { RequestFields } from '../../router/model-fleet.js';
import { defaultCostPolicy } from '../../router/selection/policies/default-cost.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import { SessionBindings } from '../../router/session-bindings.js';
import { req } from './helpers/requests.js';

const A = { id: 'a', rank: 0 };
const B = { id: 'b', rank: 0 };

describe('SessionBindings', () => {
  it('binds on the first dispatch and reports only new or moved bindings', () => {
    const s = new SessionBindings({ ttlMs: 100, origin: 'r1' });
    expect(s.bind('s1', A, 0)).toEqual({ worker: A, since: 0, origin: 'r1' });
    expect(s.bind('s1', A, 10)).toBeNull();
    expect(s.bind('s1', B, 20)).toEqual({ worker: B, since: 20, origin: 'r1' });
    expect(s.lookup('s1', 20)?.worker).toEqual(B);
  });

  it('forgets a binding idle longer than the TTL, counted from its last use', () => {
    const s = new SessionBindings({ ttlMs: 100 });
    s.bind('s1', A, 0);
    s.bind('s1', A, 90);
    expect(s.lookup('s1', 190)?.worker).toEqual(A);
    expect(s.lookup('s1', 191)).toBeUndefined();
    s.bind('s2', A, 0);
    s.bind('s3', B, 50);
    expect(s.sweep(120)).toBe(1);
    expect([...s.list(120)].map(([id]) => id)).toEqual(['s3']);
  });

  it('first live binding wins: an earlier peer binding replaces ours, a later one does not', () => {
    const s = new SessionBindings({ ttlMs: 1000, origin: 'r2' });
    s.bind('s1', A, 100);
    expect(s.adopt('s1', { worker: B, since: 150, origin: 'r1' }, 160)).toBe(false);
    expect(s.lookup('s1', 160)?.worker).toEqual(A);
    expect(s.adopt('s1', { worker: B, since: 90, origin: 'r1' }, 160)).toBe(true);
    expect(s.lookup('s1', 160)).toEqual({ worker: B, since: 90, origin: 'r1' });
    // Equal times: the smaller origin wins everywhere.
    const t = new SessionBindings({ ttlMs: 1000, origin: 'r2' });
    t.bind('s1', A, 100);
    expect(t.adopt('s1', { worker: B, since: 100, origin: 'r1' }, 100)).toBe(true);
    // An expired binding of ours never blocks a peer's.
    const u = new SessionBindings({ ttlMs: 10, origin: 'r0' });
    u.bind('s1', A, 0);
    expect(u.adopt('s1', { worker: B, since: 50, origin: 'r9' }, 50)).toBe(true);
  });

  it('a failed dispatch or a removed worker drops the binding', () => {
    const s = new SessionBindings({ ttlMs: 1000 });
    s.bind('s1', A, 0);
    s.bind('s2', { id: 'a', rank: 1 }, 0);
    s.bind('s3', B, 0);
    expect(s.invalidate('s3', A)).toBe(false);
    expect(s.invalidate('s3', B)).toBe(true);
    expect(s.dropWorker('a')).toBe(2);
    expect(s.size).toBe(0);
  });

  it('keeps at most maxSessions, dropping the least recently used', () => {
    const s = new SessionBindings({ ttlMs: 1000, maxSessions: 2 });
    s.bind('s1', A, 0);
    s.bind('s2', A, 1);
    s.bind('s1', A, 2);
    s.bind('s3', B, 3);
    expect([...s.list(3)].map(([id]) => id)).toEqual(['s1', 's3']);
  });

  it('rejects a TTL that is not a positive finite number', () => {
    expect(() => new SessionBindings({ ttlMs: 0 })).toThrow(/ttlMs/);
    expect(() => new SessionBindings({ ttlMs: Infinity })).toThrow(/ttlMs/);
  });
});

/** Request fields with the defaults of the scheduler tests' requests. */
const fields = (over: Partial<RequestFields> = {}): RequestFields => {
  const { promptTokens: _, ...f } = req(over);
  return { ...f, ...over };
};
const tokens = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);

function route() {
  const clock = new VirtualClock(0);
  const r = new ModelRouter({ model: 'm', blockSize: 4, clock, seed: 1, sessionAffinity: { ttlMs: 1000 }, policy: defaultCostPolicy() });
  r.addWorker({ id: 'a', totalBlocks: 1000, maxBatchedTokens: 64 });
  r.addWorker({ id: 'b', totalBlocks: 1000, maxBatchedTokens: 64 });
  const submit = (f: RequestFields, t: number[]): Admission => {
    let out: Admission | RouterError | undefined;
    r.submit(f, t, { dispatch: (x) => (out = x), reject: (e) => (out = e) });
    if (!out || RouterError.is(out)) throw new Error(`not dispatched: ${String(out)}`);
    return out;
  };
  const stored = (worker: string, t: number[]) =>
    r.applyEvents({ id: worker, rank: 0 }, {
      ts: 0,
      dpRank: null,
      events: [{ type: 'stored', blockHashes: t.slice(0, Math.floor(t.length / 4)).map((_, i) => BigInt(i + 1)), parentBlockHash: null, tokenIds: t.slice(0, Math.floor(t.length / 4) * 4), blockSize: 4, loraName: null, medium: 'GPU' }],
    });
  return { r, clock, submit, stored };
}

describe('session affinity in selection (AffinityPlacement)', () => {
  it("a bound session's next turn goes to its worker even where the load would send it elsewhere", () => {
    const { submit } = route();
    const first = submit(fields({ sessionId: 's' }), tokens(40));
    // Load the bound worker: without affinity the next turn would go to the idle one.
    submit(fields({ allowedWorkers: [first.worker] }), tokens(400, 5000));
    expect(submit(fields({}), tokens(44)).worker).not.toEqual(first.worker);
    expect(submit(fields({ sessionId: 's' }), tokens(44)).worker).toEqual(first.worker);
  });

  it('a longer cached prefix on another worker beats the binding, and the session moves there', () => {
    const { r, submit, stored } = route();
    const first = submit(fields({ sessionId: 's' }), tokens(40, 900));
    const other = first.worker.id === 'a' ? 'b' : 'a';
    const prompt = tokens(40);
    stored(other, prompt);
    const turn = submit(fields({ sessionId: 's' }), prompt);
    expect(turn.worker.id).toBe(other);
    expect(r.sessions!.lookup('s', 0)?.worker.id).toBe(other);
  });

  it('a retry away from the bound worker invalidates the binding, and the new worker is bound', () => {
    const { r, submit } = route();
    const heard: string[] = [];
    r.observe({
      sessionInvalidated: (s, w) => heard.push(`invalidated ${s} ${w.id}`),
      sessionBound: (s, b) => heard.push(`bound ${s} ${b.worker.id}`),
    });
    const f = fields({ sessionId: 's' });
    const first = submit(f, tokens(40));
    r.sent(f.id, first.worker);
    const again = r.retry(f.id, first.worker) as Admission;
    expect(again.worker).not.toEqual(first.worker);
    expect(heard).toEqual([`bound s ${first.worker.id}`, `invalidated s ${first.worker.id}`, `bound s ${again.worker.id}`]);
    expect(r.sessions!.lookup('s', 0)?.worker).toEqual(again.worker);
  });

  it("removing a worker drops its sessions' bindings", () => {
    const { r, submit } = route();
    const first = submit(fields({ sessionId: 's' }), tokens(40));
    r.removeWorker(first.worker.id);
    expect(r.sessions!.lookup('s', 0)).toBeUndefined();
  });

  it('without affinity, session requests are placed by cost alone', () => {
    const r = new ModelRouter({ model: 'm', blockSize: 4, clock: new VirtualClock(0), seed: 1, policy: defaultCostPolicy() });
    r.addWorker({ id: 'a', totalBlocks: 1000, maxBatchedTokens: 64 });
    r.addWorker({ id: 'b', totalBlocks: 1000, maxBatchedTokens: 64 });
    const placed: Admission[] = [];
    const submit = (f: RequestFields, t: number[]) => r.submit(f, t, { dispatch: (x) => placed.push(x), reject: (e) => expect.fail(e.message) });
    submit(fields({ sessionId: 's' }), tokens(40));
    submit(fields({ allowedWorkers: [placed[0]!.worker] }), tokens(400, 5000));
    submit(fields({ sessionId: 's' }), tokens(44));
    expect(r.sessions).toBeNull();
    expect(placed[2]!.worker).not.toEqual(placed[0]!.worker);
  });
});
