// Request headers that make the mock server misbehave on purpose, so router
// tests can exercise retries, failover and timeouts against it:
//   x-mock-status: <code>           answer with that status and an OpenAI-style
//                                   error body instead of generating
//   x-mock-disconnect-after: <n>    destroy the connection after n generated
//                                   tokens (n streamed chunks when streaming):
//                                   a worker dying mid-request
//   x-mock-header-delay-ms: <ms>    wait this long before answering at all
import type { IncomingHttpHeaders } from 'node:http';
import { RequestError } from './openai-request.js';

export interface Faults {
  status: number | null;
  disconnectAfter: number | null;
  headerDelayMs: number;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function integerHeader(headers: IncomingHttpHeaders, name: string, min: number, max: number): number | null {
  const raw = header(headers, name);
  if (raw === undefined) return null;
  const value = Number(raw.trim());
  if (raw.trim() === '' || !Number.isInteger(value) || value < min || value > max) {
    throw new RequestError(`${name} must be an integer in ${min}..${max}, got "${raw}"`, 400, 'invalid_mock_header', name);
  }
  return value;
}

/** Reads the fault-injection headers; a malformed one is a 400 naming it. */
export function faultsOf(headers: IncomingHttpHeaders): Faults {
  return {
    status: integerHeader(headers, 'x-mock-status', 400, 599),
    disconnectAfter: integerHeader(headers, 'x-mock-disconnect-after', 0, Number.MAX_SAFE_INTEGER),
    headerDelayMs: integerHeader(headers, 'x-mock-header-delay-ms', 0, 600_000) ?? 0,
  };
}
