#!/usr/bin/env node
// The kvrouter command line. Each command registers itself from its own file.
import { Command } from 'commander';
import { registerCommands } from './commands.js';

const program = new Command('kvrouter')
  .description('KV-cache-aware request router for LLM inference fleets')
  .version('0.1.0');
registerCommands(program);
await program.parseAsync(process.argv);
