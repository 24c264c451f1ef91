// Writing router errors on a raw Node response: the OpenAI-style JSON body,
// the serving worker when one was chosen, and Retry-After when waiting helps.
// Mid-stream, an error is one SSE `data:` event before the stream closes.
import type { ServerResponse } from 'node:http';
import { RouterError } from '../../router/errors.js';

/** Seconds a client should wait before retrying an overload answer. */
const RETRY_AFTER_S = 1;

function retryable(error: RouterError): boolean {
  return error.status === 529 || error.code === 'KVR_ERR_ALL_OVERLOADED' || error.code === 'KVR_ERR_PINNED_OVERLOADED' || error.code === 'KVR_ERR_NO_WORKERS';
}

export function sendError(res: ServerResponse, error: RouterError, worker: string | null = null): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(error.toBody());
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
  if (worker !== null) headers['x-kvrouter-worker'] = worker;
  if (retryable(error)) headers['retry-after'] = RETRY_AFTER_S;
  res.writeHead(error.status, headers);
  res.end(text);
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The SSE event that ends a stream that failed after it started. */
export function sseErrorEvent(error: RouterError): string {
  return `data: ${JSON.stringify(error.toBody())}\n\n`;
}

/** Any thrown value as a RouterError (unexpected ones become a 500). */
export function asRouterError(error: unknown): RouterError {
  if (RouterError.is(error)) return error;
  return new RouterError('KVR_ERR_INTERNAL', `the router failed unexpectedly: ${error instanceof Error ? error.message : String(error)}`);
}
