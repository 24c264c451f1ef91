// A private nats-server (with JetStream) on a free loopback port, for
// `kvrouter serve --replicas N` on one machine without a configured NATS, and
// for tests and benchmarks. It needs the nats-server binary on PATH (Debian:
// apt-get install nats-server). stop() kills it; start() again on the same
// object restarts it on the same port and store, as after an outage.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface LocalNatsServer {
  readonly url: string;
  readonly port: number;
  /** Starts (or restarts) the server; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Kills the server at once (SIGKILL), like a crash. */
  kill(): Promise<void>;
  /** Stops the server and deletes its store. */
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface LocalNatsOptions {
  binary?: string;
  port?: number;
  /** The largest message the server accepts (its max_payload), when not the server's default of 1 MiB. */
  maxPayload?: number;
}

export async function createLocalNatsServer(options: LocalNatsOptions = {}): Promise<LocalNatsServer> {
  const binary = options.binary ?? 'nats-server';
  const port = options.port ?? (await freePort());
  const store = await mkdtemp(join(tmpdir(), 'kvrouter-nats-'));
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', store];
  if (options.maxPayload !== undefined) {
    // max_payload has no command-line flag: it goes in a config file.
    const file = join(store, 'server.conf');
    await writeFile(file, `max_payload: ${options.maxPayload}\n`);
    args.push('-c', file);
  }
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const kill = async () => {
    if (!child) return;
    child.kill('SIGKILL');
    await exited;
    child = null;
  };

  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    async start() {
      if (child) return;
      // Its own process group: a terminal's Ctrl-C reaches the routers, which drain
      // while NATS stays up; the owner stops it last (and at exit, whatever happens).
      const proc = spawn(binary, args, { stdio: 'ignore', detached: true });
      child = proc;
      const reap = () => proc.kill('SIGKILL');
      process.once('exit', reap);
      proc.once('exit', () => process.off('exit', reap));
      let failure: Error | null = null;
      exited = new Promise((resolve) => {
        proc.once('error', (error) => {
          failure = new Error(`cannot run ${binary} (${error.message}); install it (Debian: apt-get install nats-server) or set nats.url`);
          resolve();
        });
        proc.once('exit', (code) => {
          failure ??= new Error(`${binary} exited with code ${code}`);
          resolve();
        });
      });
      const deadline = Date.now() + 10_000;
      while (!(await accepts(port))) {
        if (failure) {
          child = null;
          throw failure;
        }
        if (Date.now() > deadline) {
          await kill();
          throw new Error(`${binary} did not accept connections on port ${port} within 10 s`);
        }
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    kill,
    async close() {
      await kill();
      await rm(store, { recursive: true, force: true });
    },
  };
}
