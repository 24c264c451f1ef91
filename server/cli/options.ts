// The value parsers of every command's options, and how bad input ends a
// command. Commander names the option in its error ("option '--port <n>'
// argument 'abc' is invalid."); each parser adds what the value must be.
import { InvalidArgumentError, type Command, type CommanderError } from 'commander';

/** Exit code for input the user got wrong (commander's own parse errors included). */
export const BAD_INPUT = 2;

/** Every command exits with BAD_INPUT on input it cannot take, and 0 after --help or --version. */
export function exitOnBadInput(program: Command): Command {
  return program.exitOverride((error: CommanderError) => process.exit(error.exitCode === 0 ? 0 : BAD_INPUT));
}

/** A number from a decimal or 0x-hex integer (or a decimal fraction when allowed); NaN for anything else. */
function numeric(value: string, fraction: boolean): number {
  const text = value.trim();
  if (/^0x[0-9a-f]+$/i.test(text)) return Number(text);
  return (fraction ? /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i : /^[+-]?\d+$/).test(text) ? Number(text) : NaN;
}

/** An integer in [min, max]. */
export function integer(min: number, max = Number.MAX_SAFE_INTEGER, want = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in ${min}..${max}`) {
  return (value: string): number => {
    const n = numeric(value, false);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`expected ${want}.`);
    return n;
  };
}

/** A TCP port; 0 asks for any free one. */
export const port = integer(0, 65535, 'a port in 0..65535');

/** A count of things, at least one. */
export const count = integer(1);

/** Milliseconds, a whole number at least `min`. */
export const milliseconds = (min: number) => integer(min, Number.MAX_SAFE_INTEGER, `a whole number of ms >= ${min}`);

/** A number above 0 (a factor, a rate). */
export function positive(value: string): number {
  const n = numeric(value, true);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number > 0.');
  return n;
}

/** A number, fractions allowed, in [min, max]. */
export function real(min: number, max: number, want: string) {
  return (value: string): number => {
    const n = numeric(value, true);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`expected ${want}.`);
    return n;
  };
}

/** One value, or a comma-separated list of them, each taken by `parse`. */
export function listOf<T>(parse: (value: string) => T, want: string) {
  return (value: string): T[] =>
    value.split(',').map((part) => {
      try {
        return parse(part);
      } catch {
        throw new InvalidArgumentError(`expected ${want}.`);
      }
    });
}

/** An unsigned integer up to 2^64 - 1, decimal or 0x hex (seeds and hashes). */
export function u64(value: string): bigint {
  const text = value.trim();
  const n = /^(\d+|0x[0-9a-f]+)$/i.test(text) ? BigInt(text) : -1n;
  if (n < 0n || n > 0xffffffffffffffffn) throw new InvalidArgumentError('expected an integer in 0..18446744073709551615 (decimal or 0x hex).');
  return n;
}

/** Text matching `pattern`, or an error saying what is wanted. */
export function matching(pattern: RegExp, want: string) {
  return (value: string): string => {
    if (!pattern.test(value)) throw new InvalidArgumentError(`expected ${want}.`);
    return value;
  };
}
