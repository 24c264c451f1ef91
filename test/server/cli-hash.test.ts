// `kvrouter hash` run as a real process (the built CLI, dist/server/cli/main.js),
// checked on its stdout, stderr and exit code. Expected hashes come from the
// pure-TS twin.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BlockHasher as TwinBlockHasher, seedFor } from '../../bindings/reference/block-hasher.js';
import { kvrouter } from './cli-process.js';

const scratch = mkdtempSync(join(tmpdir(), 'kvrouter-cli-hash-'));
const twin = new TwinBlockHasher();

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function tokensFile(name: string, content: string): string {
  const path = join(scratch, name);
  writeFileSync(path, content);
  return path;
}

function lines(hashes: BigUint64Array): string {
  return [...hashes].map((h) => `${h}\n`).join('');
}

const prompt = Array.from({ length: 37 }, (_, i) => (i * 40_503) % 151_000);

// Each case is a separate process; running them concurrently uses both cores.
describe.concurrent('kvrouter hash', () => {
  it('npx kvrouter hash --block-size 4 1 2 3 4 prints exactly 14643705804678351452', async () => {
    const run = await kvrouter('hash', '--block-size', '4', '1', '2', '3', '4');
    expect(run).toEqual({ code: 0, stdout: '14643705804678351452\n', stderr: '' });
  });

  it('prints one local hash per line, in decimal, for each complete block', async () => {
    const run = await kvrouter('hash', '--block-size', '8', ...prompt.map(String));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(lines(twin.localHashes(prompt, 8)));
    expect(run.stdout.trim().split('\n')).toHaveLength(4);
  });

  it('--chained prints sequence hashes instead', async () => {
    const run = await kvrouter('hash', '--block-size', '8', '--chained', ...prompt.map(String));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(lines(twin.sequenceHashes(twin.localHashes(prompt, 8))));
  });

  it('--lora sets every block\'s seed, --salt the first block\'s, --seed the base', async () => {
    const [lora, salt, seed] = await Promise.all([
      kvrouter('hash', '--block-size', '8', '--lora', 'sql-adapter', ...prompt.map(String)),
      kvrouter('hash', '--block-size', '8', '--salt', 'tenant-7', '--chained', ...prompt.map(String)),
      kvrouter('hash', '--block-size', '8', '--seed', '18446744073709551615', '--lora', 'a', '--salt', 'b', ...prompt.map(String)),
    ]);
    const loraSeed = seedFor({ lora: 'sql-adapter' });
    expect(lora.stdout).toBe(lines(twin.localHashes(prompt, 8, loraSeed)));
    const salted = twin.localHashes(prompt, 8);
    salted[0] = twin.localHashes(prompt.slice(0, 8), 8, seedFor({ salt: 'tenant-7' }))[0]!;
    expect(salt.stdout).toBe(lines(twin.sequenceHashes(salted, seedFor({}))));
    const top = (1n << 64n) - 1n;
    const wrapped = twin.localHashes(prompt, 8, seedFor({ seed: top, lora: 'a' }));
    wrapped[0] = twin.localHashes(prompt.slice(0, 8), 8, seedFor({ seed: top, lora: 'a', salt: 'b' }))[0]!;
    expect(seed.stdout).toBe(lines(wrapped));
  });

  it('--tokens-file reads a JSON array of token ids', async () => {
    const run = await kvrouter('hash', '--block-size', '8', '--tokens-file', tokensFile('prompt.json', JSON.stringify(prompt)));
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(lines(twin.localHashes(prompt, 8)));
  });

  it('prints nothing for a prompt shorter than one block', async () => {
    expect(await kvrouter('hash', '--block-size', '8', '1', '2', '3')).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  // [what is wrong, arguments, a pattern the message must match]
  const badInputs: [string, string[], RegExp][] = [
    ['block size 0', ['--block-size', '0', '1', '2'], /option '--block-size <n>' argument '0' is invalid\. expected an integer in 1\.\.4294967295/],
    ['a block size that is not a number', ['--block-size', 'four', '1'], /--block-size/],
    ['a token that is not an integer', ['--block-size', '2', '1', '2.5'], /tokens\[1\] must be a non-negative integer, got '2\.5'/],
    ['a token of 2^32', ['--block-size', '1', '4294967296'], /tokens\[0\] must be an integer in \[0, 2\^32\), got 4294967296/],
    ['a seed of 2^64', ['--block-size', '1', '--seed', '18446744073709551616', '1'], /option '--seed <n>' argument '18446744073709551616' is invalid\. expected an integer in 0\.\.18446744073709551615/],
    ['a missing --block-size', ['1', '2'], /--block-size/],
    ['an unknown option', ['--block-size', '1', '--colour', '1'], /unknown option '--colour'/],
    ['no tokens at all', ['--block-size', '1'], /no tokens/],
    ['tokens both as arguments and from a file', ['--block-size', '1', '--tokens-file', 'x.json', '1'], /not both/],
    ['a missing tokens file', ['--block-size', '1', '--tokens-file', '/nonexistent/tokens.json'], /cannot read --tokens-file/],
  ];

  it.each(badInputs)('bad input (%s) -> message on stderr and exit code 2, no stack trace', async (_what, args, message) => {
    const run = await kvrouter('hash', ...args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('bad tokens files (not JSON, not an array, a fractional or string token) -> exit code 2 naming the problem', async () => {
    const cases: [string, RegExp][] = [
      [tokensFile('broken.json', '[1, 2,'), /is not valid JSON/],
      [tokensFile('object.json', '{"tokens": [1]}'), /must hold a JSON array of token ids/],
      [tokensFile('fraction.json', '[1, 2, 3.5]'), /tokens\[2\] must be an integer in \[0, 2\^32\), got 3\.5/],
      [tokensFile('string.json', '[1, "2"]'), /tokens\[1\] must be a number, got string/],
    ];
    const runs = await Promise.all(cases.map(([file]) => kvrouter('hash', '--block-size', '1', '--tokens-file', file)));
    runs.forEach((run, i) => {
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(cases[i]![1]);
      expect(run.stderr).not.toMatch(/\n\s+at /);
    });
  });
});
