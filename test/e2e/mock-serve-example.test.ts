// `kvrouter mock` backs `kvrouter serve --config examples/mock-fleet.yaml`:
// both started as real processes with the commands the example's comment
// gives, a multi-turn chat through the router finds its earlier turns cached.
// The example's ports are the mock's defaults and the documented flags; the
// test moves every port by one offset so it can run beside other suites.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MOCK_DEFAULT_PORT } from '../../server/cli/mock.js';
import { configFromDocument, parseConfigText } from '../../server/config/load.js';
import { DEFAULTS } from '../../server/config/schema.js';
import { waitFor } from '../helpers/wait.js';
import { spawnKvrouter, type CliProcess } from '../server/cli-process.js';

const EXAMPLE = new URL('../../examples/mock-fleet.yaml', import.meta.url);

/** The `kvrouter ...` command lines of the example's comment, as argument lists. */
function documentedCommands(text: string): string[][] {
  return [...text.matchAll(/^#\s+kvrouter (.+)$/gm)].map((m) => m[1]!.trim().split(/\s+/));
}

/** Every port (a ":NNNN" or "port: NNNN") moved by `offset`. */
function shiftPorts(text: string, offset: number): string {
  return text.replace(/(:\s?)(\d{4,5})\b/g, (_m, sep: string, port: string) => `${sep}${Number(port) + offset}`);
}

describe('examples/mock-fleet.yaml', () => {
  it("fits the mock's defaults: its worker ports, block size and tokenizer", async () => {
    const text = await readFile(EXAMPLE, 'utf8');
    const config = configFromDocument(parseConfigText(text, 'mock-fleet.yaml'));
    expect(config.workers.map((w) => w.url)).toEqual([`http://127.0.0.1:${MOCK_DEFAULT_PORT}`, `http://127.0.0.1:${MOCK_DEFAULT_PORT + 1}`]);
    expect(config.models[0]).toMatchObject({ blockSize: DEFAULTS.blockSize, tokenizer: DEFAULTS.tokenizer });
    expect(config.port).not.toBe(MOCK_DEFAULT_PORT);
    expect(documentedCommands(text).map((c) => c[0])).toEqual(['mock', 'serve']);
  });

  it('started as documented, shows cache hits on the later turns of a chat', async () => {
    const text = await readFile(EXAMPLE, 'utf8');
    // Every moved port stays below the kernel's ephemeral range (32768 up), where other suites' sockets land.
    const offset = 10_000 + Math.floor(Math.random() * 14_000);
    const dir = await mkdtemp(join(tmpdir(), 'kvrouter-example-'));
    const file = join(dir, 'mock-fleet.yaml');
    await writeFile(file, shiftPorts(text, offset));
    const [mockArgs, serveArgs] = documentedCommands(text);
    // The documented command leaves the workers on the mock's default port; moved, it has to be given.
    const mockCommand = [...shiftPorts(mockArgs!.join(' '), offset).split(' '), '--port', String(MOCK_DEFAULT_PORT + offset)];
    const serveCommand = serveArgs!.map((a) => (a === 'examples/mock-fleet.yaml' ? file : a));
    const procs: CliProcess[] = [];
    try {
      const mock = spawnKvrouter(mockCommand);
      procs.push(mock);
      await waitFor(() => /worker 1: http:\/\/\S+\/v1/.test(mock.out()), () => `the mock's workers (stdout: ${mock.out()} stderr: ${mock.err()})`);
      const serve = spawnKvrouter(serveCommand, { KVROUTER_LOG_LEVEL: 'warn' });
      procs.push(serve);
      const listening = () => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(serve.out())?.[1];
      await waitFor(() => listening() !== undefined, () => `the router (stdout: ${serve.out()} stderr: ${serve.err()})`);
      const url = listening()!;
      await waitFor(async () => (await fetch(`${url}/ready`)).status === 200, 'the router ready: both KV subscriptions connected');

      const system = { role: 'system', content: `You plan train journeys across Europe. ${'Give the connections, the times and the platforms. '.repeat(20)}` };
      let messages: { role: string; content: string }[] = [system, { role: 'user', content: 'From Lyon to Turin tomorrow morning?' }];
      const turns: { worker: string | null; prompt: number; cached: number }[] = [];
      for (const question of ['And back on Friday?', 'Is there a night train instead?']) {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'mock-model', messages, max_tokens: 8 }),
        });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { choices: { message: { content: string } }[]; usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } };
        turns.push({ worker: res.headers.get('x-kvrouter-worker'), prompt: body.usage.prompt_tokens, cached: body.usage.prompt_tokens_details.cached_tokens });
        messages = [...messages, { role: 'assistant', content: body.choices[0]!.message.content }, { role: 'user', content: question }];
        // The next turn is routed on what this one's KV events say the worker holds.
        const next = { model: 'mock-model', messages };
        await waitFor(async () => {
          const x = (await (await fetch(`${url}/router/explain`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(next) })).json()) as { workers: { overlap_blocks: number }[] };
          return x.workers.some((w) => w.overlap_blocks > 0);
        }, "the turn's KV events");
      }
      const last = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'mock-model', messages, max_tokens: 4 }) });
      const usage = ((await last.json()) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }).usage;
      turns.push({ worker: last.headers.get('x-kvrouter-worker'), prompt: usage.prompt_tokens, cached: usage.prompt_tokens_details.cached_tokens });

      expect(turns[0]!.cached).toBe(0);
      // Every later turn ran where the conversation was cached and reused all of its earlier prompt but the last block.
      for (let i = 1; i < turns.length; i++) {
        expect(turns[i]!.worker).toBe(turns[0]!.worker);
        expect(turns[i]!.cached).toBeGreaterThanOrEqual(turns[i - 1]!.prompt - 16);
      }
      const metrics = await (await fetch(`${url}/metrics`)).text();
      const ratio = Number(/^kvrouter_cache_hit_ratio\{[^}]*\} (\S+)$/m.exec(metrics)?.[1] ?? /^kvrouter_cache_hit_ratio (\S+)$/m.exec(metrics)?.[1]);
      expect(ratio).toBeGreaterThan(0.3);
    } finally {
      for (const p of procs) p.child.kill('SIGTERM');
      await Promise.all(procs.map((p) => p.exited));
    }
  });
});
