// `kvrouter hash`: prints the KV block hashes the router computes for token
// ids, one per line in decimal, to compare with an engine's KV events or with
// another router's hashes.
import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { BlockHasher, DEFAULT_SEED, seedFor } from '../../bindings/block-hasher.js';
import { saltedPrompt } from '../../router/model-fleet/block-keys.js';
import { BAD_INPUT, integer, u64 } from './options.js';

interface HashOptions {
  blockSize: number;
  chained?: boolean;
  lora?: string;
  salt?: string;
  seed: bigint;
  tokensFile?: string;
}

/** Thrown for input the user can fix; reported without a stack trace. */
class BadInput extends Error {}

function argumentTokens(args: string[]): number[] {
  return args.map((text, i) => {
    if (!/^\d+$/.test(text)) throw new BadInput(`tokens[${i}] must be a non-negative integer, got '${text}'`);
    return Number(text);
  });
}

function fileTokens(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new BadInput(`cannot read --tokens-file ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new BadInput(`--tokens-file ${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new BadInput(`--tokens-file ${file} must hold a JSON array of token ids`);
  return parsed;
}

function blockHashes(args: string[], options: HashOptions): BigUint64Array {
  if (args.length > 0 && options.tokensFile !== undefined) {
    throw new BadInput('give token ids either as arguments or with --tokens-file, not both');
  }
  if (args.length === 0 && options.tokensFile === undefined) {
    throw new BadInput('no tokens: give token ids as arguments or with --tokens-file');
  }
  const tokens = options.tokensFile === undefined ? argumentTokens(args) : fileTokens(options.tokensFile);
  const seed = seedFor({ seed: options.seed, lora: options.lora });
  const hasher = new BlockHasher();
  // Elements of a tokens file are checked here (a RangeError/TypeError naming tokens[i]).
  const local = hasher.localHashes(tokens as ArrayLike<number>, options.blockSize, seed);
  const unsalted = { local, sequence: hasher.sequenceHashes(local, seed) };
  // A salt keys the first block only, as vLLM's extra keys do (router/model-fleet/block-keys.ts).
  const salted = seedFor({ seed: options.seed, lora: options.lora, salt: options.salt });
  const prompt = options.salt ? saltedPrompt(hasher, unsalted, tokens as ArrayLike<number>, options.blockSize, { base: seed, salted }) : unsalted;
  return options.chained ? prompt.sequence : prompt.local;
}

export function registerHash(program: Command): void {
  program
    .command('hash')
    .description('print the KV block hash of each complete block of token ids (XXH3-64, decimal, one per line)')
    .argument('[tokens...]', 'token ids (u32)')
    .requiredOption('--block-size <n>', 'tokens per KV block (u32)', integer(1, 0xffffffff))
    .option('--chained', 'print chained sequence hashes instead of local block hashes')
    .option('--lora <name>', "LoRA adapter name, mixed into every block's seed")
    .option('--salt <salt>', "cache salt, mixed into the first block's seed (the chain carries it on)")
    .addOption(new Option('--seed <n>', 'base seed (u64, decimal or 0x hex)').argParser(u64).default(DEFAULT_SEED, String(DEFAULT_SEED)))
    .option('--tokens-file <file>', 'read token ids from a JSON array instead of the arguments')
    .action(function (this: Command, args: string[], options: HashOptions) {
      let hashes: BigUint64Array;
      try {
        hashes = blockHashes(args, options);
      } catch (err) {
        if (err instanceof BadInput || err instanceof RangeError || err instanceof TypeError) {
          this.error(`error: ${err.message}`, { exitCode: BAD_INPUT, code: 'kvrouter.badInput' });
        }
        throw err;
      }
      if (hashes.length > 0) process.stdout.write(hashes.join('\n') + '\n');
    });
}
