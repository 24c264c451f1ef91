// The generated workloads by the names `--workload` takes, with the options
// each accepts on the command line: `name:key=value:key=value`, several
// joined with `+`. Keys are the generators' option names in snake_case;
// lists and [min, max] ranges are written with `/` (system_prompts=1024/8192,
// turns=4/10). Parts of a merged workload that name prompts by trace hash
// ids get id ranges of their own, so they share nothing by accident.
import { AGENT_SESSION_DEFAULTS, agentSessions, type AgentSessionOptions } from './agent-sessions.js';
import { COLD_PROMPT_DEFAULTS, coldPrompts, type ColdPromptOptions } from './cold-prompts.js';
import { parseSpec, type ParamValue } from './policy-spec.js';
import { CONVERSATION_DEFAULTS, conversations, TOOL_AGENT_DEFAULTS, toolAgents, type SessionTrafficOptions } from './session-traffic.js';
import { mergeWorkloads, type Workload } from './workload.js';

/** What every generator is built with, whatever the command line says. */
export interface GeneratorContext {
  seed: number;
  /** Tokens per trace hash id, for the generators that write prompts as trace blocks. */
  traceBlockSize: number;
  /** First free trace hash id. */
  firstHashId: number;
}

/**
 * How the command line writes an option: a number; a range (`n`, or `min/max`
 * for an IntRange); a list of numbers (`a/b/c`, empty for none); a string.
 */
export type OptionKind = 'number' | 'range' | 'list' | 'string';

export interface Generator {
  summary: string;
  /** The options the command line may set (camelCase, as the generator takes them), with their defaults. */
  options: Readonly<Record<string, OptionKind>>;
  defaults: Readonly<Record<string, unknown>>;
  build(options: Record<string, unknown>, context: GeneratorContext): Workload;
}

const SESSION_OPTIONS: Record<string, OptionKind> = {
  sessions: 'number',
  rate: 'number',
  concurrency: 'number',
  systemPrompts: 'list',
  systemPromptSkew: 'number',
  turns: 'number',
  maxTurns: 'number',
  inputTokens: 'number',
  inputSigma: 'number',
  maxInputTokens: 'number',
  outputTokens: 'number',
  outputSigma: 'number',
  maxOutputTokens: 'number',
  pauseMs: 'number',
  pauseSigma: 'number',
  maxContextTokens: 'number',
  turnMs: 'number',
  startMs: 'number',
  idPrefix: 'string',
  tag: 'string',
};

// seed, blockTokens and firstHashId come from the context (--seed, --trace-block-size, merging), never the command line.
const SESSION_CONTEXT = (c: GeneratorContext) => ({ seed: c.seed, blockTokens: c.traceBlockSize, firstHashId: c.firstHashId });

export const GENERATORS: Readonly<Record<string, Generator>> = Object.freeze({
  conversations: {
    summary: 'Mooncake-like multi-turn chat sessions on shared system prompts, with think times between turns',
    options: SESSION_OPTIONS,
    defaults: CONVERSATION_DEFAULTS,
    build: (o, c) => conversations({ ...(o as SessionTrafficOptions), ...SESSION_CONTEXT(c) }),
  },
  'tool-agents': {
    summary: 'agent loops: large tool-definition system prompts, many turns, short tool pauses, heavy-tailed tool results',
    options: SESSION_OPTIONS,
    defaults: TOOL_AGENT_DEFAULTS,
    build: (o, c) => toolAgents({ ...(o as SessionTrafficOptions), ...SESSION_CONTEXT(c) }),
  },
  'agent-sessions': {
    summary: 'agent sessions with one shared system prompt and uniform lengths (the agents scenario)',
    options: {
      sessions: 'number',
      turns: 'range',
      systemPromptTokens: 'number',
      taskTokens: 'range',
      toolResultTokens: 'range',
      outputTokens: 'range',
      toolPauseMs: 'range',
      sessionGapMs: 'number',
      startMs: 'number',
      idPrefix: 'string',
      tag: 'string',
    },
    defaults: AGENT_SESSION_DEFAULTS,
    build: (o, c) => agentSessions({ ...(o as AgentSessionOptions), seed: c.seed }),
  },
  'cold-prompts': {
    summary: 'long prompts that share nothing, one every interval',
    options: { count: 'number', intervalMs: 'number', startMs: 'number', promptTokens: 'range', outputTokens: 'range', idPrefix: 'string', tag: 'string' },
    defaults: COLD_PROMPT_DEFAULTS,
    build: (o, c) => coldPrompts({ ...(o as ColdPromptOptions), seed: c.seed }),
  },
});

function camel(key: string): string {
  return key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

export function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** A command-line value read as its option's kind. */
function optionValue(where: string, kind: OptionKind, value: ParamValue): unknown {
  if (kind === 'string') return String(value);
  if (typeof value === 'number') return kind === 'list' ? [value] : value;
  if (kind === 'number' || typeof value !== 'string') throw new RangeError(`${where}: expected a number, got "${value}"`);
  const parts = value === '' ? [] : value.split('/');
  const numbers = parts.map((part) => {
    const n = Number(part);
    if (part.trim() === '' || !Number.isFinite(n)) throw new RangeError(`${where}: expected numbers separated by "/", got "${value}"`);
    return n;
  });
  if (kind === 'range' && numbers.length !== 2) throw new RangeError(`${where}: expected a number or a range min/max, got "${value}"`);
  return numbers;
}

/** One generator spec (`name[:key=value]*`) with its options read. */
function generatorOf(spec: string): { name: string; generator: Generator; options: Record<string, unknown> } {
  const { name, params } = parseSpec(spec, 'workload');
  const generator = Object.hasOwn(GENERATORS, name) ? GENERATORS[name] : undefined;
  if (!generator) throw new RangeError(`unknown --workload "${name}" (known: ${Object.keys(GENERATORS).join(', ')}, joined with +)`);
  const options: Record<string, unknown> = {};
  for (const [raw, value] of Object.entries(params)) {
    const key = camel(raw);
    const kind = Object.hasOwn(generator.options, key) ? generator.options[key] : undefined;
    if (!kind) throw new RangeError(`--workload ${name}: unknown option "${raw}" (known: ${Object.keys(generator.options).map(snake).join(', ')})`);
    options[key] = optionValue(`--workload ${name}: ${raw}`, kind, value);
  }
  return { name, generator, options };
}

/** The largest trace hash id the workload uses, or -1. */
function largestHashId(workload: Workload): number {
  let largest = -1;
  for (const r of workload.requests) if (r.trace) for (const id of r.trace.hashIds) if (id > largest) largest = id;
  return largest;
}

/** The workload a `--workload` value names: generator specs joined with `+`, built in order. */
export function generateWorkload(specs: string, context: Omit<GeneratorContext, 'firstHashId'>): Workload {
  const parts: Workload[] = [];
  let firstHashId = 0;
  for (const spec of specs.split('+')) {
    const { generator, options } = generatorOf(spec);
    const part = generator.build(options, { ...context, firstHashId });
    firstHashId = Math.max(firstHashId, largestHashId(part) + 1);
    parts.push(part);
  }
  return parts.length === 1 ? parts[0]! : mergeWorkloads(specs, ...parts);
}
