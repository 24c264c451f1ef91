// The list of CLI commands; each lives in its own module under server/cli/.
import type { Command } from 'commander';
import { registerDoctor } from './doctor.js';
import { registerHash } from './hash.js';
import { registerMock } from './mock.js';
import { registerRelay } from './relay.js';
import { registerReplay } from './replay.js';
import { registerServe } from './serve.js';

export function registerCommands(program: Command): void {
  registerServe(program);
  registerMock(program);
  registerReplay(program);
  registerHash(program);
  registerRelay(program);
  registerDoctor(program);
}
