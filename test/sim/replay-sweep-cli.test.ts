// `kvrouter replay` load sweeps, capacity search, policy parameters and
// generated workloads, run as real processes (node + tsx on
// server/cli/main.ts) and checked on their output and exit codes.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { kvrouter as cli } from '../server/cli-process.js';
import { jsonl, sharedDocumentTrace } from './replay-fixtures.js';

const scratch = mkdtempSync(join(tmpdir(), 'kvrouter-cli-sweep-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const kvrouter = (...args: string[]) => cli('replay', ...args);
// Each test spawns node + tsx (and worker threads); on a shared machine under load that can take minutes.
const SLOW = 300_000;
const PROCESS_TIMEOUT = { timeout: SLOW };

function file(name: string, content: string): string {
  const path = join(scratch, name);
  writeFileSync(path, content);
  return path;
}

type Line = Record<string, any>;
const lines = (stdout: string): Line[] =>
  stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
const withoutWall = (stdout: string) => stdout.replace(/"wall_ms":[0-9.e+-]+/g, '"wall_ms":0');

// The first 120 requests of the synthetic trace on 4 workers: at a TTFT p90 SLO of 1500 ms, kv's capacity
// lies between 4x and 8x and round-robin's between 2x and 4x.
const synthetic = ['--trace', 'sim/traces/synthetic_trace.jsonl', '--limit', '120', '--workers', '4'];
const SLO = 1500;

describe.concurrent('a load sweep', PROCESS_TIMEOUT, () => {
  it(
    '--json prints a run per policy and load, then each policy capacity, bisected between a load that meets the SLO and one that misses it',
    async () => {
      const run = await kvrouter(...synthetic, '--policy', 'kv,round-robin', '--arrival-speedup', '1,2,4,8', '--slo-ttft-ms', String(SLO), '--json');
      expect(run.code).toBe(0);
      const out = lines(run.stdout);
      const runs = out.filter((l) => l.kind === 'run');
      const capacities = out.filter((l) => l.kind === 'capacity');
      expect(out.map((l) => l.kind)).toEqual([...runs.map(() => 'run'), 'capacity', 'capacity']);
      expect(runs.map((r) => `${r.policy}@${r.arrival_speedup}`)).toEqual(['kv@1', 'kv@2', 'kv@4', 'kv@8', 'round-robin@1', 'round-robin@2', 'round-robin@4', 'round-robin@8']);
      for (const r of runs) expect(r).toMatchObject({ requests: 120, completed: 120, workers: 4 });
      for (const c of capacities) {
        expect(c).toMatchObject({ status: 'found', slo_ttft_p90_ms: SLO, precision: 0.05 });
        const [lo, hi] = c.bracket as [number, number];
        expect(c.capacity).toBe(lo);
        expect(hi / lo).toBeLessThanOrEqual(1.05);
        const probes = c.probes as { arrival_speedup: number; ttft_p90_ms: number; meets_slo: boolean }[];
        const at = (x: number) => probes.find((p) => p.arrival_speedup === x)!;
        expect(at(lo).ttft_p90_ms).toBeLessThanOrEqual(SLO);
        expect(at(hi).ttft_p90_ms).toBeGreaterThan(SLO);
        // hi is the next load measured above lo, and every load up to lo met the SLO (the first crossing).
        expect(probes.filter((p) => p.arrival_speedup > lo && p.arrival_speedup < hi)).toEqual([]);
        for (const p of probes.filter((p) => p.arrival_speedup <= lo)) expect(p.ttft_p90_ms).toBeLessThanOrEqual(SLO);
        for (const p of probes) expect(p.meets_slo).toBe(p.ttft_p90_ms <= SLO);
        // The sweep's own loads are probes with the figures of their run lines.
        for (const r of runs.filter((r) => r.policy === c.policy)) expect(at(r.arrival_speedup).ttft_p90_ms).toBe(r.ttft_ms.p90);
      }
      const [kv, rr] = capacities;
      expect(kv!.capacity).toBeGreaterThan(4);
      expect(kv!.bracket[1]).toBeLessThanOrEqual(8);
      expect(rr!.capacity).toBeGreaterThan(2);
      expect(rr!.bracket[1]).toBeLessThanOrEqual(4);

      // Replayed on their own, the bracket's two loads give the same p90: at or under the SLO, then over it.
      const [lo, hi] = kv!.bracket as [number, number];
      const [atLo, atHi] = await Promise.all([lo, hi].map((x) => kvrouter(...synthetic, '--policy', 'kv', '--arrival-speedup', String(x), '--json')));
      const [p90Lo, p90Hi] = [atLo!, atHi!].map((r) => lines(r.stdout)[0]!.ttft_ms.p90 as number);
      expect(p90Lo).toBeLessThanOrEqual(SLO);
      expect(p90Hi).toBeGreaterThan(SLO);
      expect(p90Lo).toBe((kv!.probes as { arrival_speedup: number; ttft_p90_ms: number }[]).find((p) => p.arrival_speedup === lo)!.ttft_p90_ms);
    },
    SLOW,
  );

  it(
    'prints a row per policy and load, and the capacity table',
    async () => {
      const run = await kvrouter(...synthetic, '--policy', 'kv,round-robin', '--arrival-speedup', '1,4', '--slo-ttft-ms', String(SLO), '--capacity-precision', '0.2');
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^policy +load +done +reuse +ttft mean +ttft p50 +ttft p90 +ttft p99 +x ideal +itl mean/m);
      // The references, once for every load, and each run's figures over the ideal's.
      expect(run.stdout).toMatch(/^\(ideal\) +any +- +0\.\d{3} +\d/m);
      expect(run.stdout).toMatch(/^\(fleet LRU\) +any +- +0\.\d{3} +\d/m);
      expect(run.stdout).toMatch(/^kv +4x +120 +0\.\d{3}( +[0-9.]+){4} +\d+\.\d\d \/ \d+\.\d\d /m);
      for (const policy of ['kv', 'round-robin']) {
        expect(run.stdout).toMatch(new RegExp(`^${policy} +1x +120 `, 'm'));
        expect(run.stdout).toMatch(new RegExp(`^${policy} +4x +120 `, 'm'));
        expect(run.stdout).toMatch(new RegExp(`^${policy} +[0-9.]+x +[0-9.]+x \\.\\. [0-9.]+x +\\d+$`, 'm'));
      }
      expect(run.stdout).toContain(`TTFT p90 <= ${SLO} ms, bisected until the bracket is within 20%`);
    },
    SLOW,
  );

  it(
    'gives byte-identical JSON (apart from wall_ms) on worker threads and in one thread',
    async () => {
      const args = [...synthetic, '--policy', 'kv,power-of-two', '--seed', '3', '--arrival-speedup', '2,4', '--slo-ttft-ms', String(SLO), '--capacity-precision', '0.1', '--json'];
      const [parallel, again, serial] = await Promise.all([kvrouter(...args, '--jobs', '2'), kvrouter(...args, '--jobs', '2'), kvrouter(...args, '--jobs', '1')]);
      expect(parallel.code).toBe(0);
      expect(withoutWall(parallel.stdout)).toBe(withoutWall(serial.stdout));
      expect(withoutWall(again.stdout)).toBe(withoutWall(serial.stdout));
      expect(lines(serial.stdout).filter((l) => l.kind === 'capacity')).toHaveLength(2);
    },
    SLOW,
  );

  it(
    'writes the latency-against-load report',
    async () => {
      const out = join(scratch, 'sweep.html');
      const run = await kvrouter(...synthetic, '--policy', 'kv,round-robin', '--arrival-speedup', '1,4', '--capacity-precision', '0.3', '--report', out);
      expect(run.code).toBe(0);
      const html = readFileSync(out, 'utf8');
      for (const policy of ['kv', 'round-robin']) for (const stat of ['mean', 'p90', 'p99']) expect(html).toContain(`data-chart="latency-load" data-policy="${policy}" data-stat="${stat}"`);
      expect(html).toContain('data-capacity="kv"');
      expect(html.split('data-chart="ttft-cdf"').length - 1).toBe(4);
    },
    SLOW,
  );
});

// Shared documents under load: the kv cost's weights move its decisions here.
const documents = file('documents.jsonl', jsonl(sharedDocumentTrace({ requests: 120, documents: 6, docBlocks: 8, blockSize: 512, gapMs: 40, output: 16 })));

describe.concurrent('policy parameters', PROCESS_TIMEOUT, () => {
  it(
    'two parameters after colons both reach the policy, and runs of one policy with different parameters stay apart',
    async () => {
      const specs = ['kv:prefill_load_scale=2:overlap_credit=0.5', 'kv:prefill_load_scale=2', 'kv:overlap_credit=0.5', 'kv'];
      const out = join(scratch, 'params.html');
      const run = await kvrouter('--trace', documents, '--workers', '3', '--arrival-speedup', '3', '--policy', specs.join(','), '--json', '--report', out);
      expect(run.code).toBe(0);
      const reports = lines(run.stdout);
      expect(reports.map((r) => r.policy)).toEqual(specs);
      const figures = (r: Line) => JSON.stringify([r.prefix_cache_reused_ratio, r.ttft_ms, r.per_worker]);
      const [both, scaleOnly, creditOnly, plain] = reports.map(figures);
      // Each parameter alone changes the decisions, and the pair is neither of them alone.
      expect(scaleOnly).not.toBe(plain);
      expect(creditOnly).not.toBe(plain);
      expect(both).not.toBe(scaleOnly);
      expect(both).not.toBe(creditOnly);
      const html = readFileSync(out, 'utf8');
      for (const spec of specs) expect(html.split(`data-chart="ttft-cdf" data-policy="${spec}"`).length - 1).toBe(1);
    },
    SLOW,
  );

  it('a parameter order does not change the label, and a one-parameter spelling keeps working', async () => {
    const run = await kvrouter('--trace', documents, '--workers', '3', '--limit', '10', '--policy', 'kv:overlap_credit=2.0', '--policy', 'two-tier', '--json');
    expect(run.code).toBe(0);
    expect(lines(run.stdout).map((r) => r.policy)).toEqual(['kv:overlap_credit=2', 'two-tier']);
  });

  const bad: [string, string[], RegExp][] = [
    ['an unknown policy', ['--policy', 'kv,fastest'], /unknown selection policy "fastest" \(known: ttft, kv, two-tier, round-robin, random, least-loaded, power-of-two\)/],
    ['an unknown parameter', ['--policy', 'kv:overlap=1'], /kv: unknown parameter "overlap" \(known: overlap_credit, prefill_load_scale/],
    ['parameters split by a comma', ['--policy', 'kv:overlap_credit=2,prefill_load_scale=4'], /"prefill_load_scale=4" is a parameter, not a policy: .*kv:overlap_credit=2:prefill_load_scale=4/],
    ['the same policy twice', ['--policy', 'kv:overlap_credit=2:prefill_load_scale=4', '--policy', 'kv:prefill_load_scale=4:overlap_credit=2'], /policy kv:prefill_load_scale=4:overlap_credit=2 is given twice \(as kv:overlap_credit=2:prefill_load_scale=4\)/],
    ['a load that is not a number', ['--arrival-speedup', '1,x'], /--arrival-speedup.*expected a number > 0/],
    ['a load given twice', ['--arrival-speedup', '2,1,2'], /arrival speed-up 2 is given twice/],
    ['a precision of 0', ['--arrival-speedup', '1,2', '--capacity-precision', '0'], /--capacity-precision.*between 0.001 and 1/],
    ['--jobs 0', ['--jobs', '0'], /--jobs.*expected an integer >= 1/],
  ];
  it.each(bad)('%s -> exit code 2 with a message, no stack trace', async (_what, args, message) => {
    const run = await kvrouter('--trace', documents, '--workers', '2', ...args);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(run.stdout).toBe('');
  });
});

describe.concurrent('generated workloads', PROCESS_TIMEOUT, () => {
  const conversations = 'conversations:sessions=16:rate=2:turns=4:pause_ms=2000';

  it(
    '--write-trace writes the workload as a Mooncake trace that replays to the same figures',
    async () => {
      const path = join(scratch, 'conversations.jsonl');
      const written = await kvrouter('--workload', conversations, '--seed', '4', '--write-trace', path);
      expect(written.code).toBe(0);
      expect(written.stdout).toBe('');
      const trace = readFileSync(path, 'utf8').trimEnd().split('\n');
      expect(written.stderr).toContain(`wrote ${trace.length} requests to ${path}`);
      const first = JSON.parse(trace[0]!) as Line;
      expect(first).toMatchObject({ timestamp: 0, session_id: 'conv0', tag: 'conversation' });
      expect(first.hash_ids).toHaveLength(Math.ceil(first.input_length / 512));
      const common = ['--workers', '3', '--policy', 'kv,round-robin', '--seed', '4', '--json'];
      const [generated, replayed] = await Promise.all([kvrouter('--workload', conversations, ...common), kvrouter('--trace', path, ...common)]);
      expect(generated.code).toBe(0);
      expect(lines(generated.stdout)[0]).toMatchObject({ requests: trace.length, completed: trace.length });
      expect(withoutWall(replayed.stdout)).toBe(withoutWall(generated.stdout));
    },
    SLOW,
  );

  it(
    'replays both generators merged, with their options',
    async () => {
      const run = await kvrouter('--workload', `${conversations}+tool-agents:sessions=4:turns=3:system_prompts=2048/4096`, '--workers', '2', '--json');
      expect(run.code).toBe(0);
      const [report] = lines(run.stdout);
      expect(Object.keys(report!.by_tag)).toEqual(['conversation', 'tool-agent']);
      expect(report!.completed).toBe(report!.requests);
    },
    SLOW,
  );

  const bad: [string, string[], RegExp][] = [
    ['an unknown workload option', ['--workload', 'conversations:users=5'], /--workload conversations: unknown option "users" \(known: sessions, rate, concurrency, system_prompts/],
    ['an option that is not a number', ['--workload', 'tool-agents:turns=many'], /--workload tool-agents: turns: expected a number, got "many"/],
    ['an option out of range', ['--workload', 'conversations:sessions=0'], /sessions must be an integer >= 1, got 0/],
    ['a workload with no trace form', ['--workload', 'agent-sessions', '--write-trace', join(tmpdir(), 'never-written.jsonl')], /is not made of trace blocks, so it has no Mooncake form/],
    ['a list of loads for a scenario', ['--scenario', 'agents', '--arrival-speedup', '1,2'], /--arrival-speedup takes one value with --scenario/],
  ];
  it.each(bad)('%s -> exit code 2 with a message, no stack trace', async (_what, args, message) => {
    const run = await kvrouter(...args);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });
});
