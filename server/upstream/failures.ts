// What an error of a worker's connection says about the worker. Only
// transport failures and timeouts count against its health; errors the router
// or the client's request caused (a header undici refuses, a request aborted
// here) say nothing about the worker, so a client cannot get a healthy worker
// ejected by sending bad requests.
import type { FailureKind } from '../workers/outliers.js';

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/** Socket errors of a worker that is gone, unreachable or closed the connection before answering. */
const TRANSPORT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
]);

function codeOf(error: Error): string {
  return (error as { code?: string }).code ?? '';
}

export function isTimeout(error: Error): boolean {
  return TIMEOUT_CODES.has(codeOf(error));
}

/** The health failure an error stands for, or null when it is not the worker's. */
export function failureKind(error: Error): Exclude<FailureKind, '5xx'> | null {
  const code = codeOf(error);
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  return TRANSPORT_CODES.has(code) ? 'connect_failure' : null;
}
