// What a request says about its own routing, beyond the prompt: the JSON body
// (model, stream) and the routing headers.
//
//   x-session-id         session lane (and affinity for session-aware policies)
//   x-session-final      "true" on a session's last turn
//   x-policy-class       policy class (unknown names fall back to the default)
//   x-request-priority   priority jump (fcfs: milliseconds of arrival)
//   x-request-tier       strict-priority tier, higher first
//   x-worker-id          pin to a worker: "id" or "id#rank"
//   x-required-taints    "key=value,..." a worker must carry all of them
//   x-preferred-taints   "key=value:weight,..." workers carrying them cost less
import type { IncomingHttpHeaders } from 'node:http';
import { RouterError } from '../../router/errors.js';
import type { PreferredTaint, RequestFields } from '../../router/partition.js';

function invalid(param: string, message: string): RouterError {
  return new RouterError('KVR_ERR_INVALID_REQUEST', `${param}: ${message}`, { param });
}

/** The JSON object of a request body; malformed JSON is a 400. */
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
  return Array.isArray(value) ? value[0] : value;
}

function numberHeader(headers: IncomingHttpHeaders, name: string, integer: boolean): number {
  const raw = header(headers, name);
  if (raw === undefined) return 0;
  const value = Number(raw.trim());
  if (raw.trim() === '' || !Number.isFinite(value) || (integer && !Number.isSafeInteger(value))) {
    throw invalid(name, `must be ${integer ? 'an integer' : 'a number'}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** "id" or "id#rank". */
export function parseWorkerLabel(raw: string, param: string): { id: string; rank: number } {
  const at = raw.lastIndexOf('#');
  if (at < 0) return { id: raw, rank: 0 };
  const rank = Number(raw.slice(at + 1));
  if (at === 0 || !Number.isSafeInteger(rank) || rank < 0 || raw.slice(at + 1) === '') throw invalid(param, `must be "id" or "id#rank", got ${JSON.stringify(raw)}`);
  return { id: raw.slice(0, at), rank };
}

function taintList(headers: IncomingHttpHeaders, name: string): string[] {
  const raw = header(headers, name);
  if (raw === undefined) return [];
  return raw.split(',').map((t) => t.trim()).filter((t) => t.length > 0);
}

function preferredTaints(headers: IncomingHttpHeaders): PreferredTaint[] {
  return taintList(headers, 'x-preferred-taints').map((item) => {
    const colon = item.lastIndexOf(':');
    const taint = colon < 0 ? item : item.slice(0, colon);
    const weight = colon < 0 ? 1 : Number(item.slice(colon + 1));
    if (!taint.includes('=') || !Number.isFinite(weight) || weight < 0) {
      throw invalid('x-preferred-taints', `entries are "key=value" or "key=value:weight" with weight >= 0, got ${JSON.stringify(item)}`);
    }
    return { taint, weight };
  });
}

/** The routing fields of a request, from its headers and body. */
export function requestFields(id: string, headers: IncomingHttpHeaders): RequestFields {
  const session = header(headers, 'x-session-id');
  const pin = header(headers, 'x-worker-id');
  const fields: RequestFields = {
    id,
    sessionId: session !== undefined && session !== '' ? session : null,
    sessionFinal: header(headers, 'x-session-final') === 'true',
    policyClass: header(headers, 'x-policy-class') ?? null,
    priority: numberHeader(headers, 'x-request-priority', false),
    tier: numberHeader(headers, 'x-request-tier', true),
    pin: pin !== undefined ? parseWorkerLabel(pin, 'x-worker-id') : null,
    allowedWorkers: null,
  };
  if (headers['x-required-taints'] !== undefined) fields.requiredTaints = taintList(headers, 'x-required-taints');
  if (headers['x-preferred-taints'] !== undefined) fields.preferredTaints = preferredTaints(headers);
  return fields;
}
