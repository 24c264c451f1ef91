// Runs the `kvrouter` command line as a real process (node + tsx on
// server/cli/main.ts), for tests that check its stdout, stderr and exit code.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const main = join(root, 'server/cli/main.ts');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `kvrouter ...args`, from the repository root; resolves when the process exits. */
export function kvrouter(...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', main, ...args], { cwd: root }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}
