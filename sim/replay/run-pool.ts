// Runs a sweep's replays: in this thread one after another, or on a pool of
// worker threads, one replay per worker at a time. Each worker builds the
// workload once from its source and keeps it for every job it gets. A
// replay is a pure function of its job, so results are the same either
// way; they come back in job order whatever order the workers finish in.
import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { replayOne, type PolicyRun, type RunSettings } from './replay.js';
import type { IdealFigures } from './report.js';
import type { LoadJob, RunJobs } from './sweep.js';
import type { Workload } from './workload.js';
import type { WorkloadSource } from './workload-source.js';

export type Progress = (label: string, finished: number, total: number) => void;

/** What a worker needs to replay jobs: where its workload comes from, and what every run shares. */
export interface WorkerSetup {
  source: WorkloadSource;
  settings: RunSettings;
  ideal: IdealFigures;
}

export type ToWorker = { type: 'job'; id: number; job: LoadJob };
export type FromWorker =
  | { type: 'done'; id: number; run: PolicyRun }
  | { type: 'progress'; label: string; finished: number; total: number }
  | { type: 'failed'; id: number; message: string };

/** One worker per core: more would only contend (a pool never starts more workers than it has jobs). */
export function defaultJobs(): number {
  return Math.max(1, availableParallelism());
}

export function serialRunner(workload: Workload, settings: RunSettings, ideal: IdealFigures, onProgress?: Progress): RunJobs {
  return async (jobs) => jobs.map((job) => replayOne(workload, job, settings, ideal, onProgress && ((finished, total) => onProgress(job.label, finished, total))));
}

// The worker script beside this module: compiled (.js), or TypeScript when run from source (tests,
// `node --import tsx`). Node 20 does not carry the parent's TypeScript loader into a worker thread,
// so from source the worker registers it first, then loads the script.
const EXTENSION = extname(fileURLToPath(import.meta.url));
const WORKER_URL = new URL(`./run-worker${EXTENSION}`, import.meta.url);
const FROM_SOURCE = EXTENSION === '.ts' ? `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER_URL.href)}); })` : null;

/**
 * A replay allocates short-lived objects at a high rate (KV event token
 * arrays, timers, step plans); with a young generation this large most die
 * before a scavenge copies them. Measured on the 12k-request trace: about 9%
 * less CPU than Node's default.
 */
const YOUNG_GENERATION_MB = 96;

export class RunPool {
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private nextId = 0;

  constructor(
    private readonly size: number,
    private readonly setup: WorkerSetup,
    private readonly onProgress?: Progress,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`jobs must be an integer >= 1, got ${size}`);
  }

  readonly run: RunJobs = (jobs) =>
    new Promise((resolve, reject) => {
      const results = new Array<PolicyRun>(jobs.length);
      let next = 0;
      let finished = 0;
      let failed = false;
      const give = (worker: Worker) => {
        if (failed || next >= jobs.length) {
          this.idle.push(worker);
          return;
        }
        const index = next++;
        const id = this.nextId++;
        const listen = (message: FromWorker) => {
          if (message.type === 'progress') {
            this.onProgress?.(message.label, message.finished, message.total);
            return;
          }
          if (message.id !== id) return;
          worker.off('message', listen);
          worker.off('error', crash);
          if (message.type === 'failed') {
            failed = true;
            reject(new Error(message.message));
            return;
          }
          results[index] = message.run;
          give(worker);
          if (++finished === jobs.length) resolve(results);
        };
        const crash = (error: Error) => {
          failed = true;
          reject(error);
        };
        worker.on('message', listen);
        worker.once('error', crash);
        worker.postMessage({ type: 'job', id, job: jobs[index]! } satisfies ToWorker);
      };
      if (jobs.length === 0) return resolve([]);
      while (this.workers.length < Math.min(this.size, jobs.length) && this.idle.length < jobs.length) this.spawn();
      for (const worker of this.idle.splice(0)) give(worker);
    });

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
    this.workers.length = 0;
    this.idle.length = 0;
  }

  private spawn(): void {
    const options = { workerData: this.setup, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } };
    const worker = FROM_SOURCE ? new Worker(FROM_SOURCE, { ...options, eval: true }) : new Worker(WORKER_URL, options);
    this.workers.push(worker);
    this.idle.push(worker);
  }
}
