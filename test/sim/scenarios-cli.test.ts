// `kvrouter replay --scenario` run as a real process (node + tsx on
// server/cli/main.ts): its JSON lines and report, and determinism; and the
// checks of flags that do not fit together, in process. Exit codes for bad
// scenario flags are in replay-cli.test.ts with the other bad flags.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scenarioFlags, type ReplayCommandOptions } from '../../server/cli/replay.js';
import { kvrouter as cli } from '../server/cli-process.js';

const scratch = mkdtempSync(join(tmpdir(), 'kvrouter-cli-scenario-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const kvrouter = (...args: string[]) => cli('replay', ...args);

const smallColdPool = ['--scenario', 'cold-pool', '--workers', '3', '--duration-s', '45', '--cold-interval-ms', '5000'];
const smallAgents = ['--scenario', 'agents', '--workers', '2', '--programs', '10'];

describe.concurrent('kvrouter replay --scenario', () => {
  it('--json prints one object per run: label, policy, classifier, figures, then the report', async () => {
    const run = await kvrouter(...smallColdPool, '--json');
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.scenario, l.run, l.policy])).toEqual([
      ['cold-pool', 'cold-pool', 'kv'],
      ['cold-pool', 'baseline', 'kv'],
    ]);
    expect(lines.map((l) => (l.classifier as { params: { workers: number } }).params.workers)).toEqual([2, 0]);
    for (const l of lines) {
      expect(Object.keys(l.figures as object)).toContain('warm_itl_p99_ms');
      expect(Object.keys(l.by_tag as object)).toEqual(['warm', 'cold']);
      // 6 s to 45 s, one every 5 s.
      expect((l.by_tag as Record<string, { requests: number }>).cold!.requests).toBe(8);
      expect(l).toMatchObject({ workers: 3, rejected: 0, failed: 0 });
    }
    expect(run.stderr).toBe('');
  });

  it('two runs of a scenario give the same JSON apart from wall_ms', async () => {
    const args = [...smallAgents, '--seed', '3', '--json'];
    const [a, b] = await Promise.all([kvrouter(...args), kvrouter(...args)]);
    const strip = (out: string) => out.replace(/"wall_ms":[0-9.e+-]+/g, '"wall_ms":0');
    expect(a.code).toBe(0);
    expect(a.stdout.split('\n').length).toBe(3);
    expect(strip(a.stdout)).toBe(strip(b.stdout));
  });

  it('prints the settings, the figures side by side and the comparison, writes a --report, and takes typed engine flags over the scenario shape', async () => {
    const out = join(scratch, 'agents.html');
    const run = await kvrouter(...smallAgents, '--report', out, '--num-blocks', '8192');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^scenario agents: agent programs with tool pauses/m);
    expect(run.stdout).toMatch(/^\d+ requests$/m);
    expect(run.stdout).toMatch(/^ {2}engine: 8192 blocks x 64 tokens/m);
    expect(run.stdout).toMatch(/^figure +thunderagent +default$/m);
    expect(run.stdout).toMatch(/^prefill_tokens +\d+ +\d+$/m);
    expect(run.stdout).toMatch(/^thunderagent +\d+ /m);
    const html = readFileSync(out, 'utf8');
    expect(html).toContain('<h2>Scenario figures</h2>');
    expect(html).toContain('<th>thunderagent</th><th>default</th>');
    expect(html.split('data-chart="ttft-cdf"').length - 1).toBe(2);
  });
});

describe('the scenario flags', () => {
  const defaults: ReplayCommandOptions = {
    workers: 8,
    policy: [],
    blockSize: 64,
    traceBlockSize: 512,
    arrivalSpeedup: [1],
    sloTtftMs: 1000,
    capacityPrecision: 0.05,
    jobs: 1,
    engineSpeedup: 1,
    eventDelayMs: 5,
    numBlocks: 16384,
    maxBatchedTokens: 8192,
    maxNumSeqs: 256,
    seed: 0,
  };
  const typed = (...keys: string[]) => (key: string) => keys.includes(key);
  const flags = (o: Partial<ReplayCommandOptions>, explicit = typed()) => scenarioFlags({ ...defaults, ...o }, explicit);

  it('give the scenario, its options and only the engine fields typed on the command line', () => {
    expect(flags({ scenario: 'cold-pool', workers: 4, seed: 2, coldIntervalMs: 4000, numBlocks: 2048 }, typed('numBlocks'))).toEqual({
      name: 'cold-pool',
      options: { workers: 4, seed: 2, coldIntervalMs: 4000 },
      engine: { numBlocks: 2048 },
    });
    expect(flags({ scenario: 'agents', programs: 7, engineSpeedup: 2 }, typed('engineSpeedup'))).toEqual({ name: 'agents', options: { workers: 8, seed: 0, programs: 7 }, engine: { speedup: 2 } });
    expect(flags({ workload: 'cold-prompts' })).toBeNull();
  });

  const bad: [string, Partial<ReplayCommandOptions>, RegExp][] = [
    ['--scenario with --trace', { scenario: 'agents', trace: 'x.jsonl' }, /exactly one of --trace FILE, --workload NAME or --scenario NAME/],
    ['--policy with --scenario', { scenario: 'agents', policy: ['kv'] }, /--policy does not apply to --scenario/],
    ['--limit with --scenario', { scenario: 'agents', limit: 5 }, /--limit does not apply to --scenario \(make it smaller with --programs\)/],
    ['a cold-pool flag on agents', { scenario: 'agents', coldIntervalMs: 5000 }, /--cold-interval-ms does not apply to --scenario agents/],
    ['an agents flag on cold-pool', { scenario: 'cold-pool', programs: 4 }, /--programs does not apply to --scenario cold-pool/],
    ['a scenario flag without --scenario', { workload: 'cold-prompts', warmGapMs: 500 }, /--warm-gap-ms needs --scenario NAME/],
  ];
  it.each(bad)('%s is refused with a message naming the flag', (_what, o, message) => {
    expect(() => flags(o)).toThrow(message);
  });
});
