// The ZeroMQ addresses of a data-parallel engine's ranks. vLLM and SGLang
// start one publisher (and one replay socket) per rank and shift each tcp
// port by the rank, so a worker given its rank-0 addresses reaches rank r
// on port + r. Two sockets of a fleet that land on one host and port cannot
// both bind: `rankSockets` lists every port a worker's ranks take, so the
// config can refuse such a fleet before an engine fails to start.

const TCP = /^(tcp:\/\/.+):(\d+)$/;

/** tcp://host:port shifted by `offset` ports; other transports only at offset 0. */
export function offsetEndpoint(endpoint: string, offset: number): string {
  const m = TCP.exec(endpoint);
  if (!m) {
    if (offset === 0) return endpoint;
    throw new RangeError(`cannot give each rank its own port from ${endpoint}: use tcp://host:port`);
  }
  return `${m[1]}:${Number(m[2]) + offset}`;
}

/** One socket a rank binds: its address and the config field it comes from. */
export interface RankSocket {
  /** tcp://host:port, or the endpoint as written for other transports. */
  address: string;
  /** The config field, e.g. workers[1].kv_events.replay_endpoint. */
  field: string;
  rank: number;
}

/** The sockets of ranks 0..ranks-1 for each endpoint (field, address) given. */
export function rankSockets(endpoints: readonly { field: string; endpoint: string }[], ranks: number): RankSocket[] {
  const out: RankSocket[] = [];
  for (const { field, endpoint } of endpoints) {
    for (let rank = 0; rank < ranks; rank++) out.push({ address: offsetEndpoint(endpoint, rank), field, rank });
  }
  return out;
}

/** The first two sockets that share an address, or null. */
export function firstCollision(sockets: readonly RankSocket[]): [RankSocket, RankSocket] | null {
  const seen = new Map<string, RankSocket>();
  for (const socket of sockets) {
    const key = socket.address.toLowerCase();
    const earlier = seen.get(key);
    if (earlier) return [earlier, socket];
    seen.set(key, socket);
  }
  return null;
}
