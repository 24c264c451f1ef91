// Runs the `kvrouter` command line as a real process, built as users run it
// (node on dist/server/cli/main.js; the suite's global setup builds it), for
// tests that check its stdout, stderr and exit code.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const main = join(root, 'dist/server/cli/main.js');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `kvrouter ...args`, from the repository root; resolves when the process exits. */
export function kvrouter(...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [main, ...args], { cwd: root }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

export interface CliProcess {
  child: ChildProcess;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  out(): string;
  err(): string;
}

/** A long-running `kvrouter ...args` (serve, relay) whose output the test reads as it comes. */
export function spawnKvrouter(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [main, ...args], {
    env: { ...process.env, KVROUTER_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d));
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}
