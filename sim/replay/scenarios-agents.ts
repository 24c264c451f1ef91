// Scenario agents: a batch of agent programs (multi-turn sessions with tool
// pauses) launched together on a fleet whose KV cache cannot hold all their
// contexts at once. ThunderAgent against the default admission, both over
// the default cost policy. What it shows: whether admitting by program keeps
// the contexts of programs waiting on a tool cached (reuse up, prefill and
// preemption recomputation down), and what it does to each program's
// end-to-end time.
import { ENGINE_DEFAULTS } from '../mocker/engine-options.js';
import { agentSessions } from './agent-sessions.js';
import { round } from './metrics.js';
import type { PolicyRun } from './replay.js';
import type { ScenarioDefinition, ScenarioFigures } from './scenarios.js';
import type { Workload } from './workload.js';

/** Sixteen programs per worker: 128 on the default fleet of 8. */
const PROGRAMS_PER_WORKER = 16;
/** Coding agents take many steps: 6 to 16 model turns per program. */
const TURNS: [number, number] = [6, 16];
/** A tool call (running tests, a build, a search) takes 1 to 10 s. */
const TOOL_PAUSE_MS: [number, number] = [1_000, 10_000];
/** The batch launches within about half a minute (mean gap 200 ms), like an evaluation or rollout batch. */
const PROGRAM_GAP_MS = 200;
/**
 * 4,096 blocks of 64 tokens = 262,144 tokens of KV per worker: about what an
 * 80 GB GPU has left for a mid-size (~14B) model. The programs' contexts
 * together are well over the fleet's cache (the settings print the ratio).
 */
const NUM_BLOCKS = 4_096;

export const AGENTS_SCENARIO: ScenarioDefinition = {
  summary: 'agent programs with tool pauses whose contexts exceed the fleet KV cache: ThunderAgent against the default admission',
  options: ['programs'],
  build(options) {
    const programs = options.programs ?? PROGRAMS_PER_WORKER * options.workers;
    if (!Number.isInteger(programs) || programs < 1) throw new RangeError(`programs must be an integer >= 1, got ${programs}`);
    const workload = agentSessions({ sessions: programs, turns: TURNS, toolPauseMs: TOOL_PAUSE_MS, sessionGapMs: PROGRAM_GAP_MS, seed: options.seed, idPrefix: 'agent', tag: 'agent' });
    const fleetTokens = options.workers * NUM_BLOCKS * ENGINE_DEFAULTS.blockSize;
    const contexts = programContextTokens(workload);
    return {
      name: 'agents',
      workload: { ...workload, name: 'agents' },
      runs: [
        { label: 'thunderagent', policy: 'kv', classifier: { type: 'thunderagent', params: {} } },
        { label: 'default', policy: 'kv', classifier: null },
      ],
      engine: { numBlocks: NUM_BLOCKS },
      settings: {
        programs: `${programs}, ${TURNS[0]}-${TURNS[1]} turns each, tool pauses ${TOOL_PAUSE_MS[0]}-${TOOL_PAUSE_MS[1]} ms, one launched every ${PROGRAM_GAP_MS} ms on average (agent-sessions defaults otherwise)`,
        'program contexts': `${contexts} tokens at their largest, ${round(contexts / fleetTokens, 2)}x the fleet's KV cache (${fleetTokens} tokens)`,
        thunderagent: 'default parameters',
      },
      figures: agentFigures,
    };
  },
};

/** Sum over programs of the largest context each reaches (its last prompt plus that turn's output). */
export function programContextTokens(workload: Workload): number {
  const largest = new Map<string, number>();
  for (const r of workload.requests) {
    if (r.sessionId === null) continue;
    largest.set(r.sessionId, Math.max(largest.get(r.sessionId) ?? 0, r.inputLength + r.outputLength));
  }
  let sum = 0;
  for (const tokens of largest.values()) sum += tokens;
  return sum;
}

function agentFigures({ report }: PolicyRun): ScenarioFigures {
  return {
    programs: report.programs,
    program_e2e_mean_ms: report.program_e2e_ms.mean,
    program_e2e_p50_ms: report.program_e2e_ms.p50,
    program_e2e_p99_ms: report.program_e2e_ms.p99,
    prefix_cache_reused_ratio: report.prefix_cache_reused_ratio,
    preemptions: report.preemptions,
    recomputed_tokens: report.recomputed_tokens,
    // Prompt tokens the engines computed: not reused from a cache at admission, or computed again after a preemption.
    prefill_tokens: report.input_tokens - report.reused_tokens + report.recomputed_tokens,
  };
}
