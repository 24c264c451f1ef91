// Generated workload: cold long prompts, one every fixed interval, each made
// of tokens no other request shares, so no cache anywhere can help them.
// Mixed into another workload they model the long uncached prefills (document
// ingestion, new RAG contexts) that Cold Pool routing keeps off warm workers.
import { checkIntRange, mix32, SeededRandom, type IntRange } from './random.js';
import { writeKeyTokens } from './synthetic-tokens.js';
import { withDefaults, type ReplayRequest, type Workload } from './workload.js';

export interface ColdPromptOptions {
  /** Prompts to generate (default 20). */
  count?: number;
  /** Time between arrivals (default 5000 ms). */
  intervalMs?: number;
  /** Arrival of the first prompt (default 0). */
  startMs?: number;
  /** Prompt length (default 32768). */
  promptTokens?: IntRange;
  /** Tokens each prompt generates (default 64). */
  outputTokens?: IntRange;
  seed?: number;
  /** Prefix of request ids (default "cold"). */
  idPrefix?: string;
  /** Tag of every request, for reports split by kind of traffic (default "cold"). */
  tag?: string;
}

export const COLD_PROMPT_DEFAULTS: Required<ColdPromptOptions> = {
  count: 20,
  intervalMs: 5000,
  startMs: 0,
  promptTokens: 32768,
  outputTokens: 64,
  seed: 0,
  idPrefix: 'cold',
  tag: 'cold',
};

export function coldPrompts(options: ColdPromptOptions = {}): Workload {
  const o = withDefaults(COLD_PROMPT_DEFAULTS, options);
  if (!Number.isInteger(o.count) || o.count < 1) throw new RangeError(`count must be an integer >= 1, got ${o.count}`);
  if (!Number.isFinite(o.intervalMs) || o.intervalMs < 0) throw new RangeError(`intervalMs must be a finite number >= 0, got ${o.intervalMs}`);
  if (!Number.isFinite(o.startMs) || o.startMs < 0) throw new RangeError(`startMs must be a finite number >= 0, got ${o.startMs}`);
  checkIntRange('promptTokens', o.promptTokens, 1);
  checkIntRange('outputTokens', o.outputTokens, 1);
  if (typeof o.idPrefix !== 'string' || o.idPrefix === '') throw new RangeError('idPrefix must be a non-empty string');
  if (typeof o.tag !== 'string' || o.tag === '') throw new RangeError('tag must be a non-empty string');
  const random = new SeededRandom(o.seed);
  const namespace = mix32((o.seed >>> 0) ^ 0x434f4c44);
  const requests: ReplayRequest[] = [];
  for (let i = 0; i < o.count; i++) {
    const inputLength = random.int(o.promptTokens);
    requests.push({
      id: `${o.idPrefix}${i}`,
      sessionId: null,
      arrival: { atMs: o.startMs + i * o.intervalMs },
      inputLength,
      outputLength: random.int(o.outputTokens),
      tag: o.tag,
      writeTokens: (out) => writeKeyTokens(out, 0, namespace, i, inputLength),
    });
  }
  return { name: `cold-prompts(seed ${o.seed})`, requests };
}
