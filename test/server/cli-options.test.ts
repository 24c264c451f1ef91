// The command line's options: every option that parses its value refuses a
// bad one with a message naming the option and exit code 2 (spawning the
// built CLI), and `kvrouter <command>` registers (and loads) only that
// command's module.
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMANDS, registerCommands } from '../../server/cli/commands.js';
import { kvrouter } from './cli-process.js';

/** A numeric option's placeholder: a count, a factor, milliseconds, seconds, a ratio. */
const NUMERIC = / <(n|x|ms|s|r)>$/;

/** Every command's numeric options, as `--name <arg>`, read from the commands themselves. */
async function numericOptions(): Promise<{ command: string; flags: string; parses: boolean }[]> {
  const out: { command: string; flags: string; parses: boolean }[] = [];
  for (const [command, load] of Object.entries(COMMANDS)) {
    const program = new Command('kvrouter');
    (await load())(program);
    for (const option of program.commands[0]!.options) {
      if (NUMERIC.test(option.flags)) out.push({ command, flags: option.flags, parses: option.parseArg !== undefined });
    }
  }
  return out;
}

describe.concurrent('kvrouter options', () => {
  it('serve --port abc names --port, and exits 2 before starting anything', async () => {
    const run = await kvrouter('serve', '--port', 'abc');
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe("error: option '--port <n>' argument 'abc' is invalid. expected a port in 0..65535.\n");
  });

  it('names each numeric option a bad value was given to, in every command', async () => {
    const options = await numericOptions();
    expect(options.filter((o) => !o.parses)).toEqual([]);
    expect(options.map((o) => `${o.command} ${o.flags}`)).toEqual(
      expect.arrayContaining([
        'serve --port <n>',
        'serve --mock-workers <n>',
        'serve --mock-speedup <x>',
        'serve --replicas <n>',
        'mock --port <n>',
        'mock --num-blocks <n>',
        'mock --engine-speedup <x>',
        'relay --data-parallel-size <n>',
        'relay --stream-max-age-ms <ms>',
        'relay --stream-max-bytes <n>',
        'hash --block-size <n>',
        'hash --seed <n>',
        'replay --workers <n>',
        'replay --arrival-speedup <x>',
        'replay --event-delay-ms <ms>',
        'replay --capacity-precision <r>',
        'replay --seed <n>',
      ]),
    );
    const runs = await Promise.all(options.map(({ command, flags }) => kvrouter(command, flags.split(' ')[0]!, 'abc')));
    runs.forEach((run, i) => {
      const { command, flags } = options[i]!;
      const escaped = flags.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      expect({ command, code: run.code, stderr: run.stderr }).toEqual({ command, code: 2, stderr: expect.stringMatching(new RegExp(`^error: option '${escaped}' argument 'abc' is invalid\\. expected .+\\.\\n$`)) });
    });
  });

  it('names the range a number is outside of', async () => {
    const cases: [string[], string][] = [
      [['serve', '--replicas', '65'], "option '--replicas <n>' argument '65' is invalid. expected an integer in 1..64."],
      [['mock', '--workers', '1.5'], "option '--workers <n>' argument '1.5' is invalid. expected an integer >= 1."],
      [['mock', '--engine-speedup', '0'], "option '--engine-speedup <x>' argument '0' is invalid. expected a number > 0."],
      [['relay', '--worker-id', 'w', '--endpoint', 'tcp://10.0.0.5:5557', '--stream-max-age-ms', '999'], "option '--stream-max-age-ms <ms>' argument '999' is invalid. expected a whole number of ms >= 1000."],
      [['hash', '--block-size', '4294967296', '1'], "option '--block-size <n>' argument '4294967296' is invalid. expected an integer in 1..4294967295."],
      [['replay', '--capacity-precision', '2'], "option '--capacity-precision <r>' argument '2' is invalid. expected a number between 0.001 and 1."],
      [['replay', '--event-delay-ms', '-1'], "option '--event-delay-ms <ms>' argument '-1' is invalid. expected a number of ms >= 0."],
      [['replay', '--arrival-speedup', '2,0'], "option '--arrival-speedup <x>' argument '2,0' is invalid. expected a number > 0, or a comma-separated list of them."],
    ];
    const runs = await Promise.all(cases.map(([args]) => kvrouter(...args)));
    runs.forEach((run, i) => {
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(`error: ${cases[i]![1]}\n`);
    });
  });

  it('takes the forms a number may be written in', async () => {
    const run = await kvrouter('hash', '--block-size', '0x2', '--seed', '0x539', '1', '2');
    expect(run.code).toBe(0);
    expect(run).toEqual(await kvrouter('hash', '--block-size', '2', '--seed', '1337', '1', '2'));
  });
});

describe('kvrouter commands', () => {
  it('registers only the command named, or all of them for the overall help', async () => {
    const named = new Command('kvrouter');
    await registerCommands(named, ['node', 'kvrouter', 'hash', '--block-size', '1', '1']);
    expect(named.commands.map((c) => c.name())).toEqual(['hash']);
    const none = new Command('kvrouter');
    await registerCommands(none, ['node', 'kvrouter', '--help']);
    expect(none.commands.map((c) => c.name())).toEqual(['serve', 'mock', 'replay', 'hash', 'relay', 'doctor']);
  });
});
