// Generated workload: multi-turn agent sessions. Each session starts with a
// shared system prompt (tool definitions every session sends) and its own
// task; each later turn sends the previous prompt, the previous turn's output
// (the tool call) and the tool's result, after a tool-call pause. So prompts
// share a growing prefix within a session and the system prompt across
// sessions, the shape ThunderAgent-style scheduling cares about.
import { checkIntRange, mix32, SeededRandom, type IntRange } from './random.js';
import { writeKeyTokens } from './synthetic-tokens.js';
import { withDefaults, type ReplayRequest, type Workload } from './workload.js';

export interface AgentSessionOptions {
  /** Sessions to generate (default 16). */
  sessions?: number;
  /** Turns per session (default [4, 10]). */
  turns?: IntRange;
  /** Tokens of the system prompt every session starts with; 0 for none (default 2048). */
  systemPromptTokens?: number;
  /** The first user message (default [256, 2048]). */
  taskTokens?: IntRange;
  /** Each tool result appended before a later turn (default [128, 4096]). */
  toolResultTokens?: IntRange;
  /** Tokens each turn generates (default [32, 512]). */
  outputTokens?: IntRange;
  /** Pause between a turn completing and the next turn arriving (default [100, 2000] ms). */
  toolPauseMs?: IntRange;
  /** Mean gap between session starts, exponentially distributed (default 1000 ms). */
  sessionGapMs?: number;
  /** Start of the first session (default 0). */
  startMs?: number;
  seed?: number;
  /** Prefix of request and session ids (default "agent"). */
  idPrefix?: string;
  /** Tag of every request, for reports split by kind of traffic (default "agent"). */
  tag?: string;
}

export const AGENT_SESSION_DEFAULTS: Required<AgentSessionOptions> = {
  sessions: 16,
  turns: [4, 10],
  systemPromptTokens: 2048,
  taskTokens: [256, 2048],
  toolResultTokens: [128, 4096],
  outputTokens: [32, 512],
  toolPauseMs: [100, 2000],
  sessionGapMs: 1000,
  startMs: 0,
  seed: 0,
  idPrefix: 'agent',
  tag: 'agent',
};

interface Segment {
  key: number;
  length: number;
}

function checkOptions(o: Required<AgentSessionOptions>): void {
  if (!Number.isInteger(o.sessions) || o.sessions < 1) throw new RangeError(`sessions must be an integer >= 1, got ${o.sessions}`);
  if (!Number.isInteger(o.systemPromptTokens) || o.systemPromptTokens < 0) {
    throw new RangeError(`systemPromptTokens must be an integer >= 0, got ${o.systemPromptTokens}`);
  }
  checkIntRange('turns', o.turns, 1);
  checkIntRange('taskTokens', o.taskTokens, 1);
  checkIntRange('toolResultTokens', o.toolResultTokens, 1);
  checkIntRange('outputTokens', o.outputTokens, 1);
  checkIntRange('toolPauseMs', o.toolPauseMs, 0);
  if (!Number.isFinite(o.sessionGapMs) || o.sessionGapMs < 0) throw new RangeError(`sessionGapMs must be a finite number >= 0, got ${o.sessionGapMs}`);
  if (!Number.isFinite(o.startMs) || o.startMs < 0) throw new RangeError(`startMs must be a finite number >= 0, got ${o.startMs}`);
  if (typeof o.idPrefix !== 'string' || o.idPrefix === '') throw new RangeError('idPrefix must be a non-empty string');
  if (typeof o.tag !== 'string' || o.tag === '') throw new RangeError('tag must be a non-empty string');
}

/** Writes the prompt made of the first `count` segments. */
function writePrompt(out: Uint32Array, namespace: number, segments: readonly Segment[], count: number): void {
  let offset = 0;
  for (let i = 0; i < count; i++) {
    const s = segments[i]!;
    writeKeyTokens(out, offset, namespace, s.key, s.length);
    offset += s.length;
  }
}

export function agentSessions(options: AgentSessionOptions = {}): Workload {
  const o = withDefaults(AGENT_SESSION_DEFAULTS, options);
  checkOptions(o);
  const random = new SeededRandom(o.seed);
  // Segment keys are unique within this namespace; other seeds and generators use others.
  const namespace = mix32((o.seed >>> 0) ^ 0x41474e54);
  let nextKey = 1;
  const system: Segment[] = o.systemPromptTokens > 0 ? [{ key: 0, length: o.systemPromptTokens }] : [];
  const requests: ReplayRequest[] = [];
  let start = o.startMs;
  for (let s = 0; s < o.sessions; s++) {
    if (s > 0) start += random.exponential(o.sessionGapMs);
    const sessionId = `${o.idPrefix}${s}`;
    const segments: Segment[] = [...system, { key: nextKey++, length: random.int(o.taskTokens) }];
    let length = segments.reduce((sum, seg) => sum + seg.length, 0);
    const turns = random.int(o.turns);
    for (let t = 0; t < turns; t++) {
      if (t > 0) {
        const toolResult = { key: nextKey++, length: random.int(o.toolResultTokens) };
        segments.push(toolResult);
        length += toolResult.length;
      }
      const output = { key: nextKey++, length: random.int(o.outputTokens) };
      const count = segments.length;
      const inputLength = length;
      requests.push({
        id: `${sessionId}.t${t}`,
        sessionId,
        arrival: t === 0 ? { atMs: start } : { delayMs: random.int(o.toolPauseMs) },
        inputLength,
        outputLength: output.length,
        tag: o.tag,
        writeTokens: (out) => writePrompt(out, namespace, segments, count),
      });
      // The turn's output is part of every later prompt of the session.
      segments.push(output);
      length += output.length;
    }
  }
  return { name: `agent-sessions(seed ${o.seed})`, requests };
}
