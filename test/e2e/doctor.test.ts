// `kvrouter doctor` as a real process against a running router: it finds the
// router and its admin token from the config file, prints each rank's verdict
// with what was seen and the fix, and says by its exit code whether all is well.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { kvrouter } from '../server/cli-process.js';
import { refusedPort } from './refused-port.js';
import { waitFor } from './stack.js';
import { MODEL, sendShared, startDiagnosedRouter, startMocks, type DiagnosedRouter, type Mocks } from './diagnose-fleet.js';

let mocks: Mocks;
let router: DiagnosedRouter;
let dir: string;

/** A config file in the test's directory. */
function configFile(name: string, document: Record<string, unknown>): string {
  const path = join(dir, name);
  writeFileSync(path, stringify(document));
  return path;
}

let document: Record<string, unknown>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kvrouter-doctor-'));
  mocks = await startMocks({ blockSize: 32, workers: 2 });
  // Both engines store 32-token blocks; the model "small-blocks" that "wrong" serves is told 16.
  document = {
    admin_token: 'doctor-secret',
    models: [
      { name: MODEL, tokenizer: 'bytes', block_size: 32 },
      { name: 'small-blocks', tokenizer: 'bytes', block_size: 16 },
    ],
    workers: [
      { id: 'right', url: mocks.fleet.urls[0]!, model: MODEL, kv_events: { source: 'zmq', endpoint: mocks.endpoints[0]!, topic: 'kv-events' } },
      { id: 'wrong', url: mocks.fleet.urls[1]!, model: 'small-blocks', kv_events: { source: 'zmq', endpoint: mocks.endpoints[1]!, topic: 'kv-events' } },
    ],
  };
  router = await startDiagnosedRouter(document);
  await sendShared(router.url, 2, 4, 32, { 'x-worker-id': 'right' });
  const res = await fetch(`${router.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'small-blocks', prompt: Array.from({ length: 128 }, (_, i) => 7 + i), max_tokens: 2 }),
  });
  expect(res.status).toBe(200);
  await waitFor(async () => (await fetch(`${router.url}/router/diagnose`, { headers: { authorization: 'Bearer doctor-secret' } }).then((r) => r.json()) as { summary: { mismatch: number } }).summary.mismatch === 1, 'the mismatch');
}, 60_000);

afterAll(async () => {
  await router?.close();
  await mocks?.close();
});

describe('kvrouter doctor', () => {
  it('prints the verdicts worst first with the fix, reaching the router and its token through the config, and exits 1', async () => {
    const path = configFile('router.yaml', { ...document, host: '127.0.0.1', port: router.router.port });
    const run = await kvrouter('doctor', '--config', path);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(1);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toContain('2 worker rank(s): 1 mismatch, 1 ok');
    const wrong = lines.findIndex((l) => l.startsWith('MISMATCH wrong (model small-blocks)'));
    const right = lines.findIndex((l) => l.startsWith('OK       right (model mock-model)'));
    expect(wrong).toBeGreaterThan(0);
    expect(right).toBeGreaterThan(wrong);
    expect(lines[wrong + 1]).toBe("  block_size: the engine's KV block size differs from the model's block_size");
    expect(lines[wrong + 2]).toContain('seen: the engine stores blocks of 32 tokens');
    expect(lines[wrong + 3]).toContain("fix:  Set the model's block_size");
  });

  it('--json prints the diagnose answer as JSON', async () => {
    const path = configFile('router-json.yaml', { ...document, host: '127.0.0.1', port: router.router.port });
    const run = await kvrouter('doctor', '--config', path, '--json');
    const report = JSON.parse(run.stdout) as { workers: { worker: string; verdict: string }[] };
    expect(report.workers.map((w) => [w.worker, w.verdict])).toEqual([
      ['wrong', 'mismatch'],
      ['right', 'ok'],
    ]);
  });

  it('exits 2 naming the address when no router answers there', async () => {
    const port = refusedPort();
    const path = configFile('nobody.yaml', { ...document, host: '0.0.0.0', port });
    const run = await kvrouter('doctor', '--config', path);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`cannot reach the router at http://127.0.0.1:${port}`);
  });

  it('exits 2 on a wrong admin token, with the router\'s answer', async () => {
    const path = configFile('bad-token.yaml', { ...document, admin_token: 'not-the-token', host: '127.0.0.1', port: router.router.port });
    const run = await kvrouter('doctor', '--config', path);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('answered 401');
  });
});
