// End to end: three agent sessions with tool pauses on two workers with small
// KV caches, through the real ModelRouter (model fleet, scheduler, gate) on
// virtual time. Each turn's prompt is the session's whole context so far;
// engines answer with a fixed prefill and decode time.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { ModelRouter } from '../../router/model-router.js';
import type { RoutedRequest } from '../../router/model-fleet.js';
import { thunderAgent } from '../../router/plugins/thunderagent/index.js';

const PREFILL_MS = 100;
const DECODE_MS = 900;
const OUTPUT_TOKENS = 60;

interface Agent {
  session: string;
  /** Context of the first turn. */
  firstPrompt: number;
  /** Tool output appended before each next turn. */
  toolTokens: number;
  toolMs: number;
  turns: number;
  start: number;
  /** Sends its second turn before the first completes (a client racing its own tool call). */
  eager?: boolean;
}

interface TurnLog {
  id: string;
  session: string;
  turn: number;
  prompt: number;
  submitted: number;
  dispatched?: number;
  worker?: string;
  completed?: number;
}

function simulate(agents: Agent[]) {
  const clock = new VirtualClock(0);
  const agent = thunderAgent<RoutedRequest>({ resumeTimeoutMs: 600_000 });
  const route = new ModelRouter({ model: 'agents', blockSize: 16, clock, seed: 7, classifier: agent, sweepIntervalMs: 0 });
  // 60 blocks of 16 tokens: 960 tokens of KV per worker.
  route.addWorker({ id: 'gpu0', totalBlocks: 60, maxBatchedTokens: 4096 });
  route.addWorker({ id: 'gpu1', totalBlocks: 60, maxBatchedTokens: 4096 });
  const log: TurnLog[] = [];
  const paused = new Map<string, number>(); // session -> when it was first seen paused

  const observe = () => {
    for (const p of agent.programs()) if (p.paused && !paused.has(p.session)) paused.set(p.session, clock.now());
  };

  const submit = (a: Agent, turn: number, prompt: number) => {
    const entry: TurnLog = { id: `${a.session}.${turn}`, session: a.session, turn, prompt, submitted: clock.now() };
    log.push(entry);
    const tokens = Array.from({ length: prompt }, (_, i) => a.session.charCodeAt(0) * 100_000 + i);
    const fields = { id: entry.id, sessionId: a.session, sessionFinal: turn === a.turns, policyClass: null, priority: 0, tier: 0, pin: null, allowedWorkers: null };
    route.submit(fields, tokens, {
      dispatch: (admission) => {
        entry.dispatched = clock.now();
        entry.worker = admission.worker.id;
        route.sent(entry.id, admission.worker);
        observe();
        clock.at(clock.now() + PREFILL_MS, () => route.firstToken(entry.id));
        clock.at(clock.now() + PREFILL_MS + DECODE_MS, () => {
          entry.completed = clock.now();
          route.completed(entry.id);
          observe();
          const next = prompt + OUTPUT_TOKENS + a.toolTokens;
          if (turn < a.turns && !(a.eager && turn === 1)) clock.at(clock.now() + a.toolMs, () => submit(a, turn + 1, next));
        });
      },
      reject: (error) => {
        throw error;
      },
    });
    if (a.eager && turn === 1) clock.at(clock.now() + 200, () => submit(a, 2, prompt + OUTPUT_TOKENS + a.toolTokens));
  };

  for (const a of agents) clock.at(a.start, () => submit(a, 1, a.firstPrompt));
  clock.runAll(10_000);
  return { log, paused, agent, route, clock };
}

describe('ThunderAgent end to end', () => {
  const agents: Agent[] = [
    { session: 'A', firstPrompt: 300, toolTokens: 80, toolMs: 1500, turns: 4, start: 0, eager: true },
    { session: 'B', firstPrompt: 260, toolTokens: 120, toolMs: 2500, turns: 4, start: 50 },
    { session: 'C', firstPrompt: 220, toolTokens: 200, toolMs: 400, turns: 4, start: 100 },
  ];

  it('runs three agent sessions to completion, one turn in flight per session', () => {
    const { log, agent, route } = simulate(agents);
    const turn = (id: string) => log.find((t) => t.id === id)!;
    expect(log).toHaveLength(12);
    expect(log.every((t) => t.completed !== undefined)).toBe(true);
    for (const t of log.filter((x) => x.turn > 1)) expect(t.dispatched!).toBeGreaterThanOrEqual(turn(`${t.session}.${t.turn - 1}`).completed!);
    // A's second turn came 200 ms in, while its first was running: it went the moment the first completed.
    expect(turn('A.2').submitted).toBe(200);
    expect(turn('A.2').dispatched).toBe(turn('A.1').completed);
    // Nobody needed the forced dispatch; every final turn ended its program and nothing stays booked.
    for (const t of log) expect(t.dispatched! - t.submitted).toBeLessThan(600_000);
    expect(agent.programs()).toEqual([]);
    expect(agent.usage()).toEqual({});
    expect(route.fleet.bookedRequests).toBe(0);
  });

  it('pauses the smallest acting program when a session grows past the threshold and resumes it when room frees', () => {
    const { log, paused } = simulate(agents);
    const turn = (id: string) => log.find((t) => t.id === id)!;
    // C's second turn grew C's context on B's worker past 95% of its KV: B, acting on its tool, was paused.
    expect([...paused.keys()]).toEqual(['B']);
    expect(turn('C.2').worker).toBe(turn('B.1').worker);
    expect(paused.get('B')).toBe(turn('C.2').dispatched);
    // B's next turn waited for room under the resume ceiling, and went back to its own worker when C's final turn ended.
    expect(turn('B.2').dispatched!).toBeGreaterThan(turn('B.2').submitted);
    expect(turn('B.2').dispatched).toBe(turn('C.4').completed);
    expect(turn('B.2').worker).toBe(turn('B.1').worker);
    // Meanwhile the others kept going: their turns were dispatched as they came.
    for (const id of ['A.3', 'C.3', 'C.4']) expect(turn(id).dispatched).toBe(turn(id).submitted);
  });
});
