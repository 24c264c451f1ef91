// Generated workloads (agent sessions, cold prompts) and the workload helpers.
import { describe, expect, it } from 'vitest';
import { agentSessions } from '../../sim/replay/agent-sessions.js';
import { coldPrompts } from '../../sim/replay/cold-prompts.js';
import { checkWorkload, limitWorkload, mergeWorkloads, promptTokens, sessionFinals, type ReplayRequest } from '../../sim/replay/workload.js';

function startsWith(long: Uint32Array, prefix: Uint32Array): boolean {
  if (prefix.length > long.length) return false;
  for (let i = 0; i < prefix.length; i++) if (long[i] !== prefix[i]) return false;
  return true;
}

function bySession(requests: readonly ReplayRequest[]): Map<string, ReplayRequest[]> {
  const sessions = new Map<string, ReplayRequest[]>();
  for (const r of requests) sessions.set(r.sessionId!, [...(sessions.get(r.sessionId!) ?? []), r]);
  return sessions;
}

describe('agent sessions', () => {
  const options = {
    sessions: 5,
    turns: [2, 5] as const,
    systemPromptTokens: 300,
    taskTokens: [50, 100] as const,
    toolResultTokens: [20, 80] as const,
    outputTokens: [5, 30] as const,
    toolPauseMs: [100, 900] as const,
    seed: 7,
  };
  const w = agentSessions(options);

  it('is a valid workload with the session count and turn range asked for', () => {
    expect(() => checkWorkload(w)).not.toThrow();
    const sessions = bySession(w.requests);
    expect(sessions.size).toBe(5);
    for (const turns of sessions.values()) {
      expect(turns.length).toBeGreaterThanOrEqual(2);
      expect(turns.length).toBeLessThanOrEqual(5);
    }
  });

  it("each turn's prompt is the previous prompt + its output + a tool result", () => {
    for (const turns of bySession(w.requests).values()) {
      for (let t = 1; t < turns.length; t++) {
        const prev = turns[t - 1]!;
        const cur = turns[t]!;
        const tool = cur.inputLength - prev.inputLength - prev.outputLength;
        expect(tool).toBeGreaterThanOrEqual(20);
        expect(tool).toBeLessThanOrEqual(80);
        expect(startsWith(promptTokens(cur), promptTokens(prev))).toBe(true);
      }
    }
  });

  it('later turns arrive a tool-call pause after the previous turn; first turns at a time', () => {
    for (const turns of bySession(w.requests).values()) {
      expect('atMs' in turns[0]!.arrival).toBe(true);
      for (const t of turns.slice(1)) {
        expect('delayMs' in t.arrival).toBe(true);
        const delay = (t.arrival as { delayMs: number }).delayMs;
        expect(delay).toBeGreaterThanOrEqual(100);
        expect(delay).toBeLessThanOrEqual(900);
      }
    }
  });

  it('sessions share the system prompt and nothing after it', () => {
    const firsts = [...bySession(w.requests).values()].map((turns) => promptTokens(turns[0]!));
    for (const p of firsts) expect(p.subarray(0, 300)).toEqual(firsts[0]!.subarray(0, 300));
    expect(firsts[1]![300]).not.toBe(firsts[0]![300]);
  });

  it('the same seed gives the same workload; another seed another one', () => {
    const again = agentSessions(options);
    expect(again.requests.map((r) => [r.id, r.arrival, r.inputLength, r.outputLength])).toEqual(w.requests.map((r) => [r.id, r.arrival, r.inputLength, r.outputLength]));
    expect(promptTokens(again.requests[3]!)).toEqual(promptTokens(w.requests[3]!));
    const other = agentSessions({ ...options, seed: 8 });
    expect(promptTokens(other.requests[0]!)).not.toEqual(promptTokens(w.requests[0]!));
  });

  it('sessions start in order, spaced by the session gap', () => {
    const starts = [...bySession(w.requests).values()].map((turns) => (turns[0]!.arrival as { atMs: number }).atMs);
    expect(starts[0]).toBe(0);
    for (let i = 1; i < starts.length; i++) expect(starts[i]!).toBeGreaterThanOrEqual(starts[i - 1]!);
    const fixed = agentSessions({ ...options, sessionGapMs: 0, startMs: 500 });
    expect(fixed.requests.filter((r) => 'atMs' in r.arrival).every((r) => (r.arrival as { atMs: number }).atMs === 500)).toBe(true);
  });

  it('without a system prompt, sessions share nothing', () => {
    const bare = agentSessions({ ...options, systemPromptTokens: 0 });
    const firsts = [...bySession(bare.requests).values()].map((turns) => promptTokens(turns[0]!));
    expect(firsts[1]![0]).not.toBe(firsts[0]![0]);
  });

  it.each([
    [{ sessions: 0 }, /sessions must be an integer >= 1/],
    [{ turns: [3, 2] as const }, /turns must be/],
    [{ toolPauseMs: -1 }, /toolPauseMs must be/],
    [{ systemPromptTokens: 1.5 }, /systemPromptTokens/],
    [{ sessionGapMs: Number.NaN }, /sessionGapMs/],
  ])('rejects bad options, naming them (%o)', (bad, message) => {
    expect(() => agentSessions(bad)).toThrow(message);
  });
});

describe('cold prompts', () => {
  const w = coldPrompts({ count: 4, intervalMs: 250, startMs: 100, promptTokens: [1000, 2000], outputTokens: 3, seed: 1 });

  it('arrive at a fixed interval with no session', () => {
    expect(w.requests.map((r) => r.arrival)).toEqual([{ atMs: 100 }, { atMs: 350 }, { atMs: 600 }, { atMs: 850 }]);
    expect(w.requests.every((r) => r.sessionId === null && r.outputLength === 3)).toBe(true);
  });

  it('are unique: no two prompts share even their first token', () => {
    const firsts = w.requests.map((r) => promptTokens(r)[0]);
    expect(new Set(firsts).size).toBe(4);
    for (const r of w.requests) {
      // writeTokens fills exactly inputLength slots and leaves the rest of a larger buffer alone.
      const buffer = new Uint32Array(r.inputLength + 4).fill(7);
      r.writeTokens(buffer);
      expect([...buffer.subarray(r.inputLength)]).toEqual([7, 7, 7, 7]);
      expect(buffer.subarray(0, r.inputLength).filter((t) => t === 7).length).toBeLessThan(3);
      expect(r.inputLength).toBeGreaterThanOrEqual(1000);
      expect(r.inputLength).toBeLessThanOrEqual(2000);
    }
  });

  it('share nothing with agent sessions of the same seed', () => {
    const agent = agentSessions({ sessions: 1, seed: 1 });
    expect(promptTokens(agent.requests[0]!)[0]).not.toBe(promptTokens(w.requests[0]!)[0]);
  });

  it('rejects a bad interval', () => {
    expect(() => coldPrompts({ intervalMs: -5 })).toThrow(/intervalMs/);
  });
});

describe('workload helpers', () => {
  const agent = agentSessions({ sessions: 3, turns: 3, seed: 2 });
  const cold = coldPrompts({ count: 2 });

  it('merge keeps every request and session order', () => {
    const both = mergeWorkloads('mix', agent, cold);
    expect(both.requests).toHaveLength(agent.requests.length + 2);
    expect(both.name).toBe('mix');
  });

  it('merge refuses colliding ids or sessions', () => {
    expect(() => mergeWorkloads('twice', agent, agent)).toThrow(/session "agent0" appears in both|used twice/);
    expect(() => mergeWorkloads('ids', cold, coldPrompts({ count: 1 }))).toThrow(/id is used twice/);
  });

  it('limit keeps a prefix, and the last kept turn of a session becomes final', () => {
    const first4 = limitWorkload(agent, 4);
    expect(first4.requests.map((r) => r.id)).toEqual(['agent0.t0', 'agent0.t1', 'agent0.t2', 'agent1.t0']);
    expect(sessionFinals(first4.requests)).toEqual([false, false, true, true]);
    expect(() => limitWorkload(agent, 0)).toThrow(/limit/);
  });

  it('checkWorkload rejects a delayed turn with no earlier turn in its session', () => {
    const lone: ReplayRequest = { id: 'x', sessionId: 's', arrival: { delayMs: 5 }, inputLength: 1, outputLength: 1, writeTokens: () => {} };
    expect(() => checkWorkload({ name: 'w', requests: [lone] })).toThrow(/earlier turn/);
  });
});
