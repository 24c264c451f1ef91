// Strict reading of one config object: every value is checked where it is
// read, every error names its path (`workers[2].kv_events.endpoint: ...`), and
// a key nobody read is an error, so a typo never passes silently.

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(
    readonly path: string,
    readonly detail: string,
  ) {
    super(path ? `${path}: ${detail}` : detail);
  }
}

export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return 'a list';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return String(value);
}

export function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path ? `${path}.${key}` : key;
}

interface NumberRule {
  min?: number;
  max?: number;
  integer?: boolean;
}

/** Reads the fields of one object; call done() to reject the keys nobody read. */
export class Fields {
  private readonly seen = new Set<string>();
  readonly raw: Record<string, unknown>;

  constructor(
    value: unknown,
    readonly path: string,
  ) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new ConfigError(path || '(config)', `must be an object, got ${describe(value)}`);
    }
    this.raw = value as Record<string, unknown>;
  }

  at(key: string): string {
    return join(this.path, key);
  }

  /** The raw value (undefined and null both mean "not set"). */
  get(key: string): unknown {
    this.seen.add(key);
    const value = this.raw[key];
    return value === null ? undefined : value;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  string(key: string, fallback?: string): string {
    const value = this.get(key);
    if (value === undefined) {
      if (fallback === undefined) throw new ConfigError(this.at(key), 'is required');
      return fallback;
    }
    if (typeof value !== 'string' || value.length === 0) throw new ConfigError(this.at(key), `must be a non-empty string, got ${describe(value)}`);
    return value;
  }

  optionalString(key: string): string | null {
    return this.has(key) ? this.string(key) : null;
  }

  oneOf<T extends string>(key: string, choices: readonly T[], fallback?: T): T {
    const value = this.string(key, fallback);
    if (!(choices as readonly string[]).includes(value)) {
      throw new ConfigError(this.at(key), `must be one of ${choices.join(', ')}, got ${JSON.stringify(value)}`);
    }
    return value as T;
  }

  number(key: string, fallback: number | undefined, rule: NumberRule = {}): number {
    const value = this.get(key);
    if (value === undefined) {
      if (fallback === undefined) throw new ConfigError(this.at(key), 'is required');
      return fallback;
    }
    return checkNumber(value, this.at(key), rule);
  }

  optionalNumber(key: string, rule: NumberRule = {}): number | null {
    const value = this.get(key);
    return value === undefined ? null : checkNumber(value, this.at(key), rule);
  }

  boolean(key: string, fallback: boolean): boolean {
    const value = this.get(key);
    if (value === undefined) return fallback;
    if (typeof value !== 'boolean') throw new ConfigError(this.at(key), `must be true or false, got ${describe(value)}`);
    return value;
  }

  /** A list (absent: empty), each element read by `item`. */
  list<T>(key: string, item: (value: unknown, path: string, index: number) => T): T[] {
    const value = this.get(key);
    if (value === undefined) return [];
    if (!Array.isArray(value)) throw new ConfigError(this.at(key), `must be a list, got ${describe(value)}`);
    return value.map((v, i) => item(v, join(this.at(key), i), i));
  }

  /** A nested object read by `read`, or `fallback` when absent. */
  object<T>(key: string, read: (fields: Fields) => T, fallback?: () => T): T {
    const value = this.get(key);
    if (value === undefined && fallback) return fallback();
    const fields = new Fields(value, this.at(key));
    const out = read(fields);
    fields.done();
    return out;
  }

  /** A free-form object handed to a plugin (which checks its own keys). */
  params(key: string): Record<string, unknown> {
    const value = this.get(key);
    if (value === undefined) return {};
    if (typeof value !== 'object' || Array.isArray(value)) throw new ConfigError(this.at(key), `must be an object, got ${describe(value)}`);
    return value as Record<string, unknown>;
  }

  done(): void {
    const unknown = Object.keys(this.raw).filter((k) => !this.seen.has(k));
    if (unknown.length > 0) {
      throw new ConfigError(this.at(unknown[0]!), `unknown field (known here: ${[...this.seen].sort().join(', ')})`);
    }
  }
}

export function checkNumber(value: unknown, path: string, rule: NumberRule): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new ConfigError(path, `must be a number, got ${describe(value)}`);
  if (rule.integer && !Number.isSafeInteger(value)) throw new ConfigError(path, `must be an integer, got ${value}`);
  if (rule.min !== undefined && value < rule.min) throw new ConfigError(path, `must be >= ${rule.min}, got ${value}`);
  if (rule.max !== undefined && value > rule.max) throw new ConfigError(path, `must be <= ${rule.max}, got ${value}`);
  return value;
}
