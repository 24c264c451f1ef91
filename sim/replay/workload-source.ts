// Where a replay's workload comes from, as plain data: a trace file or a
// `--workload` spec, with the settings that shape it. Workloads hold
// functions (each request writes its own prompt), so they cannot be sent to
// another thread; a source can, and each thread builds the same workload
// from it.
import { readFileSync } from 'node:fs';
import { generateWorkload } from './generators.js';
import { parseMooncakeTrace } from './mooncake.js';
import { limitWorkload, type Workload } from './workload.js';

export type WorkloadSource =
  | { kind: 'trace'; path: string; traceBlockSize: number; limit?: number }
  | { kind: 'generated'; spec: string; seed: number; traceBlockSize: number; limit?: number };

/** A source that cannot be read (the trace file is missing, say). */
export class WorkloadSourceError extends Error {
  override name = 'WorkloadSourceError';
}

export function loadWorkload(source: WorkloadSource): Workload {
  let workload: Workload;
  if (source.kind === 'trace') {
    let text: string;
    try {
      text = readFileSync(source.path, 'utf8');
    } catch (error) {
      throw new WorkloadSourceError(`cannot read --trace ${source.path}: ${(error as Error).message}`);
    }
    workload = parseMooncakeTrace(text, { traceBlockSize: source.traceBlockSize, source: source.path });
  } else {
    workload = generateWorkload(source.spec, { seed: source.seed, traceBlockSize: source.traceBlockSize });
  }
  return source.limit === undefined ? workload : limitWorkload(workload, source.limit);
}
