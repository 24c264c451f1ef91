// The documented way to try disaggregation: `kvrouter mock --role prefill`
// and `kvrouter mock --role decode` as their own processes, and `kvrouter
// serve --config` with the roles, all over real HTTP and ZeroMQ.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { spawnKvrouter, type CliProcess } from '../server/cli-process.js';

const MOCK = ['mock', '--port', '0', '--block-size', '16', '--engine-speedup', '20', '--model', 'pd', '--kv-events', 'tcp://127.0.0.1:*', '--kv-topic', 'kv'];

async function worker(proc: CliProcess): Promise<{ url: string; events: string }> {
  const url = () => /worker 0: (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(proc.out())?.[1];
  const events = () => /worker 0: kv events (tcp:\/\/127\.0\.0\.1:\d+)/.exec(proc.out())?.[1];
  await waitFor(() => url() !== undefined && events() !== undefined, () => `the mock's worker lines (stdout: ${proc.out()} stderr: ${proc.err()})`);
  return { url: url()!, events: events()! };
}

describe('kvrouter mock --role and kvrouter serve with roles', () => {
  it.each(['vllm', 'sglang'])('a long prompt prefills on one mock process and decodes on the other (%s)', async (engine) => {
    const procs: CliProcess[] = [];
    try {
      const prefillProc = spawnKvrouter([...MOCK, '--role', 'prefill', '--handoff', engine]);
      const decodeProc = spawnKvrouter([...MOCK, '--role', 'decode', '--handoff', engine]);
      procs.push(prefillProc, decodeProc);
      const [p, d] = [await worker(prefillProc), await worker(decodeProc)];
      expect(prefillProc.out()).toMatch(new RegExp(`role prefill \\(${engine} handoff\\)`));
      const dir = await mkdtemp(join(tmpdir(), 'kvrouter-pd-'));
      const file = join(dir, 'router.yaml');
      const bootstrap = engine === 'sglang' ? `, bootstrap_port: ${new URL(p.url).port}` : '';
      await writeFile(
        file,
        [
          'tokenizer: bytes',
          'models:',
          `  - { name: pd, block_size: 16, engine: ${engine}, disaggregation: { min_remote_prefill_tokens: 256 } }`,
          'workers:',
          `  - { id: p0, url: ${p.url}, role: prefill${bootstrap}, kv_events: { endpoint: ${p.events}, topic: kv } }`,
          `  - { id: d0, url: ${d.url}, role: decode, kv_events: { endpoint: ${d.events}, topic: kv } }`,
          '',
        ].join('\n'),
      );
      const router = spawnKvrouter(['serve', '--config', file], { PORT: '0', HOST: '127.0.0.1' });
      procs.push(router);
      const listening = () => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(router.out())?.[1];
      await waitFor(() => listening() !== undefined, () => `the router to listen (stdout: ${router.out()} stderr: ${router.err()})`);
      const ids = Array.from({ length: 810 }, (_, i) => 1 + ((i * 7919) % 50_000));
      const res = await fetch(`${listening()}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'pd', prompt: ids, max_tokens: 4, stream: true }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-kvrouter-worker')).toBe('d0');
      expect(await res.text()).toMatch(/data: \[DONE\]\n\n$/);
      const decodeStats = (await (await fetch(`${d.url}/mock/stats`)).json()) as { receivedTokens: number };
      expect(decodeStats.receivedTokens).toBe(800);
    } finally {
      for (const proc of procs) proc.child.kill('SIGKILL');
    }
  });
});
