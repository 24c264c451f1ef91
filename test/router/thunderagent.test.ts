import { describe, expect, it, vi } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import type { RequestFields, RoutedRequest } from '../../router/model-fleet.js';
import { createClassifier } from '../../router/plugins/classifiers.js';
import { createThunderAgent, thunderAgent, THUNDERAGENT_DEFAULTS, type ThunderAgent, type ThunderAgentOptions } from '../../router/plugins/thunderagent/index.js';
import type { Admission, PolicyClass } from '../../router/scheduler/contracts.js';

// Every worker holds 100 blocks of 16 tokens: 1600 tokens of KV. A program is
// charged its context plus 100 buffer tokens, so with the defaults a worker
// pauses over 1520 charged tokens, pauses down to 1280, resumes under 1360.
const BLOCK = 16;
const BLOCKS = 100;

function fleet(options: Partial<ThunderAgentOptions> = {}, setup: { workers?: string[]; classes?: PolicyClass[] } = {}) {
  const clock = new VirtualClock(0);
  const agent = thunderAgent<RoutedRequest>(options);
  // No periodic tick: only the gate's own hold times and lifecycle events move the queue.
  const route = new ModelRouter({ model: 'm', blockSize: BLOCK, clock, seed: 1, classifier: agent, tickMs: 1e9, sweepIntervalMs: 0, classes: setup.classes });
  for (const id of setup.workers ?? ['a']) route.addWorker({ id, totalBlocks: BLOCKS, maxBatchedTokens: 8192 });
  const outcome = new Map<string, Admission | RouterError>();
  const bases = new Map<string, number>();
  let n = 0;
  /** Submits a turn; turns of one session share their prompt's prefix, as an agent's growing context does. */
  const turn = (session: string | null, prompt: number, over: Partial<RequestFields> = {}) => {
    const id = `${session ?? 'x'}${n++}`;
    const key = session ?? id;
    if (!bases.has(key)) bases.set(key, 1 + bases.size * 100_000);
    const tokens = Array.from({ length: prompt }, (_, i) => bases.get(key)! + i);
    const fields: RequestFields = { id, sessionId: session, sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null, ...over };
    route.submit(fields, tokens, { dispatch: (a) => outcome.set(id, a), reject: (e) => outcome.set(id, e) });
    return id;
  };
  const workerOf = (id: string) => {
    const o = outcome.get(id);
    return o && !RouterError.is(o) ? o.worker.id : undefined;
  };
  const sent = (id: string) => route.sent(id, (outcome.get(id) as Admission).worker);
  const finish = (id: string) => {
    route.firstToken(id);
    route.completed(id);
  };
  /** Dispatched, sent, completed: a turn that ran to its end. */
  const run = (id: string) => {
    expect(workerOf(id)).toBeDefined();
    sent(id);
    finish(id);
  };
  const program = (session: string) => agent.programs().find((p) => p.session === session);
  return { clock, agent, route, outcome, turn, workerOf, sent, finish, run, program };
}

describe('C5: ThunderAgent parameters', () => {
  it('C5: the defaults, and every parameter read from config (seconds become ms)', () => {
    expect(THUNDERAGENT_DEFAULTS).toEqual({
      pauseThreshold: 0.95,
      pauseTarget: 0.8,
      resumeHysteresis: 0.1,
      resumeTimeoutMs: 1_800_000,
      retentionMs: 1_800_000,
      bufferPerProgram: 100,
      maxPrograms: 10_000,
    });
    expect((createClassifier('thunderagent') as ThunderAgent).options).toEqual(THUNDERAGENT_DEFAULTS);
    const t = createThunderAgent({
      pause_threshold: 0.9,
      pause_target: 0.7,
      resume_hysteresis: 0.05,
      resume_timeout_seconds: 60,
      session_retention_seconds: 120,
      buffer_per_program: 0,
      max_programs: 5,
    });
    expect(t.options).toEqual({ pauseThreshold: 0.9, pauseTarget: 0.7, resumeHysteresis: 0.05, resumeTimeoutMs: 60_000, retentionMs: 120_000, bufferPerProgram: 0, maxPrograms: 5 });
  });

  it('C5: an unknown parameter fails start-up by name; the removed scheduler_interval_seconds says what replaced it', () => {
    expect(() => createClassifier('thunderagent', { pause_treshold: 0.9 })).toThrow(/thunderagent: unknown parameter "pause_treshold"/);
    expect(() => createClassifier('thunderagent', { scheduler_interval_seconds: 5 })).toThrow(
      /thunderagent: parameter "scheduler_interval_seconds" was removed: .*dispatch gate on every capacity change, lifecycle event and hold deadline/,
    );
  });

  it('C5: values out of range or inconsistent with each other fail by name', () => {
    expect(() => createThunderAgent({ pause_threshold: 1.2 })).toThrow(/parameter "pause_threshold" must be <= 1/);
    expect(() => createThunderAgent({ pause_target: 0.99 })).toThrow(/thunderagent: pause_target must not exceed pause_threshold \(0.95\), got 0.99/);
    expect(() => createThunderAgent({ resume_hysteresis: 0.95 })).toThrow(/resume_hysteresis must be below pause_threshold/);
    expect(() => createThunderAgent({ max_programs: 0 })).toThrow(/parameter "max_programs" must be >= 1/);
    expect(() => createThunderAgent({ session_retention_seconds: 0 })).toThrow(/parameter "session_retention_seconds" must be > 0/);
    expect(() => createThunderAgent('fast')).toThrow(/thunderagent: parameters must be an object/);
    // From code, the option names.
    expect(() => thunderAgent({ pauseTarget: 0.99 })).toThrow(/thunderagent: pauseTarget must not exceed pauseThreshold/);
    expect(() => thunderAgent({ retentionMs: Infinity })).toThrow(/retentionMs must be a finite time > 0/);
  });

  it('one instance serves one scheduler', () => {
    const agent = thunderAgent();
    new ModelRouter({ model: 'm', blockSize: BLOCK, clock: new VirtualClock(0), classifier: agent, sweepIntervalMs: 0 });
    expect(() => new ModelRouter({ model: 'm', blockSize: BLOCK, clock: new VirtualClock(0), classifier: agent, sweepIntervalMs: 0 })).toThrow(/one scheduler/);
  });
});

describe('T: ThunderAgent', () => {
  it('T1: classify records the turn and returns at once without overrides; the gate answers from the program ledger', () => {
    const f = fleet();
    const classify = vi.spyOn(f.agent, 'classify');
    const a1 = f.turn('A', 300);
    expect(classify).toHaveReturnedWith({});
    expect(f.workerOf(a1)).toBe('a');
    // The gate committed the turn when it left the queue: a reasoning program charged on its worker.
    expect(f.program('A')).toMatchObject({ worker: 'a', tokens: 300, reasoning: true, paused: false, charge: 400 });
    expect(f.agent.usage()).toEqual({ a: 400 });
  });

  it('T1: lifecycle events settle the ledger and wake the queue only when something changed (G9)', () => {
    const f = fleet({}, { workers: ['a', 'b'] });
    const a1 = f.turn('A', 300);
    const a2 = f.turn('A', 320);
    expect(f.workerOf(a2)).toBeUndefined();
    // A Sent to the worker the turn was admitted to changes nothing.
    expect(f.agent.onEvent({ type: 'sent', requestId: a1, worker: { id: 'a', rank: 0 } })).toBe(false);
    // A retry elsewhere moves the program's charge with it.
    const moved = f.route.retry(a1, { id: 'a', rank: 0 });
    expect(RouterError.is(moved)).toBe(false);
    f.route.sent(a1, (moved as Admission).worker);
    expect(f.agent.usage()).toEqual({ b: 400 });
    expect(f.program('A')?.worker).toBe('b');
    // The completion settles the program (acting, still charged) and wakes the held turn.
    f.finish(a1);
    expect(f.workerOf(a2)).toBe('b');
    expect(f.program('A')).toMatchObject({ tokens: 320, reasoning: true, charge: 420 });
  });

  it('T2: one turn in flight per session; another session is not held behind it', () => {
    const f = fleet({}, { workers: ['a', 'b'] });
    const a1 = f.turn('A', 300);
    const a2 = f.turn('A', 340);
    const b1 = f.turn('B', 200);
    expect(f.workerOf(a2)).toBeUndefined();
    expect(f.workerOf(b1)).toBeDefined();
    f.sent(a1);
    f.route.firstToken(a1);
    expect(f.workerOf(a2)).toBeUndefined();
    f.route.completed(a1);
    expect(f.workerOf(a2)).toBe(f.workerOf(a1));
  });

  it('T3: a continuing turn of an active program always goes, to its own worker, even past capacity', () => {
    const f = fleet({}, { workers: ['a', 'b'] });
    f.run(f.turn('A', 600)); // a: 700
    f.run(f.turn('B', 700)); // most headroom: b: 800
    f.run(f.turn('C', 700)); // a: 700 + 800 = 1500
    expect([f.program('A')?.worker, f.program('B')?.worker, f.program('C')?.worker]).toEqual(['a', 'b', 'a']);
    const a2 = f.turn('A', 900); // would be 1800 on a; b has the room, but A's context lives on a
    expect(f.workerOf(a2)).toBe('a');
    expect(f.program('A')).toMatchObject({ tokens: 900, reasoning: true, paused: false });
  });

  it('T4: a new program starts only within full capacity', () => {
    const f = fleet();
    f.turn('A', 1000); // 1100
    const b1 = f.turn('B', 400); // 1100 + 500 = 1600: exactly full
    expect(f.workerOf(b1)).toBe('a');
    const c1 = f.turn('C', 1); // 1600 + 101 > 1600
    expect(f.workerOf(c1)).toBeUndefined();
  });

  it('T4: a paused program resumes only under the resume ceiling, while a new one of the same size starts', () => {
    const f = fleet();
    f.run(f.turn('A', 300)); // A acting: 400
    f.run(f.turn('B', 700)); // B acting: 800, usage 1200
    const b2 = f.turn('B', 1100, { sessionFinal: true }); // B grows to 1200: usage 1600 > 1520, A (acting) is paused
    expect(f.workerOf(b2)).toBe('a');
    expect(f.program('A')).toMatchObject({ paused: true, charge: 0 });
    expect(f.agent.usage()).toEqual({ a: 1200 });
    const a2 = f.turn('A', 200); // needs 400: 1600 is within capacity but over the ceiling of 1360
    const c1 = f.turn('C', 300); // a new program of the same charge fits within full capacity
    expect(f.workerOf(a2)).toBeUndefined();
    expect(f.workerOf(c1)).toBe('a');
    f.sent(b2);
    f.finish(b2); // B's final turn ends its program: usage 400
    expect(f.program('B')).toBeUndefined();
    expect(f.workerOf(a2)).toBe('a');
    expect(f.program('A')).toMatchObject({ paused: false, reasoning: true, charge: 400 });
  });

  it('T5: a held turn is dispatched anyway after resume_timeout_seconds, counted from the turn\'s registration', () => {
    const f = fleet({ resumeTimeoutMs: 10_000 });
    f.turn('A', 1400); // 1500: no room for anyone else
    const b1 = f.turn('B', 200);
    f.clock.advanceTo(2000);
    const b2 = f.turn('B', 250); // registered at 2 s, behind b1 in B's lane
    f.clock.advanceTo(9999);
    expect(f.workerOf(b1)).toBeUndefined();
    f.clock.advanceTo(10_000);
    expect(f.workerOf(b1)).toBe('a');
    // b2 is now the head, held by its session's turn in flight, but its own clock started at 2 s.
    expect(f.workerOf(b2)).toBeUndefined();
    expect(f.clock.nextAt()).toBe(12_000);
    f.clock.advanceTo(12_000);
    expect(f.workerOf(b2)).toBe('a');
  });

  it('T6: over the pause threshold, the smallest acting programs are paused until usage is at the target', () => {
    const f = fleet();
    f.run(f.turn('A', 100)); // 200
    f.run(f.turn('B', 200)); // 300
    f.run(f.turn('C', 400)); // 500: usage 1000
    const d1 = f.turn('D', 500); // 600: usage 1600 > 1520
    expect(f.workerOf(d1)).toBe('a');
    // A (200) then B (300) go; 1100 <= 1280 stops it; C stays, D is reasoning.
    expect(f.agent.programs().map((p) => [p.session, p.paused])).toEqual([
      ['A', true],
      ['B', true],
      ['C', false],
      ['D', false],
    ]);
    expect(f.agent.usage()).toEqual({ a: 1100 });
  });

  it('T6: paused programs resume greedily into headroom', () => {
    const f = fleet();
    f.run(f.turn('A', 100));
    f.run(f.turn('B', 200));
    f.run(f.turn('C', 400));
    const d1 = f.turn('D', 500, { sessionFinal: true }); // pauses A and B; usage 1100
    const b2 = f.turn('B', 200); // needs 300: 1400 > 1360
    const a2 = f.turn('A', 100); // needs 200: 1300 <= 1360, goes although B asked first
    expect(f.workerOf(a2)).toBe('a');
    expect(f.workerOf(b2)).toBeUndefined();
    f.run(d1); // D ends: usage 700, room for B
    expect(f.workerOf(b2)).toBe('a');
    expect(f.agent.usage()).toEqual({ a: 1000 });
  });

  it('T7: a turn pinned to a worker is checked for room on that worker', () => {
    const f = fleet({}, { workers: ['a', 'b'] });
    const a1 = f.turn('A', 1400, { sessionFinal: true });
    expect(f.workerOf(a1)).toBe('a');
    const onA = f.turn('B', 200, { pin: { id: 'a', rank: 0 } }); // b is empty, but the pin says a
    const onB = f.turn('C', 200, { pin: { id: 'b', rank: 0 } });
    expect(f.workerOf(onA)).toBeUndefined();
    expect(f.workerOf(onB)).toBe('b');
    f.run(a1);
    expect(f.workerOf(onA)).toBe('a');
  });

  it('T8: an idle program past retention counts as gone when the gate checks, even in a quiet period', () => {
    const f = fleet({ retentionMs: 60_000 });
    f.run(f.turn('A', 1400)); // acting from t=0, charged 1500
    f.clock.advanceTo(1000);
    const b1 = f.turn('B', 200);
    expect(f.workerOf(b1)).toBeUndefined();
    // No event arrives: nothing settles the ledger before B is asked again.
    f.clock.advanceTo(59_999);
    expect(f.workerOf(b1)).toBeUndefined();
    f.clock.advanceTo(60_000);
    expect(f.workerOf(b1)).toBe('a');
    expect(f.program('A')).toBeUndefined();
  });

  it('T8: a held session waits no later than the next retention deadline', () => {
    const f = fleet({ retentionMs: 60_000 });
    f.run(f.turn('A', 700)); // idle from t=0
    f.clock.advanceTo(5000);
    f.run(f.turn('C', 600)); // idle from t=5 s; usage 1500
    f.clock.advanceTo(6000);
    f.turn('B', 200);
    // A expires first (60 s), before the forced dispatch (30 min) and before C (65 s).
    expect(f.clock.nextAt()).toBe(60_000);
  });

  it('T8: a session with a turn waiting is not idle: its paused program keeps the resume ceiling past retention', () => {
    const f = fleet({ retentionMs: 60_000 });
    f.run(f.turn('A', 300)); // A acting from t=0: 400
    f.run(f.turn('B', 700)); // 800: usage 1200
    const b2 = f.turn('B', 1100); // B grows to 1200: 1600 > 1520 pauses A
    expect(f.program('A')?.paused).toBe(true);
    f.clock.advanceTo(1000);
    const a2 = f.turn('A', 300); // needs 400: 1600 is over the ceiling of 1360
    f.clock.advanceTo(61_000);
    f.sent(b2);
    f.route.firstToken(b2); // a wake, past A's retention deadline
    // Had A counted as gone, its turn would start as a new program within full capacity (1600).
    expect(f.workerOf(a2)).toBeUndefined();
    expect(f.program('A')).toMatchObject({ paused: true });
  });

  it('T9: above the program limit, the longest-idle program is evicted', () => {
    const f = fleet({ maxPrograms: 2 }, { workers: ['a', 'b'] });
    f.run(f.turn('A', 100));
    f.clock.advanceTo(10);
    f.run(f.turn('B', 100));
    f.clock.advanceTo(20);
    const c1 = f.turn('C', 100);
    expect(f.workerOf(c1)).toBeDefined();
    expect(f.agent.programs().map((p) => p.session)).toEqual(['B', 'C']);
    expect(Object.values(f.agent.usage()).reduce((s, v) => s + v, 0)).toBe(400);
  });

  it('T9: a program with a turn waiting is not evicted, even when it has been idle longest', () => {
    const f = fleet({ maxPrograms: 2 });
    f.run(f.turn('A', 300)); // idle from 0
    f.clock.advanceTo(10);
    f.run(f.turn('B', 700));
    f.turn('B', 1100); // B reasoning; pauses A
    f.clock.advanceTo(20);
    const a2 = f.turn('A', 300); // A waits for room under the ceiling
    const c1 = f.turn('C', 1); // a third program: A is the only idle one, but it is waiting
    expect(f.workerOf(a2)).toBeUndefined();
    expect(f.workerOf(c1)).toBe('a');
    expect(f.agent.programs().map((p) => p.session)).toEqual(['A', 'B', 'C']);
  });

  it('T10: a request the gate never saw is charged at Sent, and an ungated final turn ends its program', () => {
    const direct: PolicyClass = { name: 'direct', quantum: 100, queuePolicy: 'fcfs', busy: null, queueLimit: { requests: 0, tokens: null }, sloMs: null };
    const f = fleet({}, { classes: [direct] });
    const a1 = f.turn('A', 300);
    expect(f.workerOf(a1)).toBe('a');
    expect(f.program('A')).toBeUndefined(); // admitted without the gate: not yet committed
    f.sent(a1);
    expect(f.program('A')).toMatchObject({ worker: 'a', reasoning: true, charge: 400 });
    f.finish(a1);
    const a2 = f.turn('A', 350, { sessionFinal: true });
    f.sent(a2);
    expect(f.program('A')).toMatchObject({ tokens: 350, reasoning: true });
    f.finish(a2);
    expect(f.program('A')).toBeUndefined();
    expect(f.agent.usage()).toEqual({});
  });

  it('T11: with no queue threshold configured (the documented launch), one turn per session still holds', () => {
    const clock = new VirtualClock(0);
    const agent = thunderAgent<RoutedRequest>();
    const route = new ModelRouter({ model: 'm', blockSize: BLOCK, clock, classifier: agent });
    route.addWorker({ id: 'a', totalBlocks: BLOCKS, maxBatchedTokens: 8192 });
    const got: string[] = [];
    const submit = (id: string) =>
      route.submit(
        { id, sessionId: 's', sessionFinal: false, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null },
        [1, 2, 3, 4, 5],
        { dispatch: () => got.push(id), reject: (e) => got.push(`${id}:${e.code}`) },
      );
    submit('t1');
    submit('t2');
    expect(got).toEqual(['t1']);
    route.completed('t1');
    expect(got).toEqual(['t1', 't2']);
    route.close();
  });

  it('a rejected turn leaves no registration behind: its session can expire', () => {
    const full: PolicyClass = { name: 'small', quantum: 100, queuePolicy: 'fcfs', busy: null, queueLimit: { requests: 1, tokens: null }, sloMs: null };
    const f = fleet({ retentionMs: 1000 }, { classes: [full] });
    f.run(f.turn('A', 1400)); // idle from 0, charged 1500
    const b1 = f.turn('B', 200); // held for room: the class queue holds one request
    const a2 = f.turn('A', 300); // A's turn is continuing, but B fills the queue: rejected at admission
    expect((f.outcome.get(a2) as RouterError).code).toBe('KVR_ERR_QUEUE_FULL');
    // Were A's rejected turn still registered, A would never count as idle and B would wait for the forced dispatch.
    f.clock.advanceTo(1000);
    expect(f.workerOf(b1)).toBe('a');
  });
});
