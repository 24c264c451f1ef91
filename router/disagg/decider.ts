// Whether a request of a disaggregated model runs whole on one worker or is
// split into a remote prefill and a decode. A handoff pays a KV transfer and
// a second request, which only a long prefill repays: a prompt whose
// uncached part (on the best worker that can run it whole) is below the
// threshold runs aggregated, so short prompts and prompts mostly cached on a
// decode-capable worker stay where they are; long uncached prompts go to a
// prefill worker first.
import type { EngineKind } from './roles.js';

export interface DisaggSettings {
  engine: EngineKind;
  /** Uncached prompt tokens at or above which the prefill runs on a prefill worker. */
  minRemotePrefillTokens: number;
  /** Whether a decode worker's own cached prefix counts when it is picked (the engine pulls only the blocks it lacks). */
  decodePrefixReuse: boolean;
}

export type DisaggMode = 'aggregated' | 'disaggregated';

export interface DisaggDecision {
  mode: DisaggMode;
  /** Why, in words for explain. */
  reason: string;
  promptTokens: number;
  /** Best cached prefix over the workers that can run the request whole (null: none is live). */
  aggregateCachedTokens: number | null;
  /** Prompt tokens a whole run would compute. */
  uncachedTokens: number;
  threshold: number;
}

export function decideDisaggregation(promptTokens: number, aggregateCachedTokens: number | null, settings: DisaggSettings): DisaggDecision {
  const threshold = settings.minRemotePrefillTokens;
  const base = { promptTokens, aggregateCachedTokens, threshold };
  if (aggregateCachedTokens === null) {
    return { ...base, mode: 'disaggregated', uncachedTokens: promptTokens, reason: 'no live worker runs whole requests' };
  }
  const uncachedTokens = Math.max(0, promptTokens - aggregateCachedTokens);
  if (promptTokens < threshold) return { ...base, mode: 'aggregated', uncachedTokens, reason: `short prompt (${promptTokens} < ${threshold} tokens)` };
  if (uncachedTokens < threshold) {
    return { ...base, mode: 'aggregated', uncachedTokens, reason: `mostly cached on a decode-capable worker (${uncachedTokens} uncached < ${threshold} tokens)` };
  }
  return { ...base, mode: 'disaggregated', uncachedTokens, reason: `long uncached prompt (${uncachedTokens} uncached >= ${threshold} tokens)` };
}
