// Strict parameter reading for plugins: every key must be known, every value
// in range, and errors name the plugin and the key. Defaults live here, with
// the spec, in one place per plugin.

export class PluginConfigError extends Error {
  override name = 'PluginConfigError';
}

export type ParamSpec =
  | { type: 'number'; default: number; min?: number; max?: number; integer?: boolean; exclusiveMin?: boolean }
  | { type: 'boolean'; default: boolean }
  | { type: 'string'; default: string; oneOf?: readonly string[] };

type Value<S extends ParamSpec> = S extends { type: 'number' } ? number : S extends { type: 'boolean' } ? boolean : string;
export type Params<T extends Record<string, ParamSpec>> = { [K in keyof T]: Value<T[K]> };

/** Known-but-retired keys: a message that says what replaced them. */
export type Retired = Record<string, string>;

export function readParams<T extends Record<string, ParamSpec>>(plugin: string, raw: unknown, spec: T, retired: Retired = {}): Params<T> {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new PluginConfigError(`${plugin}: parameters must be an object`);
  const input = raw as Record<string, unknown>;
  for (const key of Object.keys(input)) {
    if (key in retired) throw new PluginConfigError(`${plugin}: parameter "${key}" was removed: ${retired[key]}`);
    if (!(key in spec)) throw new PluginConfigError(`${plugin}: unknown parameter "${key}" (known: ${Object.keys(spec).join(', ') || 'none'})`);
  }
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(spec)) {
    const value = input[key] ?? s.default;
    const where = `${plugin}: parameter "${key}"`;
    if (s.type === 'number') {
      if (typeof value !== 'number' || !Number.isFinite(value)) throw new PluginConfigError(`${where} must be a finite number, got ${JSON.stringify(value)}`);
      if (s.integer && !Number.isInteger(value)) throw new PluginConfigError(`${where} must be an integer, got ${value}`);
      if (s.min !== undefined && (s.exclusiveMin ? value <= s.min : value < s.min)) throw new PluginConfigError(`${where} must be ${s.exclusiveMin ? '>' : '>='} ${s.min}, got ${value}`);
      if (s.max !== undefined && value > s.max) throw new PluginConfigError(`${where} must be <= ${s.max}, got ${value}`);
    } else if (s.type === 'boolean') {
      if (typeof value !== 'boolean') throw new PluginConfigError(`${where} must be true or false, got ${JSON.stringify(value)}`);
    } else {
      if (typeof value !== 'string') throw new PluginConfigError(`${where} must be a string, got ${JSON.stringify(value)}`);
      if (s.oneOf && !s.oneOf.includes(value)) throw new PluginConfigError(`${where} must be one of ${s.oneOf.join(', ')}, got ${value}`);
    }
    out[key] = value;
  }
  return out as Params<T>;
}
