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

/**
 * The header vLLM and SGLang read to run a request on one data-parallel rank
 * instead of balancing it themselves. The router sets it for the rank it
 * placed, booked and matched the request on; a client's own value never
 * passes (pinning a rank is x-worker-id: id#rank).
 */
export const DP_RANK_HEADER = 'x-data-parallel-rank';

/** Request headers that must not reach the worker: the hop's own, what undici sets from the body, and the rank the router sets. */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'host', 'content-length', 'expect', DP_RANK_HEADER]);

/**
 * The client's headers for the worker, as a flat [name, value, ...] list;
 * `apiKey` replaces the client's credentials, and `rank` (null for a worker
 * with one rank) names the data-parallel rank chosen.
 */
export function upstreamRequestHeaders(rawHeaders: readonly string[], apiKey: string | null, rank: number | null): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (NOT_FORWARDED.has(lower) || (apiKey !== null && lower === 'authorization')) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  if (apiKey !== null) out.push('authorization', `Bearer ${apiKey}`);
  if (rank !== null) out.push(DP_RANK_HEADER, String(rank));
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
