// The messages replicas exchange on <prefix>.sync.<model>. One NATS message
// is a frame: a msgpack array of messages (a replica batches what it has to
// say over a few milliseconds: one socket write instead of one per op). Each
// message is a map with short keys; hashes travel as raw bytes (8 per block,
// little-endian).
//
//   add       {k:"add", r, i, w, n, p, c, s, l?, f?}   a booking: request id i on
//             worker w rank n, p prompt tokens of which c cached, s sequence
//             hashes, l local hashes (approximate-mode workers only), f prefill done
//   first     {k:"first", r, i}                        the request's first token
//   free      {k:"free", r, i}                         the request ended
//   snapshot  {k:"snap", r, b: [add without k and r...], x?}
//             every booking replica r holds; x: it is leaving (then b is empty)
//   bind      {k:"bind", r, s, w, n, t, o}             session s bound to w#n at
//             time t by router o
//   unbind    {k:"unbind", r, s, w, n}                 a dispatch of session s to
//             w#n failed
//
// r is the sending replica's id. Decoding checks every field and throws a
// SyncMessageError naming the first bad one ("[2].b[0].p").
import { Packr, Unpackr } from 'msgpackr';
import type { WorkerKey } from '../../bindings/workers.js';

export interface Booking {
  id: string;
  worker: WorkerKey;
  promptTokens: number;
  cachedTokens: number;
  seqHashes: BigUint64Array;
  /** Block hashes a worker without KV events is credited with; null for the others. */
  localHashes: BigUint64Array | null;
  prefillDone: boolean;
}

export type SyncMessage =
  | ({ kind: 'add'; replica: string } & Booking)
  | { kind: 'first'; replica: string; id: string }
  | { kind: 'free'; replica: string; id: string }
  | { kind: 'snapshot'; replica: string; bookings: Booking[]; leaving: boolean }
  | { kind: 'bind'; replica: string; session: string; worker: WorkerKey; since: number; origin: string }
  | { kind: 'unbind'; replica: string; session: string; worker: WorkerKey };

export class SyncMessageError extends TypeError {
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`replica sync message: ${field}: ${detail}`);
    this.name = 'SyncMessageError';
  }
}

const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

function hashBytes(hashes: BigUint64Array): Uint8Array {
  return new Uint8Array(hashes.buffer, hashes.byteOffset, hashes.byteLength);
}

function bookingFields(b: Booking): Record<string, unknown> {
  const out: Record<string, unknown> = { i: b.id, w: b.worker.id, n: b.worker.rank, p: b.promptTokens, c: b.cachedTokens, s: hashBytes(b.seqHashes) };
  if (b.localHashes) out.l = hashBytes(b.localHashes);
  if (b.prefillDone) out.f = true;
  return out;
}

function wireForm(m: SyncMessage): Record<string, unknown> {
  switch (m.kind) {
    case 'add':
      return { k: 'add', r: m.replica, ...bookingFields(m) };
    case 'first':
    case 'free':
      return { k: m.kind, r: m.replica, i: m.id };
    case 'snapshot':
      return { k: 'snap', r: m.replica, b: m.bookings.map(bookingFields), ...(m.leaving && { x: true }) };
    case 'bind':
      return { k: 'bind', r: m.replica, s: m.session, w: m.worker.id, n: m.worker.rank, t: m.since, o: m.origin };
    case 'unbind':
      return { k: 'unbind', r: m.replica, s: m.session, w: m.worker.id, n: m.worker.rank };
  }
}

export function encodeSyncFrame(messages: readonly SyncMessage[]): Uint8Array {
  return packr.pack(messages.map(wireForm));
}

/** Reads the fields of one decoded map, naming the path of a bad value. */
class Reader {
  constructor(
    private readonly raw: Record<string, unknown>,
    private readonly path: string,
  ) {}

  private at(key: string): string {
    return `${this.path}.${key}`;
  }

  string(key: string): string {
    const v = this.raw[key];
    if (typeof v !== 'string' || v.length === 0) throw new SyncMessageError(this.at(key), `must be a non-empty string, got ${show(v)}`);
    return v;
  }

  count(key: string): number {
    const v = this.raw[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new SyncMessageError(this.at(key), `must be a non-negative integer, got ${show(v)}`);
    return v;
  }

  time(key: string): number {
    const v = this.raw[key];
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new SyncMessageError(this.at(key), `must be a finite number, got ${show(v)}`);
    return v;
  }

  flag(key: string): boolean {
    const v = this.raw[key];
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw new SyncMessageError(this.at(key), `must be true or false, got ${show(v)}`);
    return v;
  }

  hashes(key: string, optional: boolean): BigUint64Array | null {
    const v = this.raw[key];
    if (v === undefined && optional) return null;
    if (!(v instanceof Uint8Array) || v.length % 8 !== 0) throw new SyncMessageError(this.at(key), `must be bytes, 8 per hash, got ${show(v)}`);
    // A copy: the decoded bytes may sit at an offset that is not 8-aligned.
    const out = new BigUint64Array(v.length / 8);
    new Uint8Array(out.buffer).set(v);
    return out;
  }

  worker(): WorkerKey {
    return { id: this.string('w'), rank: this.count('n') };
  }

  booking(): Booking {
    const promptTokens = this.count('p');
    const cachedTokens = this.count('c');
    if (cachedTokens > promptTokens) throw new SyncMessageError(this.at('c'), `cached tokens ${cachedTokens} exceed the prompt's ${promptTokens}`);
    return {
      id: this.string('i'),
      worker: this.worker(),
      promptTokens,
      cachedTokens,
      seqHashes: this.hashes('s', false)!,
      localHashes: this.hashes('l', true),
      prefillDone: this.flag('f'),
    };
  }
}

function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object' && v !== null) return 'an object';
  return typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : String(v);
}

function asMap(v: unknown, path: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Uint8Array) throw new SyncMessageError(path, `must be a map, got ${show(v)}`);
  return v as Record<string, unknown>;
}

/** The raw messages of a frame; throws when the bytes are not a msgpack array. */
export function unpackSyncFrame(bytes: Uint8Array): unknown[] {
  let raw: unknown;
  try {
    raw = unpackr.unpack(bytes);
  } catch (error) {
    throw new SyncMessageError('frame', `is not msgpack: ${(error as Error).message}`);
  }
  if (!Array.isArray(raw)) throw new SyncMessageError('frame', `must be a list of messages, got ${show(raw)}`);
  return raw;
}

/** One message of a frame; `path` names it in errors. */
export function readSyncMessage(value: unknown, path: string): SyncMessage {
  const map = asMap(value, path);
  const r = new Reader(map, path);
  const kind = r.string('k');
  const replica = r.string('r');
  switch (kind) {
    case 'add':
      return { kind, replica, ...r.booking() };
    case 'first':
    case 'free':
      return { kind, replica, id: r.string('i') };
    case 'snap': {
      const list = map.b;
      if (!Array.isArray(list)) throw new SyncMessageError(`${path}.b`, `must be a list, got ${show(list)}`);
      const bookings = list.map((item, i) => new Reader(asMap(item, `${path}.b[${i}]`), `${path}.b[${i}]`).booking());
      return { kind: 'snapshot', replica, bookings, leaving: r.flag('x') };
    }
    case 'bind':
      return { kind, replica, session: r.string('s'), worker: r.worker(), since: r.time('t'), origin: r.string('o') };
    case 'unbind':
      return { kind, replica, session: r.string('s'), worker: r.worker() };
    default:
      throw new SyncMessageError(`${path}.k`, `unknown message kind ${JSON.stringify(kind)}`);
  }
}

/** Every message of a frame; throws at the first bad one. */
export function decodeSyncFrame(bytes: Uint8Array): SyncMessage[] {
  return unpackSyncFrame(bytes).map((m, i) => readSyncMessage(m, `[${i}]`));
}
