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
//   snapshot  {k:"snap", r, e, q, m, b: [add without k and r...], x?}
//             part q of m of snapshot e: together the m parts list every
//             booking replica r held when it took snapshot e; x: it is leaving
//             (then there is one part and b is empty)
//   bind      {k:"bind", r, s, w, n, t, o}             session s bound to w#n at
//             time t by router o
//   unbind    {k:"unbind", r, s, w, n}                 a dispatch of session s to
//             w#n failed
//
// r is the sending replica's id. Decoding checks every field and throws a
// SyncMessageError naming the first bad one ("[2].b[0].p").
//
// A NATS server refuses a message larger than its max_payload, so a snapshot
// is cut into parts (snapshotParts) and queued messages into frames
// (encodeSyncFrames) that each fit a byte budget.
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
  | SnapshotPart
  | { kind: 'bind'; replica: string; session: string; worker: WorkerKey; since: number; origin: string }
  | { kind: 'unbind'; replica: string; session: string; worker: WorkerKey };

/** Part `part` (from 0) of `parts` of snapshot `epoch`; the parts' bookings together are the snapshot. */
export interface SnapshotPart {
  kind: 'snapshot';
  replica: string;
  epoch: number;
  part: number;
  parts: number;
  bookings: Booking[];
  leaving: boolean;
}

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
      return { k: 'snap', r: m.replica, e: m.epoch, q: m.part, m: m.parts, b: m.bookings.map(bookingFields), ...(m.leaving && { x: true }) };
    case 'bind':
      return { k: 'bind', r: m.replica, s: m.session, w: m.worker.id, n: m.worker.rank, t: m.since, o: m.origin };
    case 'unbind':
      return { k: 'unbind', r: m.replica, s: m.session, w: m.worker.id, n: m.worker.rank };
  }
}

/** Bytes a frame spends around its messages (the msgpack array header, at most 5). */
export const FRAME_OVERHEAD_BYTES = 5;

/** One frame holding all of `messages`, however large. */
export function encodeSyncFrame(messages: readonly SyncMessage[]): Uint8Array {
  return packr.pack(messages.map(wireForm));
}

export interface EncodedFrame {
  bytes: Uint8Array;
  /** How many messages it holds. */
  messages: number;
}

/**
 * The messages in order, in as few frames of at most `maxBytes` as they fill.
 * A message larger than that by itself gets a frame of its own, which the
 * server will refuse: the caller counts it as a failed publish.
 */
export function encodeSyncFrames(messages: readonly SyncMessage[], maxBytes: number): EncodedFrame[] {
  if (messages.length === 0) return [];
  // Most batches are far under the budget: when even their upper bound fits, one frame packed in one go.
  let bound = FRAME_OVERHEAD_BYTES;
  for (const m of messages) bound += messageBound(m);
  if (bound <= maxBytes) return [{ bytes: encodeSyncFrame(messages), messages: messages.length }];
  // Otherwise each message packed alone, so frames fill up to the budget by their exact sizes.
  const frames: EncodedFrame[] = [];
  let group: Uint8Array[] = [];
  let size = FRAME_OVERHEAD_BYTES;
  const close = () => {
    if (group.length === 0) return;
    frames.push({ bytes: frameOf(group), messages: group.length });
    group = [];
    size = FRAME_OVERHEAD_BYTES;
  };
  for (const message of messages) {
    const packed = packMessage(message);
    if (size + packed.length > maxBytes) close();
    group.push(packed);
    size += packed.length;
  }
  close();
  return frames;
}

function packMessage(m: SyncMessage): Uint8Array {
  // pack() returns a view of the packer's buffer and moves past it, so later packs leave it intact.
  return packr.pack(wireForm(m));
}

/** A msgpack array of already packed items: its header, then the items back to back. */
function frameOf(items: readonly Uint8Array[]): Uint8Array {
  const n = items.length;
  const header = n < 16 ? [0x90 | n] : n < 0x10000 ? [0xdc, n >> 8, n & 0xff] : [0xdd, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  const out = new Uint8Array(header.length + items.reduce((sum, item) => sum + item.length, 0));
  out.set(header);
  let at = header.length;
  for (const item of items) {
    out.set(item, at);
    at += item.length;
  }
  return out;
}

// Upper bounds of encoded sizes, cheap enough to take for every booking of every snapshot (packing
// each booking to measure it would double a snapshot's cost). Each field costs its one-letter key
// (2 bytes) and its value: a string at most 3 bytes per UTF-16 unit, a number 9, bytes their length,
// and every string, bytes, map or list header at most 5.
const KEY = 2;
const HEADER = 5;
const NUMBER = 9;
const stringBound = (s: string) => HEADER + 3 * s.length;
const hashesBound = (h: BigUint64Array) => HEADER + h.byteLength;
/** A map with `fields` keys, its values apart. */
const mapBound = (fields: number) => HEADER + fields * KEY;

/** The values of a booking's 8 fields. */
function bookingValuesBound(b: Booking): number {
  return stringBound(b.id) + stringBound(b.worker.id) + 3 * NUMBER + hashesBound(b.seqHashes) + (b.localHashes ? hashesBound(b.localHashes) : 0) + 1;
}

const bookingBound = (b: Booking) => mapBound(8) + bookingValuesBound(b);

/** A snapshot part without its bookings: k, r, e, q, m, the list's header, x. */
const snapshotPartBound = (replica: string) => mapBound(7) + stringBound('snap') + stringBound(replica) + 3 * NUMBER + HEADER + 1;

function messageBound(m: SyncMessage): number {
  const kr = stringBound(m.kind) + stringBound(m.replica);
  switch (m.kind) {
    case 'add':
      return mapBound(10) + kr + bookingValuesBound(m);
    case 'first':
    case 'free':
      return mapBound(3) + kr + stringBound(m.id);
    case 'snapshot':
      return m.bookings.reduce((n, b) => n + bookingBound(b), snapshotPartBound(m.replica));
    case 'bind':
      return mapBound(7) + kr + stringBound(m.session) + stringBound(m.worker.id) + 2 * NUMBER + stringBound(m.origin);
    case 'unbind':
      return mapBound(5) + kr + stringBound(m.session) + stringBound(m.worker.id) + NUMBER;
  }
}

/**
 * Snapshot `epoch` of `bookings`, cut into parts whose encoding fits `maxBytes` each (at least one
 * part, so an empty snapshot still says "nothing"). A booking too large for a part by itself is left
 * out: no server would carry it.
 */
export function snapshotParts(replica: string, epoch: number, bookings: Iterable<Booking>, maxBytes: number): SnapshotPart[] {
  const base = snapshotPartBound(replica);
  const groups: Booking[][] = [[]];
  let size = base;
  for (const b of bookings) {
    const bound = bookingBound(b);
    if (base + bound > maxBytes) continue;
    if (size + bound > maxBytes) {
      groups.push([]);
      size = base;
    }
    groups.at(-1)!.push(b);
    size += bound;
  }
  return groups.map((group, part) => ({ kind: 'snapshot', replica, epoch, part, parts: groups.length, bookings: group, leaving: false }));
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
      const epoch = r.count('e');
      const part = r.count('q');
      const parts = r.count('m');
      if (part >= parts) throw new SyncMessageError(`${path}.q`, `part ${part} of ${parts} parts does not exist`);
      return { kind: 'snapshot', replica, epoch, part, parts, bookings, leaving: r.flag('x') };
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
