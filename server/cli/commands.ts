// The list of CLI commands; each lives in its own module under server/cli/.
import type { Command } from 'commander';

export function registerCommands(_program: Command): void {}
