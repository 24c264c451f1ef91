// The built-in worker-selection policies, by the names configs and replay use.
import type { SelectionPolicy } from '../../selection/contracts.js';
import { PluginConfigError } from '../../plugins/params.js';
import { defaultCostPolicy } from './default-cost.js';
import { leastLoadedPolicy } from './least-loaded.js';
import { powerOfTwoPolicy } from './power-of-two.js';
import { randomPolicy } from './random.js';
import { roundRobinPolicy } from './round-robin.js';
import { ttftPolicy } from './ttft.js';
import { twoTierPolicy } from './two-tier.js';

export const SELECTION_POLICIES: Readonly<Record<string, (params?: unknown) => SelectionPolicy>> = Object.freeze({
  ttft: ttftPolicy,
  kv: defaultCostPolicy,
  'two-tier': twoTierPolicy,
  'round-robin': roundRobinPolicy,
  random: randomPolicy,
  'least-loaded': leastLoadedPolicy,
  'power-of-two': powerOfTwoPolicy,
});

export function createSelectionPolicy(name: string, params?: unknown): SelectionPolicy {
  const factory = SELECTION_POLICIES[name];
  if (!factory) throw new PluginConfigError(`unknown selection policy "${name}" (known: ${Object.keys(SELECTION_POLICIES).join(', ')})`);
  return factory(params);
}
