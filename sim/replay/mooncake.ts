// Mooncake trace format (JSONL, one request per line), as published with the
// FAST'25 Mooncake traces and read by Dynamo's replay:
//   timestamp      arrival in ms from the start of the trace
//   delay          (or delay_ms) instead of timestamp: ms after the previous
//                  turn of the same session completed
//   session_id     optional; turns of one session share it
//   input_length   prompt tokens
//   output_length  tokens to generate
//   hash_ids       one id per block of trace-block-size (512) prompt tokens;
//                  equal ids mean the same block after the same prefix
//   tag            optional (kvrouter's own): the kind of traffic, as
//                  generated workloads tag their requests
// Each id becomes trace-block-size synthetic tokens of its own, and the
// prompt is cut to input_length (so the last block is usually partial).
// Unknown fields are ignored: traces often carry extra columns.
import { TRACE_NAMESPACE, writeTraceTokens } from './synthetic-tokens.js';
import type { Arrival, ReplayRequest, TraceBlocks, Workload } from './workload.js';

export const MOONCAKE_BLOCK_SIZE = 512;

/** A bad trace line; names the line (1-based) and, when one is at fault, the field. */
export class TraceError extends Error {
  override name = 'TraceError';
  constructor(
    readonly source: string,
    readonly line: number,
    readonly field: string | null,
    problem: string,
  ) {
    super(`${source} line ${line}${field ? `, field ${field}` : ''}: ${problem}`);
  }
}

export interface MooncakeOptions {
  /** Tokens each hash id stands for (default 512). */
  traceBlockSize?: number;
  /** Names the trace in errors (default "trace"). */
  source?: string;
}

type Fail = (field: string | null, problem: string) => never;

function nonNegative(fail: Fail, field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) fail(field, `must be a finite number >= 0, got ${JSON.stringify(value)}`);
  return value as number;
}

function positiveInteger(fail: Fail, field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) fail(field, `must be an integer >= 1, got ${JSON.stringify(value)}`);
  return value as number;
}

function hashIds(fail: Fail, value: unknown): number[] {
  if (!Array.isArray(value) || value.length === 0) fail('hash_ids', 'must be a non-empty array of block ids');
  const ids = value as unknown[];
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) fail(`hash_ids[${i}]`, `must be an integer >= 0, got ${JSON.stringify(id)}`);
  }
  return ids as number[];
}

function tagOf(fail: Fail, value: unknown): { tag?: string } {
  if (value === undefined) return {};
  if (typeof value !== 'string' || value === '') fail('tag', `must be a non-empty string, got ${JSON.stringify(value)}`);
  return { tag: value as string };
}

function sessionOf(fail: Fail, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  return fail('session_id', `must be a non-empty string or an integer, got ${JSON.stringify(value)}`);
}

/** A request whose prompt is the trace blocks' tokens, cut to inputLength. */
export function traceRequest(fields: Omit<ReplayRequest, 'trace' | 'writeTokens'>, trace: TraceBlocks): ReplayRequest {
  const { hashIds, blockSize, namespace } = trace;
  const length = fields.inputLength;
  return { ...fields, trace, writeTokens: (out) => writeTraceTokens(out, hashIds, length, blockSize, namespace) };
}

export function parseMooncakeTrace(text: string, options: MooncakeOptions = {}): Workload {
  const blockSize = options.traceBlockSize ?? MOONCAKE_BLOCK_SIZE;
  if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`trace block size must be an integer >= 1, got ${blockSize}`);
  const source = options.source ?? 'trace';
  const requests: ReplayRequest[] = [];
  const sessions = new Set<string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    const line = i + 1;
    const fail: Fail = (field, problem) => {
      throw new TraceError(source, line, field, problem);
    };
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (error) {
      fail(null, `not valid JSON (${(error as Error).message})`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) fail(null, 'must be a JSON object');
    const o = parsed as Record<string, unknown>;
    const inputLength = positiveInteger(fail, 'input_length', o.input_length);
    const outputLength = positiveInteger(fail, 'output_length', o.output_length);
    const ids = hashIds(fail, o.hash_ids);
    if (inputLength > ids.length * blockSize) {
      fail('input_length', `${inputLength} tokens need ${Math.ceil(inputLength / blockSize)} hash_ids of ${blockSize} tokens, the line has ${ids.length}`);
    }
    const sessionId = sessionOf(fail, o.session_id);
    const delayField = o.delay !== undefined ? 'delay' : o.delay_ms !== undefined ? 'delay_ms' : null;
    let arrival: Arrival;
    if (delayField !== null) {
      if (o.timestamp !== undefined) fail(delayField, 'give either timestamp or a delay, not both');
      const delayMs = nonNegative(fail, delayField, o[delayField]);
      if (sessionId === null) fail(delayField, 'a delay counts from the previous turn of a session: session_id is missing');
      if (!sessions.has(sessionId!)) fail(delayField, `session ${JSON.stringify(sessionId)} has no earlier turn to wait for; give its first turn a timestamp`);
      arrival = { delayMs };
    } else {
      if (o.timestamp === undefined) fail('timestamp', 'is required (or delay, for a later turn of a session)');
      arrival = { atMs: nonNegative(fail, 'timestamp', o.timestamp) };
    }
    if (sessionId !== null) sessions.add(sessionId);
    const fields = { id: `line${line}`, sessionId, arrival, inputLength, outputLength, ...tagOf(fail, o.tag) };
    requests.push(traceRequest(fields, { hashIds: ids, blockSize, namespace: TRACE_NAMESPACE }));
  }
  if (requests.length === 0) throw new TraceError(source, lines.length, null, 'the trace has no requests');
  return { name: source, requests };
}

/**
 * The workload as a Mooncake trace, one JSON line per request in workload
 * order, that parseMooncakeTrace reads back into the same prompts, arrivals
 * and sessions. Only prompts made of trace blocks (traces, and the trace-
 * native generators) can be written; every request must use the same trace
 * block size, which the trace must then be replayed at.
 */
export function writeMooncakeTrace(workload: Workload): string {
  let blockSize: number | null = null;
  const lines = workload.requests.map((r) => {
    const trace = r.trace;
    if (!trace || trace.namespace !== TRACE_NAMESPACE) {
      throw new RangeError(`${workload.name}: request "${r.id}" is not made of trace blocks, so it has no Mooncake form (generators that have one: conversations, tool-agents)`);
    }
    blockSize ??= trace.blockSize;
    if (trace.blockSize !== blockSize) throw new RangeError(`${workload.name}: request "${r.id}" uses ${trace.blockSize}-token trace blocks, earlier ones ${blockSize}`);
    const line: Record<string, unknown> = 'atMs' in r.arrival ? { timestamp: r.arrival.atMs } : { delay: r.arrival.delayMs };
    if (r.sessionId !== null) line.session_id = r.sessionId;
    line.input_length = r.inputLength;
    line.output_length = r.outputLength;
    line.hash_ids = trace.hashIds.slice(0, Math.ceil(r.inputLength / trace.blockSize));
    if (r.tag !== undefined) line.tag = r.tag;
    return JSON.stringify(line);
  });
  return lines.join('\n') + '\n';
}

/**
 * The first `count` requests of the trace repeated back to back: each copy
 * starts `gapMs` after the previous copy's last arrival and names its blocks
 * with ids of its own (so copies share nothing), and its sessions too. A
 * longer input with the trace's own mix of lengths, sharing and load.
 */
export function tileTrace(workload: Workload, count: number, gapMs = 1000): Workload {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`count must be an integer >= 1, got ${count}`);
  let span = 0;
  let idSpan = 0;
  for (const r of workload.requests) {
    if (!r.trace) throw new RangeError(`${workload.name}: request "${r.id}" is not made of trace blocks`);
    if ('atMs' in r.arrival) span = Math.max(span, r.arrival.atMs);
    for (const id of r.trace.hashIds) idSpan = Math.max(idSpan, id + 1);
  }
  const requests: ReplayRequest[] = [];
  for (let copy = 0; requests.length < count; copy++) {
    for (const r of workload.requests) {
      if (requests.length === count) break;
      const trace = r.trace!;
      const arrival = 'atMs' in r.arrival ? { atMs: r.arrival.atMs + copy * (span + gapMs) } : r.arrival;
      const { trace: _trace, writeTokens: _write, ...rest } = r;
      const fields = { ...rest, id: `${r.id}.${copy}`, sessionId: r.sessionId === null ? null : `${r.sessionId}.${copy}`, arrival };
      requests.push(traceRequest(fields, { ...trace, hashIds: trace.hashIds.map((id) => id + copy * idSpan) }));
    }
  }
  return { name: `${workload.name} (tiled to ${count})`, requests };
}
