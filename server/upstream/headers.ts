// Headers across the proxy hop. Hop-by-hop headers belong to one connection
// and are never forwarded (undici also refuses some of them on requests);
// everything else passes through as the client or the worker sent it.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** Request headers that must not reach the worker: the hop's own, and what undici sets from the body. */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'host', 'content-length', 'expect']);

/** The client's headers for the worker, as a flat [name, value, ...] list; `apiKey` replaces the client's credentials. */
export function upstreamRequestHeaders(rawHeaders: readonly string[], apiKey: string | null): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (NOT_FORWARDED.has(lower) || (apiKey !== null && lower === 'authorization')) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  if (apiKey !== null) out.push('authorization', `Bearer ${apiKey}`);
  return out;
}

/** The worker's response headers for the client, with the serving worker added. */
export function clientResponseHeaders(headers: IncomingHttpHeaders, worker: string): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    if (!HOP_BY_HOP.has(name)) out[name] = headers[name];
  }
  out['x-kvrouter-worker'] = worker;
  return out;
}

export function isEventStream(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  return typeof type === 'string' && type.includes('text/event-stream');
}
