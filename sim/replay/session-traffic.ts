// Generated workloads made of multi-turn sessions, in trace blocks: each
// prompt is a list of Mooncake hash ids, so the workload replays exactly as
// its written trace does (`--write-trace`). A session starts from one of a
// few shared system prompts, and each turn appends new input (a user message,
// or a tool result) to the session's context; the turn's output is appended
// after it, and the next turn arrives a pause after the turn completes. The
// context is one growing token stream, so every prompt of a session extends
// the previous one, and sessions on the same system prompt share it.
// Lengths and pauses are log-normal (heavy-tailed: most are short, a few are
// very long), turns per session geometric.
//
// Two presets share this core: `conversations` (Mooncake-like chat: long
// think times between turns, moderate prompts) and `tool-agents` (agent loops:
// large tool definitions as system prompts, many turns, short tool pauses,
// large heavy-tailed tool results).
import { traceRequest } from './mooncake.js';
import { SeededRandom } from './random.js';
import { TRACE_NAMESPACE } from './synthetic-tokens.js';
import { withDefaults, type ReplayRequest, type TraceBlocks, type Workload } from './workload.js';

export interface SessionTrafficOptions {
  /** Sessions to generate. */
  sessions?: number;
  /** New sessions per second (Poisson arrivals); 0: derived from `concurrency`. */
  rate?: number;
  /** Sessions in progress at once, used when rate is 0: rate = concurrency / mean session length (see sessionSeconds). */
  concurrency?: number;
  /** Token sizes of the shared system prompts (each rounded up to whole trace blocks); [] for none. */
  systemPrompts?: readonly number[];
  /** Zipf exponent of the choice among system prompts: 0 uniform, larger favours the first ones. */
  systemPromptSkew?: number;
  /** Mean turns per session (geometric, at least 1), and the most. */
  turns?: number;
  maxTurns?: number;
  /** Input each turn appends before the model answers: log-normal median, sigma, and cap (tokens). */
  inputTokens?: number;
  inputSigma?: number;
  maxInputTokens?: number;
  /** Output of each turn: log-normal median, sigma, and cap (tokens). */
  outputTokens?: number;
  outputSigma?: number;
  maxOutputTokens?: number;
  /** Pause between a turn completing and the next turn arriving: log-normal median (ms) and sigma. */
  pauseMs?: number;
  pauseSigma?: number;
  /** A session ends before a prompt would pass this many tokens. */
  maxContextTokens?: number;
  /** Expected service time of one turn on an unloaded fleet (ms), for deriving the rate from concurrency. */
  turnMs?: number;
  /** Arrival of the first session (ms). */
  startMs?: number;
  seed?: number;
  /** Tokens per hash id (the trace block size the workload replays and writes at). */
  blockTokens?: number;
  /** First hash id to use; workloads merged with this one must use other ids. */
  firstHashId?: number;
  /** Prefix of request and session ids. */
  idPrefix?: string;
  /** Tag of every request, for reports split by kind of traffic. */
  tag?: string;
}

const COMMON: Required<Pick<SessionTrafficOptions, 'rate' | 'startMs' | 'seed' | 'blockTokens' | 'firstHashId'>> = {
  rate: 0,
  startMs: 0,
  seed: 0,
  blockTokens: 512,
  firstHashId: 0,
};

/** Mooncake-like chat: people reading and typing between turns. */
export const CONVERSATION_DEFAULTS: Required<SessionTrafficOptions> = {
  ...COMMON,
  sessions: 400,
  concurrency: 64,
  systemPrompts: [1024, 2048, 4096, 8192],
  systemPromptSkew: 1,
  turns: 8,
  maxTurns: 40,
  inputTokens: 400,
  inputSigma: 1.2,
  maxInputTokens: 16384,
  outputTokens: 250,
  outputSigma: 1,
  maxOutputTokens: 4096,
  pauseMs: 8000,
  pauseSigma: 1,
  maxContextTokens: 65536,
  turnMs: 2000,
  idPrefix: 'conv',
  tag: 'conversation',
};

/** Agent loops: tool definitions up front, a tool call out, a tool result back, again and again. */
export const TOOL_AGENT_DEFAULTS: Required<SessionTrafficOptions> = {
  ...COMMON,
  sessions: 128,
  concurrency: 32,
  systemPrompts: [4096, 8192, 16384],
  systemPromptSkew: 0.5,
  turns: 16,
  maxTurns: 60,
  inputTokens: 1500,
  inputSigma: 1.3,
  maxInputTokens: 32768,
  outputTokens: 150,
  outputSigma: 0.8,
  maxOutputTokens: 2048,
  pauseMs: 800,
  pauseSigma: 1.2,
  maxContextTokens: 131072,
  turnMs: 1500,
  idPrefix: 'agent',
  tag: 'tool-agent',
};

function check(o: Required<SessionTrafficOptions>): void {
  const integer = (name: string, value: number, min: number) => {
    if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  };
  const number = (name: string, value: number, min: number, exclusive = false) => {
    if (typeof value !== 'number' || !Number.isFinite(value) || (exclusive ? value <= min : value < min)) {
      throw new RangeError(`${name} must be a finite number ${exclusive ? '>' : '>='} ${min}, got ${value}`);
    }
  };
  integer('sessions', o.sessions, 1);
  number('rate', o.rate, 0);
  if (o.rate === 0) number('concurrency', o.concurrency, 0, true);
  if (!Array.isArray(o.systemPrompts)) throw new RangeError('systemPrompts must be a list of token counts');
  o.systemPrompts.forEach((size, i) => integer(`systemPrompts[${i}]`, size, 1));
  number('systemPromptSkew', o.systemPromptSkew, 0);
  number('turns', o.turns, 1);
  integer('maxTurns', o.maxTurns, 1);
  for (const [name, median, sigma, max] of [
    ['input', o.inputTokens, o.inputSigma, o.maxInputTokens],
    ['output', o.outputTokens, o.outputSigma, o.maxOutputTokens],
  ] as const) {
    number(`${name}Tokens`, median, 1);
    number(`${name}Sigma`, sigma, 0);
    integer(`max${name[0]!.toUpperCase()}${name.slice(1)}Tokens`, max, 1);
  }
  number('pauseMs', o.pauseMs, 0);
  number('pauseSigma', o.pauseSigma, 0);
  integer('blockTokens', o.blockTokens, 1);
  integer('maxContextTokens', o.maxContextTokens, 1);
  number('turnMs', o.turnMs, 0);
  number('startMs', o.startMs, 0);
  integer('firstHashId', o.firstHashId, 0);
  integer('seed', o.seed, 0);
  if (typeof o.idPrefix !== 'string' || o.idPrefix === '') throw new RangeError('idPrefix must be a non-empty string');
  if (typeof o.tag !== 'string' || o.tag === '') throw new RangeError('tag must be a non-empty string');
  const largest = Math.max(0, ...o.systemPrompts.map((s) => Math.ceil(s / o.blockTokens) * o.blockTokens));
  if (largest >= o.maxContextTokens) throw new RangeError(`maxContextTokens (${o.maxContextTokens}) leaves no room after the largest system prompt (${largest} tokens)`);
}

/**
 * Mean session length in seconds on an unloaded fleet: its pauses and its
 * turns' service. With rate 0 the rate is concurrency divided by this
 * (Little's law), so a loaded fleet, serving turns more slowly, holds more
 * sessions at once.
 */
export function sessionSeconds(o: Required<SessionTrafficOptions>): number {
  const meanPause = o.pauseMs * Math.exp((o.pauseSigma * o.pauseSigma) / 2);
  const turns = Math.min(o.turns, o.maxTurns);
  return ((turns - 1) * meanPause + turns * o.turnMs) / 1000;
}

/** A session's context: one token stream, named block by block. */
class Context {
  readonly ids: number[];
  length: number;

  constructor(
    private readonly blockTokens: number,
    prefix: readonly number[],
    private readonly nextId: () => number,
  ) {
    this.ids = [...prefix];
    this.length = prefix.length * blockTokens;
  }

  /** Appends n tokens: the last block's own id continues (a cut block is a prefix of the whole), new blocks get new ids. */
  append(n: number): void {
    this.length += n;
    while (this.ids.length * this.blockTokens < this.length) this.ids.push(this.nextId());
  }
}

function lengthOf(random: SeededRandom, median: number, sigma: number, max: number): number {
  return Math.min(max, Math.max(1, Math.round(random.logNormal(median, sigma))));
}

export function sessionTraffic(name: string, defaults: Required<SessionTrafficOptions>, options: SessionTrafficOptions = {}): Workload {
  const o = withDefaults(defaults, options);
  check(o);
  const random = new SeededRandom(o.seed);
  let hashId = o.firstHashId;
  const nextId = () => hashId++;
  const B = o.blockTokens;
  // Each system prompt is its own run of ids, shared by every session that starts from it.
  const systems = o.systemPrompts.map((size) => Array.from({ length: Math.ceil(size / B) }, nextId));
  const weights = systems.map((_, k) => 1 / (k + 1) ** o.systemPromptSkew);
  const gapMs = 1000 / (o.rate > 0 ? o.rate : o.concurrency / sessionSeconds(o));
  const requests: ReplayRequest[] = [];
  let start = o.startMs;
  for (let s = 0; s < o.sessions; s++) {
    if (s > 0) start += random.exponential(gapMs);
    const sessionId = `${o.idPrefix}${s}`;
    const context = new Context(B, systems.length > 0 ? systems[random.pick(weights)]! : [], nextId);
    const turns = Math.min(o.maxTurns, random.geometric(o.turns));
    for (let t = 0; t < turns; t++) {
      const input = lengthOf(random, o.inputTokens, o.inputSigma, o.maxInputTokens);
      const output = lengthOf(random, o.outputTokens, o.outputSigma, o.maxOutputTokens);
      const pause = random.logNormal(o.pauseMs, o.pauseSigma);
      if (context.length + input > o.maxContextTokens) break;
      context.append(input);
      const trace: TraceBlocks = { hashIds: context.ids, blockSize: B, namespace: TRACE_NAMESPACE };
      requests.push(
        traceRequest(
          { id: `${sessionId}.t${t}`, sessionId, arrival: t === 0 ? { atMs: start } : { delayMs: pause }, inputLength: context.length, outputLength: output, tag: o.tag },
          trace,
        ),
      );
      // The answer is part of the context the next turn extends.
      context.append(output);
    }
  }
  return { name: `${name}(seed ${o.seed})`, requests };
}

export function conversations(options: SessionTrafficOptions = {}): Workload {
  return sessionTraffic('conversations', CONVERSATION_DEFAULTS, options);
}

export function toolAgents(options: SessionTrafficOptions = {}): Workload {
  return sessionTraffic('tool-agents', TOOL_AGENT_DEFAULTS, options);
}
