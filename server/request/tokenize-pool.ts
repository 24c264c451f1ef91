// Tokenizer threads for long prompts. Encoding a prompt costs CPU in
// proportion to its uncached text (about a second for the largest a model
// allows by default); on the event loop that would stall every other
// request, health checks included. The pool runs plans' texts on worker
// threads, each with its own copy of the codec (loaded once per spec), and
// hands the ids back to be finished (and cached) on the event loop.
//
// A job goes to the thread with the least text queued. A thread that dies
// fails its jobs with TokenizePoolError and is replaced on the next job.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { TokenizeAnswer, TokenizeJob } from './tokenize-worker.js';

/** The pool could not encode a plan (its thread failed): not the client's fault. */
export class TokenizePoolError extends Error {
  override name = 'TokenizePoolError';
}

interface Pending {
  chars: number;
  resolve(ids: Uint32Array[]): void;
  reject(error: Error): void;
}

interface Thread {
  worker: Worker;
  queuedChars: number;
  jobs: Map<number, Pending>;
  /** Specs whose codec this thread has been asked to load. */
  specs: Set<string>;
}

function startWorker(): Worker {
  if (import.meta.url.endsWith('.ts')) {
    // Running from source (tests, tsx): the thread loads its TypeScript through tsx as well.
    const entry = new URL('./tokenize-worker.ts', import.meta.url).href;
    const tsx = import.meta.resolve('tsx/esm/api');
    return new Worker(`import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); });`, { eval: true });
  }
  return new Worker(new URL('./tokenize-worker.js', import.meta.url));
}

export class TokenizePool {
  private readonly threads: (Thread | undefined)[];
  private nextId = 0;

  constructor(readonly size = Math.max(1, Math.min(4, availableParallelism() - 1))) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`a tokenize pool needs at least one thread (got ${size})`);
    this.threads = new Array(size).fill(undefined);
  }

  /** Characters waiting in the threads, the job being encoded included. */
  get queuedChars(): number {
    let total = 0;
    for (const t of this.threads) total += t?.queuedChars ?? 0;
    return total;
  }

  /** The ids of each text, encoded by the codec of `spec` as encodeTexts would. */
  encode(spec: string, texts: readonly string[], whole: boolean): Promise<Uint32Array[]> {
    if (texts.length === 0) return Promise.resolve([]);
    return this.submit(this.pick(), spec, texts, whole);
  }

  /**
   * Starts every thread and has it load the codec of `spec` in the background,
   * so the first long prompt does not wait for it (about 0.1-1 s). Cheap to
   * call again.
   */
  warm(spec: string): void {
    for (let i = 0; i < this.threads.length; i++) {
      const thread = this.threads[i] ?? this.spawn(i);
      if (thread.specs.has(spec)) continue;
      // A thread that fails to load the codec fails the jobs of that spec, each with the reason.
      this.submit(thread, spec, [], false).catch(() => undefined);
    }
  }

  private submit(thread: Thread, spec: string, texts: readonly string[], whole: boolean): Promise<Uint32Array[]> {
    let chars = 0;
    for (const t of texts) chars += t.length;
    const id = this.nextId++;
    thread.specs.add(spec);
    return new Promise<Uint32Array[]>((resolve, reject) => {
      thread.jobs.set(id, { chars, resolve, reject });
      if (thread.jobs.size === 1) thread.worker.ref();
      thread.queuedChars += chars;
      const job: TokenizeJob = { id, spec, texts, whole };
      thread.worker.postMessage(job);
    });
  }

  /** Stops every thread; jobs in flight fail. */
  async close(): Promise<void> {
    const running = this.threads.filter((t): t is Thread => t !== undefined);
    this.threads.fill(undefined);
    await Promise.all(running.map((t) => t.worker.terminate()));
  }

  private pick(): Thread {
    let best = -1;
    for (let i = 0; i < this.threads.length; i++) {
      const t = this.threads[i];
      if (t === undefined) return this.spawn(i);
      if (best < 0 || t.queuedChars < this.threads[best]!.queuedChars) best = i;
    }
    return this.threads[best]!;
  }

  private spawn(slot: number): Thread {
    const thread: Thread = { worker: startWorker(), queuedChars: 0, jobs: new Map(), specs: new Set() };
    // An idle thread does not keep the process alive; one with jobs does.
    thread.worker.unref();
    thread.worker.on('message', (answer: TokenizeAnswer) => {
      const job = thread.jobs.get(answer.id);
      if (job === undefined) return;
      thread.jobs.delete(answer.id);
      thread.queuedChars -= job.chars;
      if (thread.jobs.size === 0) thread.worker.unref();
      if ('error' in answer) job.reject(new TokenizePoolError(answer.error));
      else job.resolve(answer.ids);
    });
    const fail = (why: string) => {
      if (this.threads[slot] === thread) this.threads[slot] = undefined;
      for (const job of thread.jobs.values()) job.reject(new TokenizePoolError(why));
      thread.jobs.clear();
      thread.queuedChars = 0;
    };
    thread.worker.on('error', (error) => fail(`a tokenizer thread failed: ${error.message}`));
    thread.worker.on('exit', (code) => fail(`a tokenizer thread exited (code ${code})`));
    this.threads[slot] = thread;
    return thread;
  }
}

let shared: TokenizePool | undefined;

/** The process's pool, started on first use. */
export function sharedTokenizePool(): TokenizePool {
  shared ??= new TokenizePool();
  return shared;
}
