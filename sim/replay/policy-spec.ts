// How a replay names a policy with its parameters: `name`, or
// `name:key=value:key=value`. Parameters are separated by colons, never
// commas, so a comma-separated list of policies (`--policy a,b:x=1:y=2`)
// splits only between policies. Numbers and true/false are typed, anything
// else is a string. A spec's label is its canonical spelling, so two runs of
// one policy with different parameters stay apart in every table and chart.
import { createSelectionPolicy, SELECTION_POLICIES } from '../../router/selection/policies/index.js';
import type { SelectionPolicy } from '../../router/selection/contracts.js';

export type ParamValue = number | boolean | string;

export interface PolicySpec {
  name: string;
  params: Record<string, ParamValue>;
  /** The canonical spelling: name, then `:key=value` per parameter in the order given. */
  label: string;
}

/** Separates a spec's name and parameters. */
export const PARAM_SEPARATOR = ':';

function typed(text: string): ParamValue {
  if (text === 'true') return true;
  if (text === 'false') return false;
  return text !== '' && Number.isFinite(Number(text)) ? Number(text) : text;
}

/**
 * `name[:key=value]*` into its parts. `what` names the spec in errors
 * ("policy", "workload"). Throws a RangeError naming what is wrong.
 */
export function parseSpec(spec: string, what: string): PolicySpec {
  const [rawName, ...pairs] = spec.split(PARAM_SEPARATOR);
  const name = rawName!.trim();
  if (name === '') throw new RangeError(`${what} "${spec}" has no name`);
  if (name.includes('=')) throw new RangeError(`${what} "${spec}" starts with a parameter, not a name`);
  const params: Record<string, ParamValue> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const key = pair.slice(0, Math.max(0, eq)).trim();
    if (eq < 0 || key === '') throw new RangeError(`${what} "${spec}": expected key=value, got "${pair}"`);
    const text = pair.slice(eq + 1).trim();
    if (text.includes(',')) {
      throw new RangeError(`${what} "${spec}": separate parameters with "${PARAM_SEPARATOR}", not ","`);
    }
    if (Object.hasOwn(params, key)) throw new RangeError(`${what} "${spec}" sets ${key} twice`);
    params[key] = typed(text);
  }
  const label = [name, ...Object.entries(params).map(([k, v]) => `${k}=${String(v)}`)].join(PARAM_SEPARATOR);
  return { name, params, label };
}

export function parsePolicySpec(spec: string): PolicySpec {
  return parseSpec(spec, 'policy');
}

/** The policy a spec names, with its parameters checked by the policy itself. */
export function policyOf(spec: string): SelectionPolicy {
  const { name, params } = parsePolicySpec(spec);
  return createSelectionPolicy(name, params);
}

/**
 * Policy specs as a command line gives them: each item may be a comma-
 * separated list, and `all` stands for every built-in policy. Every spec is
 * checked (name and parameters); the same policy with the same parameters
 * twice is an error, since its runs would be indistinguishable.
 */
export function policyList(items: readonly string[]): PolicySpec[] {
  const specs: PolicySpec[] = [];
  const labels = new Map<string, string>();
  for (const item of items.flatMap((i) => i.split(','))) {
    const text = item.trim();
    if (text === '') continue;
    if (!text.includes(PARAM_SEPARATOR) && text.includes('=')) {
      throw new RangeError(`"${text}" is a parameter, not a policy: give a policy's parameters after its name, each after a "${PARAM_SEPARATOR}" (kv:overlap_credit=2:prefill_load_scale=4)`);
    }
    for (const spec of text === 'all' ? Object.keys(SELECTION_POLICIES) : [text]) {
      const parsed = parsePolicySpec(spec);
      policyOf(spec);
      const key = canonicalKey(parsed);
      const earlier = labels.get(key);
      if (earlier !== undefined) throw new RangeError(`policy ${parsed.label} is given twice${earlier === parsed.label ? '' : ` (as ${earlier})`}`);
      labels.set(key, parsed.label);
      specs.push(parsed);
    }
  }
  return specs;
}

/** Equal for specs that configure the same policy identically, whatever the order of their parameters. */
function canonicalKey(spec: PolicySpec): string {
  return JSON.stringify([spec.name, Object.entries(spec.params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]);
}
