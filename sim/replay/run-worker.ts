// A replay worker thread (run-pool.ts): builds the workload from the source
// it was started with, then replays each job it is sent and posts the run
// back. Progress goes out a hundred times per run at most.
import { parentPort, workerData } from 'node:worker_threads';
import { replayOne } from './replay.js';
import type { FromWorker, ToWorker, WorkerSetup } from './run-pool.js';
import { loadWorkload } from './workload-source.js';

const setup = workerData as WorkerSetup;
const workload = loadWorkload(setup.source);
const port = parentPort!;

port.on('message', (message: ToWorker) => {
  const { id, job } = message;
  try {
    let shown = 0;
    const run = replayOne(workload, job, setup.settings, setup.ideal, (finished, total) => {
      if (finished < total && finished - shown < total / 100) return;
      shown = finished;
      port.postMessage({ type: 'progress', label: job.label, finished, total } satisfies FromWorker);
    });
    port.postMessage({ type: 'done', id, run } satisfies FromWorker);
  } catch (error) {
    port.postMessage({ type: 'failed', id, message: (error as Error).message } satisfies FromWorker);
  }
});
