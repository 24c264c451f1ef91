// Engines publish each data-parallel rank's KV events on a socket of its
// own: rank r on the configured port + r, as vLLM offsets them. The simulated
// workers of `kvrouter mock` do the same per worker.

/** tcp://host:port shifted by `offset` ports; another address only unshifted. */
export function offsetEndpoint(endpoint: string, offset: number): string {
  const m = /^(tcp:\/\/.+):(\d+)$/.exec(endpoint);
  if (!m) {
    if (offset === 0) return endpoint;
    throw new RangeError(`cannot give each rank its own port from ${endpoint}: use tcp://host:port`);
  }
  return `${m[1]}:${Number(m[2]) + offset}`;
}
