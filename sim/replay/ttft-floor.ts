// The floor under every policy's time to first token: what a request's first
// token would take if it found the ideal reuse (one infinite cache,
// metrics.ts idealPrefixHits) on a worker with nothing else to do. Its
// uncached tokens are then prefilled alone, in steps of at most the engine's
// token budget, each taking the timing model's prefill time
// (sim/mocker/timing.ts) and no decode time. No placement, queue order or
// estimate beats it: a step that computes n of a request's tokens takes at
// least prefillMs(n) (more tokens in the step, or a decode batch, only add),
// a request waits for nothing less than its own prefill, and no engine reuses
// more than the ideal. So a policy's TTFT over the floor's, per load, is the
// room left for any policy there.
import { prefillMs } from '../mocker/timing.js';

/**
 * The least time, in ms on the engine's clock, that prefilling `tokens`
 * uncached tokens takes in steps of at most `budget` tokens. prefillMs is
 * convex, so for k steps an even split (chunks differing by at most one
 * token) is least; more steps lower the quadratic term and add one fixed
 * step cost each, so the sum is convex in k and the search stops at its
 * first rise. An idle engine runs full-budget chunks, which take at least
 * this. Throws on a token count < 1 or a budget < 1.
 */
export function prefillFloorMs(tokens: number, budget: number, speedup = 1): number {
  if (!Number.isInteger(tokens) || tokens < 1) throw new RangeError(`tokens must be an integer >= 1, got ${tokens}`);
  if (!Number.isInteger(budget) || budget < 1) throw new RangeError(`budget must be an integer >= 1, got ${budget}`);
  const evenSplit = (steps: number) => {
    const chunk = Math.floor(tokens / steps);
    const longer = tokens - chunk * steps;
    return longer * prefillMs(chunk + 1) + (steps - longer) * prefillMs(chunk);
  };
  let steps = Math.ceil(tokens / budget);
  let best = evenSplit(steps);
  while (steps < tokens) {
    const next = evenSplit(steps + 1);
    if (next >= best) break;
    best = next;
    steps++;
  }
  return best / speedup;
}

/**
 * Each request's floor (ms): its prompt less its ideal reuse `hits` (at least
 * one token is computed, as the engine computes one), prefilled alone.
 */
export function ttftFloors(promptTokens: ArrayLike<number>, hits: ArrayLike<number>, budget: number, speedup = 1): Float64Array {
  const floors = new Float64Array(promptTokens.length);
  for (let i = 0; i < floors.length; i++) floors[i] = prefillFloorMs(Math.max(1, promptTokens[i]! - hits[i]!), budget, speedup);
  return floors;
}
