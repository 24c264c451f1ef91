// Names on the NATS side. Every subject, stream and bucket starts with the
// configured prefix (one token), so several router fleets can share a server.
//
//   <prefix>.kv.<worker>.<rank>   a worker rank's KV-event batches (JetStream)
//   <prefix>.sync.<model>         replica sync of one model: ledger ops and
//                                 snapshots, session bindings (core NATS)
//   stream <prefix>_kv            holds every <prefix>.kv.> subject
//
// Worker ids and model names become one subject token each: percent-encoded,
// with the characters NATS gives meaning to (".", "*", ">") encoded too.

/** A string as one subject token; decodeToken reverses it. */
export function encodeToken(text: string): string {
  if (text.length === 0) throw new RangeError('a NATS subject token cannot be empty');
  return encodeURIComponent(text).replace(/[.*!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

export function decodeToken(token: string): string {
  return decodeURIComponent(token);
}

export class NatsNames {
  constructor(readonly prefix: string) {
    if (!/^[A-Za-z0-9_-]+$/.test(prefix)) throw new RangeError(`subject prefix must be letters, digits, "_" or "-", got ${JSON.stringify(prefix)}`);
  }

  get kvStream(): string {
    return `${this.prefix}_kv`;
  }

  /** Every KV-event subject (the stream's). */
  get kvAll(): string {
    return `${this.prefix}.kv.>`;
  }

  kvSubject(worker: string, rank: number): string {
    return `${this.prefix}.kv.${encodeToken(worker)}.${rank}`;
  }

  /** Every rank of one worker. */
  kvWorker(worker: string): string {
    return `${this.prefix}.kv.${encodeToken(worker)}.*`;
  }

  /** The rank a KV subject names, or null when the subject is not one. */
  kvRank(subject: string): number | null {
    const parts = subject.split('.');
    if (parts.length !== 4 || parts[0] !== this.prefix || parts[1] !== 'kv') return null;
    const rank = Number(parts[3]);
    return Number.isSafeInteger(rank) && rank >= 0 && String(rank) === parts[3] ? rank : null;
  }

  sync(model: string): string {
    return `${this.prefix}.sync.${encodeToken(model)}`;
  }
}

/** Message headers of relayed KV-event batches. */
export const KV_HEADERS = {
  /** The engine's sequence number of the batch. */
  seq: 'Kvr-Seq',
  /** The engine's timestamp of the batch (seconds), to spot batches already relayed. */
  ts: 'Kvr-Ts',
  /** On a batch sent in parts (kv-parts.ts): "<index>/<count>". */
  part: 'Kvr-Part',
} as const;
