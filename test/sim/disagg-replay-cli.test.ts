// `kvrouter replay --prefill-workers` as a real process: both fleets' rows,
// their JSON lines, and the flags it refuses.
import { describe, expect, it } from 'vitest';
import { kvrouter } from '../server/cli-process.js';

const WORKLOAD = ['--workload', 'cold-prompts:count=20:interval_ms=100:prompt_tokens=2000/4000:output_tokens=20/40', '--workers', '3', '--block-size', '16', '--seed', '1'];
const PROCESS_TIMEOUT = { timeout: 180_000 };

describe.concurrent('kvrouter replay --prefill-workers', PROCESS_TIMEOUT, () => {
  it('prints the aggregated and the disaggregated fleet side by side', async () => {
    const run = await kvrouter('replay', ...WORKLOAD, '--prefill-workers', '1');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^cold-prompts\(seed 1\): 20 requests, 3 workers$/m);
    expect(run.stdout).toMatch(/^aggregated 3\s+20 /m);
    expect(run.stdout).toMatch(/^disaggregated 1P\+2D\s+20 /m);
  });

  it('--json: one line per fleet', async () => {
    const run = await kvrouter('replay', ...WORKLOAD, '--prefill-workers', '2', '--json', '--kv-bandwidth', '1e9');
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { kind: string; policy: string; completed: number });
    expect(lines.map((l) => [l.kind, l.policy, l.completed])).toEqual([
      ['run', 'aggregated 3', 20],
      ['run', 'disaggregated 2P+1D', 20],
    ]);
  });

  it('refuses a split that leaves no decode worker, and a sweep', async () => {
    const none = await kvrouter('replay', ...WORKLOAD, '--prefill-workers', '3');
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--prefill-workers 3 leaves none of the 3 --workers to decode/);
    const sweep = await kvrouter('replay', ...WORKLOAD, '--prefill-workers', '1', '--arrival-speedup', '1,2');
    expect(sweep.code).toBe(2);
    expect(sweep.stderr).toMatch(/--prefill-workers takes one --arrival-speedup and no SLO/);
  });
});
