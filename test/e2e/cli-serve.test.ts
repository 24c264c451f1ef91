// `kvrouter serve`: as a real process with no config it starts the embedded
// default (what `npm start` runs) and answers a chat request, and SIGTERM
// stops it cleanly; a bad config fails at start with the field named.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { registerServe } from '../../server/cli/serve.js';
import { waitFor } from '../helpers/wait.js';
import { spawnKvrouter } from '../server/cli-process.js';


const start = (args: string[], env: Record<string, string> = {}) => spawnKvrouter(['serve', ...args], { PORT: '0', HOST: '127.0.0.1', ...env });

describe('kvrouter serve', () => {
  it('runs the embedded default: four mock workers, a chat request answered, SIGTERM stops it', async () => {
    const proc = start(['--mock-speedup', '20']);
    try {
      const listening = () => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(proc.out())?.[1];
      const workerLines = () => proc.out().match(/^worker mock-\d: http:\/\/127\.0\.0\.1:\d+ \(mock-model, kv events tcp:\/\/127\.0\.0\.1:\d+/gm) ?? [];
      // The worker lines follow the listening line.
      await waitFor(() => listening() !== undefined && workerLines().length >= 4, () => `the listening and worker lines (stdout: ${proc.out()} stderr: ${proc.err()})`);
      const url = listening()!;
      expect(workerLines()).toHaveLength(4);
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'mock-model', messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 3 }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-kvrouter-worker')).toMatch(/^mock-[0-3]$/);
      const body = (await res.json()) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
      expect(body.usage.completion_tokens).toBe(3);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      expect(proc.out()).toMatch(/kvrouter: stopped/);
    } finally {
      proc.child.kill('SIGKILL');
    }
  });

  it('fails at start with the bad field named and exit code 1', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvrouter-serve-'));
    const file = join(dir, 'router.yaml');
    await writeFile(file, 'workers:\n  - id: w0\n    url: http://127.0.0.1:9\n    model: m\n    kv_events:\n      endpoint: nowhere\n');
    const errors: string[] = [];
    const error = vi.spyOn(console, 'error').mockImplementation((line: string) => void errors.push(line));
    const program = new Command('kvrouter').exitOverride();
    registerServe(program);
    try {
      await program.parseAsync(['node', 'kvrouter', 'serve', '--config', file]);
      expect(process.exitCode).toBe(1);
    } finally {
      error.mockRestore();
      process.exitCode = undefined;
    }
    expect(errors).toEqual([`kvrouter serve: ${file}: workers[0].kv_events.endpoint: must be a ZeroMQ address to connect to, such as tcp://10.0.0.5:5557, got "nowhere"`]);
  });
});
