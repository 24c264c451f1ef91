// `kvrouter replay` run as a real process (node + tsx on server/cli/main.ts),
// checked on its stdout, stderr, exit code and the files it writes.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { kvrouter as cli } from '../server/cli-process.js';
import { jsonl, sharedDocumentTrace } from './replay-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'kvrouter-cli-replay-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const kvrouter = (...args: string[]) => cli('replay', ...args);

function file(name: string, content: string): string {
  const path = join(scratch, name);
  writeFileSync(path, content);
  return path;
}

const trace = file('docs.jsonl', jsonl(sharedDocumentTrace({ requests: 40, documents: 5, docBlocks: 4, blockSize: 512, gapMs: 300 })));
const small = ['--trace', trace, '--workers', '3', '--block-size', '32', '--num-blocks', '4096'];

// Each test spawns node + tsx; on a shared machine under load one can take far longer than the default.
const PROCESS_TIMEOUT = { timeout: 180_000 };

describe.concurrent('kvrouter replay', PROCESS_TIMEOUT, () => {
  it('--json prints one JSON object per policy, one per line, and nothing else on stdout', async () => {
    const run = await kvrouter(...small, '--policy', 'kv', '--policy', 'round-robin,random', '--json');
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    const reports = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(reports.map((r) => r.policy)).toEqual(['kv', 'round-robin', 'random']);
    for (const r of reports) {
      expect(r).toMatchObject({ requests: 40, completed: 40, workers: 3 });
      expect(Object.keys(r.per_worker as object)).toEqual(['w0', 'w1', 'w2']);
    }
    expect(reports[0]!.prefix_cache_reused_ratio as number).toBeGreaterThan(reports[1]!.prefix_cache_reused_ratio as number);
    // Not a terminal: no progress bar.
    expect(run.stderr).toBe('');
  });

  it('two runs give the same JSON apart from wall_ms', async () => {
    const args = [...small, '--policy', 'kv,power-of-two', '--seed', '5', '--json'];
    const [a, b] = await Promise.all([kvrouter(...args), kvrouter(...args)]);
    const strip = (out: string) => out.replace(/"wall_ms":[0-9.e+-]+/g, '"wall_ms":0');
    expect(a.code).toBe(0);
    expect(strip(a.stdout)).toBe(strip(b.stdout));
  });

  it('prints a comparison table and writes a self-contained --report', async () => {
    const out = join(scratch, 'report.html');
    const run = await kvrouter(...small, '--policy', 'kv,round-robin', '--report', out);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^policy +done +reuse/m);
    expect(run.stdout).toMatch(/^kv +40 /m);
    expect(run.stdout).toMatch(/^round-robin +40 /m);
    expect(run.stderr).toContain(`wrote ${out}`);
    const html = readFileSync(out, 'utf8');
    expect(html).not.toMatch(/https?:\/\//);
    expect(html.split('data-chart="ttft-cdf"').length - 1).toBe(2);
  });

  it('replays a generated workload', async () => {
    const run = await kvrouter('--workload', 'agent-sessions+cold-prompts', '--limit', '30', '--workers', '2', '--json');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ policy: 'ttft', requests: 30, completed: 30 });
  });

  const bad: [string, string[], RegExp][] = [
    ['--workers 0', [...small, '--workers', '0'], /--workers.*expected an integer >= 1/],
    ['an unknown policy', [...small, '--policy', 'nope'], /unknown selection policy "nope"/],
    ['a bad policy parameter', [...small, '--policy', 'kv:overlap_credit=x'], /overlap_credit/],
    ['--arrival-speedup abc', [...small, '--arrival-speedup', 'abc'], /--arrival-speedup.*expected a number > 0/],
    ['an unknown flag', [...small, '--frobnicate'], /unknown option '--frobnicate'/],
    ['no trace or workload', ['--workers', '2'], /exactly one of --trace FILE, --workload NAME or --scenario NAME/],
    ['a missing trace file', ['--trace', join(scratch, 'absent.jsonl')], /cannot read --trace .*absent\.jsonl/],
    ['an unknown workload', ['--workload', 'agents'], /unknown --workload "agents"/],
    ['an unknown scenario', ['--scenario', 'nope'], /unknown --scenario "nope" \(known: cold-pool, agents\)/],
    ['--cold-interval-ms 0', ['--scenario', 'cold-pool', '--cold-interval-ms', '0'], /--cold-interval-ms.*expected a number > 0/],
  ];
  it.each(bad)('%s -> exit code 2 with a message, no stack trace', async (_what, args, message) => {
    const run = await kvrouter(...args);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(run.stdout).toBe('');
  });

  it('a bad trace line -> exit code 2 naming the file, line and field', async () => {
    const broken = file('broken.jsonl', jsonl([{ timestamp: 0, input_length: 10, output_length: 1, hash_ids: [1] }, { timestamp: 1, input_length: 0, output_length: 1, hash_ids: [1] }]));
    const run = await kvrouter('--trace', broken);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`${broken} line 2, field input_length: must be an integer >= 1, got 0`);
  });
});
