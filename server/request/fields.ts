// What a request says about its own routing, beyond the prompt: the JSON body
// (model, stream) and the routing headers. Every header is checked here
// against the range the router's core takes, so a bad value is a 400 naming
// the header and never reaches the scheduler.
//
//   x-session-id         session lane (and affinity for session-aware policies)
//   x-session-final      "true" on a session's last turn ("false" or absent otherwise)
//   x-policy-class       policy class (unknown names fall back to the default)
//   x-request-priority   priority jump (fcfs: milliseconds of arrival)
//   x-request-tier       strict-priority tier, higher first
//   x-worker-id          pin to a worker: "id" or "id#rank"
//   x-required-taints    "key=value,..." a worker must carry all of them
//   x-preferred-taints   "key=value:weight,..." workers carrying them cost less
import type { IncomingHttpHeaders } from 'node:http';
import { RouterError } from '../../router/errors.js';
import type { PreferredTaint, RequestFields } from '../../router/model-fleet.js';
import { checkJsonDepth, checkToolArgumentsDepth } from './json-depth.js';

/** The lane heap keys lanes by a 32-bit tier (bindings/lane-heap.ts). */
export const MAX_TIER = 0x7fffffff;
/** Keeps the fcfs key (arrival - priority) and the wspt key (-(1 + priority) / cost) finite and exact enough. */
export const MAX_PRIORITY = 1e12;
/** Longest session id, class name and worker label (characters). */
export const MAX_NAME_CHARS = 256;
/** Worker ranks are 16-bit in the prefix index. */
export const MAX_RANK = 0xffff;
/** Entries of x-required-taints and x-preferred-taints, and the largest preferred weight. */
export const MAX_TAINTS = 32;
export const MAX_TAINT_WEIGHT = 1e6;

/** A taint as workers carry it: "key=value", the key without "=" or spaces, the value without spaces. */
const TAINT = /^[^=\s]+=\S*$/;

function invalid(param: string, message: string): RouterError {
  return new RouterError('KVR_ERR_INVALID_REQUEST', `${param}: ${message}`, { param });
}

/** The JSON object of a request body; malformed JSON, or JSON nested too deep to render, is a 400. */
export function parseJsonBody(raw: Buffer | string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
  } catch (error) {
    throw new RouterError('KVR_ERR_INVALID_REQUEST', `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RouterError('KVR_ERR_INVALID_REQUEST', 'the request body must be a JSON object');
  }
  checkJsonDepth(body);
  checkToolArgumentsDepth(body as Record<string, unknown>);
  return body as Record<string, unknown>;
}

export function modelOf(body: Record<string, unknown>): string {
  const model = body.model;
  if (typeof model !== 'string' || model.length === 0) throw invalid('model', 'is required (a model name from GET /v1/models)');
  return model;
}

export function streamOf(body: Record<string, unknown>): boolean {
  const stream = body.stream;
  if (stream === undefined || stream === null) return false;
  if (typeof stream !== 'boolean') throw invalid('stream', 'must be true or false');
  return stream;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A header's text, at most MAX_NAME_CHARS long; undefined when absent. */
function nameHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const raw = header(headers, name);
  if (raw !== undefined && raw.length > MAX_NAME_CHARS) throw invalid(name, `must be at most ${MAX_NAME_CHARS} characters, got ${raw.length}`);
  return raw;
}

function numberHeader(headers: IncomingHttpHeaders, name: string, integer: boolean, max: number): number {
  const raw = header(headers, name);
  if (raw === undefined) return 0;
  const text = raw.trim();
  const value = Number(text);
  if (text === '' || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || Math.abs(value) > max) {
    throw invalid(name, `must be ${integer ? 'an integer' : 'a number'} in -${max}..${max}, got ${JSON.stringify(raw.slice(0, 64))}`);
  }
  return value;
}

function flagHeader(headers: IncomingHttpHeaders, name: string): boolean {
  const raw = header(headers, name);
  if (raw === undefined) return false;
  const text = raw.trim().toLowerCase();
  if (text !== 'true' && text !== 'false') throw invalid(name, `must be "true" or "false", got ${JSON.stringify(raw.slice(0, 64))}`);
  return text === 'true';
}

/** "id" or "id#rank". */
export function parseWorkerLabel(raw: string, param: string): { id: string; rank: number } {
  if (raw.length > MAX_NAME_CHARS) throw invalid(param, `must be at most ${MAX_NAME_CHARS} characters, got ${raw.length}`);
  const at = raw.lastIndexOf('#');
  if (at < 0) {
    if (raw === '') throw invalid(param, 'must be "id" or "id#rank", got ""');
    return { id: raw, rank: 0 };
  }
  const digits = raw.slice(at + 1);
  const rank = Number(digits);
  if (at === 0 || !/^\d+$/.test(digits) || rank > MAX_RANK) {
    throw invalid(param, `must be "id" or "id#rank" with rank in 0..${MAX_RANK}, got ${JSON.stringify(raw)}`);
  }
  return { id: raw.slice(0, at), rank };
}

function taintEntries(headers: IncomingHttpHeaders, name: string): string[] {
  const raw = header(headers, name);
  if (raw === undefined) return [];
  const entries = raw.split(',').map((t) => t.trim()).filter((t) => t.length > 0);
  if (entries.length > MAX_TAINTS) throw invalid(name, `has ${entries.length} entries, at most ${MAX_TAINTS} are allowed`);
  for (const entry of entries) {
    if (entry.length > MAX_NAME_CHARS) throw invalid(name, `an entry is ${entry.length} characters, at most ${MAX_NAME_CHARS} are allowed`);
  }
  return entries;
}

function requiredTaints(headers: IncomingHttpHeaders): string[] {
  const entries = taintEntries(headers, 'x-required-taints');
  for (const entry of entries) {
    if (!TAINT.test(entry)) throw invalid('x-required-taints', `entries are "key=value" (key without "=", no spaces), got ${JSON.stringify(entry)}`);
  }
  return entries;
}

function preferredTaints(headers: IncomingHttpHeaders): PreferredTaint[] {
  return taintEntries(headers, 'x-preferred-taints').map((item) => {
    const colon = item.lastIndexOf(':');
    const taint = colon < 0 ? item : item.slice(0, colon);
    const weightText = colon < 0 ? '1' : item.slice(colon + 1);
    const weight = Number(weightText);
    if (!TAINT.test(taint) || weightText.trim() === '' || !Number.isFinite(weight) || weight < 0 || weight > MAX_TAINT_WEIGHT) {
      throw invalid('x-preferred-taints', `entries are "key=value" or "key=value:weight" with weight in 0..${MAX_TAINT_WEIGHT}, got ${JSON.stringify(item)}`);
    }
    return { taint, weight };
  });
}

/** The routing fields of a request, from its headers; a bad header is a 400 naming it. */
export function requestFields(id: string, headers: IncomingHttpHeaders): RequestFields {
  const session = nameHeader(headers, 'x-session-id');
  const pin = header(headers, 'x-worker-id');
  const fields: RequestFields = {
    id,
    sessionId: session !== undefined && session !== '' ? session : null,
    sessionFinal: flagHeader(headers, 'x-session-final'),
    policyClass: nameHeader(headers, 'x-policy-class') ?? null,
    priority: numberHeader(headers, 'x-request-priority', false, MAX_PRIORITY),
    tier: numberHeader(headers, 'x-request-tier', true, MAX_TIER),
    pin: pin !== undefined ? parseWorkerLabel(pin, 'x-worker-id') : null,
    allowedWorkers: null,
  };
  if (headers['x-required-taints'] !== undefined) fields.requiredTaints = requiredTaints(headers);
  if (headers['x-preferred-taints'] !== undefined) fields.preferredTaints = preferredTaints(headers);
  return fields;
}
