// `kvrouter mock` with one worker as a child process, for tests that kill,
// stop or restart a worker's whole process.
import { spawnKvrouter, type CliProcess } from '../server/cli-process.js';
import { waitFor } from '../helpers/wait.js';

/** Starts the mock on `port` (0: any); resolves with its URL once it listens. */
export async function startMockProcess(port: number, extra: string[] = ['--engine-speedup', '20']): Promise<{ process: CliProcess; url: string }> {
  const process = spawnKvrouter(['mock', '--port', String(port), '--workers', '1', ...extra]);
  let url = '';
  await waitFor(
    () => {
      url = /worker 0: (http:\/\/\S+)\/v1/.exec(process.out())?.[1] ?? '';
      return url !== '' || process.child.exitCode !== null;
    },
    'the mock worker process to listen',
    20_000,
  );
  if (!url) throw new Error(`kvrouter mock did not start: ${process.err()}`);
  return { process, url };
}
