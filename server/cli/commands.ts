// The CLI commands, each registered from its own module. A module is loaded
// only when its command runs (or for the overall help), so `kvrouter hash`
// does not load the HTTP server, the simulated engines or the replay.
import type { Command } from 'commander';

type Register = (program: Command) => void;

export const COMMANDS: Readonly<Record<string, () => Promise<Register>>> = {
  serve: async () => (await import('./serve.js')).registerServe,
  mock: async () => (await import('./mock.js')).registerMock,
  replay: async () => (await import('./replay.js')).registerReplay,
  hash: async () => (await import('./hash.js')).registerHash,
  relay: async () => (await import('./relay.js')).registerRelay,
  doctor: async () => (await import('./doctor.js')).registerDoctor,
};

/** Registers the command `argv` names, or every command when it names none (help, version, a typo). */
export async function registerCommands(program: Command, argv: readonly string[]): Promise<void> {
  const named = argv[2];
  const chosen = named !== undefined && Object.hasOwn(COMMANDS, named) ? [named] : Object.keys(COMMANDS);
  for (const name of chosen) (await COMMANDS[name]!())(program);
}
