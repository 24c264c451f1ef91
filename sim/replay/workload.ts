// What replay replays: a list of requests, each arriving at a fixed time or a
// pause after the previous turn of its session completed. Traces and the
// generators both produce this shape; prompts are written only when needed
// (at arrival, or into one reused buffer for a pass over the whole workload),
// so a long workload never holds every prompt in memory at once.

/**
 * A prompt made of trace blocks, as a Mooncake trace line names it: block b is
 * the synthetic tokens of hashIds[b] in `namespace`, blockSize of them, the
 * last cut to the prompt's length. Equal ids mean the same block after the
 * same prefix, so the ids alone say which prompts share what.
 */
export interface TraceBlocks {
  /** At least ceil(inputLength / blockSize) ids; any past those are not part of the prompt. */
  readonly hashIds: readonly number[];
  readonly blockSize: number;
  readonly namespace: number;
}

/** At `atMs` from the start, or `delayMs` after the previous turn of its session ended. */
export type Arrival = { readonly atMs: number } | { readonly delayMs: number };

export interface ReplayRequest {
  /** Unique within the workload. */
  readonly id: string;
  /** Turns of one session share it; a delayed arrival needs one. */
  readonly sessionId: string | null;
  readonly arrival: Arrival;
  /** Prompt tokens (what writeTokens writes). */
  readonly inputLength: number;
  /** Tokens the engine generates (max_tokens). */
  readonly outputLength: number;
  /** The kind of traffic it stands for (e.g. "warm", "cold"), so reports can split by it; none when absent. */
  readonly tag?: string;
  /** The prompt's trace blocks, when it is made of them (traces and the trace-native generators). */
  readonly trace?: TraceBlocks;
  /** Writes the prompt's inputLength token ids into out[0..inputLength). */
  writeTokens(out: Uint32Array): void;
}

/** The prompt in an array of its own (the engine keeps it while the request runs). */
export function promptTokens(request: ReplayRequest): Uint32Array {
  const out = new Uint32Array(request.inputLength);
  request.writeTokens(out);
  return out;
}

export interface Workload {
  readonly name: string;
  readonly requests: readonly ReplayRequest[];
}

/**
 * Checks what the replay relies on: unique ids, sane lengths and times, and
 * a delayed arrival only after an earlier turn of the same session.
 */
export function checkWorkload(workload: Workload): void {
  const ids = new Set<string>();
  const sessions = new Set<string>();
  workload.requests.forEach((r, i) => {
    const where = `${workload.name} request ${i} ("${r.id}")`;
    if (ids.has(r.id)) throw new RangeError(`${where}: id is used twice`);
    ids.add(r.id);
    if (!Number.isInteger(r.inputLength) || r.inputLength < 1) throw new RangeError(`${where}: inputLength must be an integer >= 1, got ${r.inputLength}`);
    if (!Number.isInteger(r.outputLength) || r.outputLength < 1) throw new RangeError(`${where}: outputLength must be an integer >= 1, got ${r.outputLength}`);
    const time = 'atMs' in r.arrival ? r.arrival.atMs : r.arrival.delayMs;
    if (!Number.isFinite(time) || time < 0) throw new RangeError(`${where}: arrival time must be a finite number >= 0, got ${time}`);
    if ('delayMs' in r.arrival && (r.sessionId === null || !sessions.has(r.sessionId))) {
      throw new RangeError(`${where}: a delayed arrival needs an earlier turn of its session`);
    }
    if (r.sessionId !== null) sessions.add(r.sessionId);
  });
}

/** For each request, whether it is the last turn of its session (the router's sessionFinal). */
export function sessionFinals(requests: readonly ReplayRequest[]): boolean[] {
  const seen = new Set<string>();
  const finals = new Array<boolean>(requests.length);
  for (let i = requests.length - 1; i >= 0; i--) {
    const session = requests[i]!.sessionId;
    finals[i] = session !== null && !seen.has(session);
    if (session !== null) seen.add(session);
  }
  return finals;
}

/** The first `count` requests (every kept delayed turn keeps its earlier turns). */
export function limitWorkload(workload: Workload, count: number): Workload {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`request limit must be an integer >= 1, got ${count}`);
  if (count >= workload.requests.length) return workload;
  return { name: `${workload.name} (first ${count})`, requests: workload.requests.slice(0, count) };
}

/** Several workloads replayed together; ids and session ids must not collide. */
export function mergeWorkloads(name: string, ...workloads: Workload[]): Workload {
  const owner = new Map<string, string>();
  for (const w of workloads) {
    for (const r of w.requests) {
      if (r.sessionId === null) continue;
      const first = owner.get(r.sessionId);
      if (first !== undefined && first !== w.name) throw new RangeError(`session "${r.sessionId}" appears in both ${first} and ${w.name}`);
      owner.set(r.sessionId, w.name);
    }
  }
  const merged = { name, requests: workloads.flatMap((w) => w.requests) };
  checkWorkload(merged);
  return merged;
}

/** Generator options over their defaults; an option given as undefined keeps the default. */
export function withDefaults<T extends object>(defaults: Required<T>, options: T): Required<T> {
  const out = { ...defaults };
  for (const [key, value] of Object.entries(options)) if (value !== undefined) (out as Record<string, unknown>)[key] = value;
  return out;
}
