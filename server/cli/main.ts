#!/usr/bin/env node
// The kvrouter command line.
import { Command } from 'commander';
import { registerCommands } from './commands.js';
import { exitOnBadInput } from './options.js';

const program = exitOnBadInput(new Command('kvrouter'))
  .description('KV-cache-aware request router for LLM inference fleets')
  .version('0.1.0');
await registerCommands(program, process.argv);
await program.parseAsync(process.argv);
