import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeToken, encodeToken, NatsNames } from '../../server/nats/subjects.js';
import {
  decodeSyncFrame,
  encodeSyncFrame,
  encodeSyncFrames,
  FRAME_OVERHEAD_BYTES,
  snapshotParts,
  SyncMessageError,
  type Booking,
  type SyncMessage,
} from '../../server/nats/sync-codec.js';

const packr = new Packr({ useRecords: false });

const hashes = fc.array(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { maxLength: 20 }).map((list) => BigUint64Array.from(list));
const booking: fc.Arbitrary<Booking> = fc
  .record({
    id: fc.string({ minLength: 1 }),
    worker: fc.record({ id: fc.string({ minLength: 1 }), rank: fc.nat(64) }),
    promptTokens: fc.nat(1 << 20),
    cached: fc.nat(1 << 20),
    seqHashes: hashes,
    localHashes: fc.option(hashes, { nil: null }),
    prefillDone: fc.boolean(),
  })
  .map(({ cached, ...b }) => ({ ...b, cachedTokens: Math.min(cached, b.promptTokens) }));
// A binding's time: any finite number but -0, which is no time of its own (-0 === 0, and msgpack
// writes both as the integer 0).
const time = fc.double({ noNaN: true, noDefaultInfinity: true }).filter((t) => !Object.is(t, -0));
const replica = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
const message: fc.Arbitrary<SyncMessage> = fc.oneof(
  fc.tuple(replica, booking).map(([r, b]) => ({ kind: 'add' as const, replica: r, ...b })),
  fc.tuple(replica, fc.string({ minLength: 1 }), fc.constantFrom('first' as const, 'free' as const)).map(([r, id, kind]) => ({ kind, replica: r, id })),
  fc
    .tuple(replica, fc.array(booking, { maxLength: 5 }), fc.nat(), fc.integer({ min: 1, max: 1000 }), fc.nat(), fc.boolean())
    .map(([r, bookings, epoch, parts, part, leaving]) => ({ kind: 'snapshot' as const, replica: r, epoch, part: part % parts, parts, bookings, leaving })),
  fc.tuple(replica, fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), fc.nat(8), time, replica).map(
    ([r, session, id, rank, since, origin]) => ({ kind: 'bind' as const, replica: r, session, worker: { id, rank }, since, origin }),
  ),
  fc.tuple(replica, fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), fc.nat(8)).map(([r, session, id, rank]) => ({ kind: 'unbind' as const, replica: r, session, worker: { id, rank } })),
);

describe('replica sync messages', () => {
  it('every frame decodes to the messages encoded, in order', () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 6 }), (messages) => {
        expect(decodeSyncFrame(encodeSyncFrame(messages))).toEqual(messages);
      }),
      { numRuns: 300 },
    );
  });

  it('a bad message throws a SyncMessageError naming the field', () => {
    const bad = (value: unknown, field: RegExp) => {
      const error = (() => {
        try {
          decodeSyncFrame(packr.pack([{ k: 'first', r: 'a', i: 'ok' }, value]));
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(error).toBeInstanceOf(SyncMessageError);
      expect((error as Error).message).toMatch(field);
    };
    const add = { k: 'add', r: 'a', i: 'x', w: 'w0', n: 0, p: 10, c: 2, s: new Uint8Array(8) };
    bad({ ...add, s: new Uint8Array(7) }, /^replica sync message: \[1\]\.s: must be bytes, 8 per hash/);
    bad({ ...add, i: '' }, /: \[1\]\.i: must be a non-empty string/);
    bad({ ...add, n: -1 }, /: \[1\]\.n: must be a non-negative integer/);
    bad({ ...add, c: 11 }, /: \[1\]\.c: cached tokens 11 exceed the prompt's 10/);
    const snap = { k: 'snap', r: 'a', e: 7, q: 0, m: 1, b: [] };
    bad({ ...snap, b: [{ ...add, p: 'ten' }] }, /: \[1\]\.b\[0\]\.p: must be a non-negative integer/);
    bad({ ...snap, q: 2, m: 2 }, /: \[1\]\.q: part 2 of 2 parts does not exist/);
    bad({ ...snap, e: undefined }, /: \[1\]\.e: must be a non-negative integer, got nothing/);
    bad({ k: 'bind', r: 'a', s: 's', w: 'w0', n: 0, t: 'now', o: 'a' }, /: \[1\]\.t: must be a finite number/);
    bad({ k: 'hello', r: 'a' }, /: \[1\]\.k: unknown message kind "hello"/);
    bad([1, 2], /: \[1\]: must be a map, got a list/);
    expect(() => decodeSyncFrame(packr.pack({ k: 'first' }))).toThrow(/^replica sync message: frame: must be a list of messages, got an object/);
    expect(() => decodeSyncFrame(new Uint8Array([0xc1]))).toThrow(SyncMessageError);
  });
});

describe('frames and snapshot parts under a byte budget', () => {
  it('cuts messages into frames of at most the budget, in order; only a message too large alone exceeds it', () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 40 }), fc.integer({ min: 64, max: 4096 }), (messages, budget) => {
        const frames = encodeSyncFrames(messages, budget);
        expect(frames.flatMap((f) => decodeSyncFrame(f.bytes))).toEqual(messages);
        // A message's bytes: alone in a frame, behind a one-byte header.
        const packed = (m: SyncMessage) => encodeSyncFrame([m]).length - 1;
        frames.forEach((f, i) => {
          const held = decodeSyncFrame(f.bytes);
          expect(held).toHaveLength(f.messages);
          if (f.messages > 1) expect(f.bytes.length).toBeLessThanOrEqual(budget);
          // No frame is cut early: the next frame's first message would not have fitted.
          const next = frames[i + 1];
          if (next) expect(FRAME_OVERHEAD_BYTES + held.reduce((n, m) => n + packed(m), 0) + packed(decodeSyncFrame(next.bytes)[0]!)).toBeGreaterThan(budget);
        });
      }),
      { numRuns: 200 },
    );
  });

  it('frames past 15 and past 65,535 messages decode (the longer msgpack array headers)', () => {
    for (const n of [16, 65_536]) {
      const messages: SyncMessage[] = Array.from({ length: n }, (_, i) => ({ kind: 'free', replica: 'a', id: `r${i}` }));
      const [frame, ...rest] = encodeSyncFrames(messages, 1 << 24);
      expect(rest).toEqual([]);
      expect(frame!.messages).toBe(n);
      expect(decodeSyncFrame(frame!.bytes)).toEqual(messages);
    }
  });

  it('cuts a snapshot into numbered parts that each fit the budget and together list every booking in order', () => {
    const smallBooking = booking.filter((b) => b.seqHashes.length + (b.localHashes?.length ?? 0) <= 20);
    fc.assert(
      fc.property(fc.array(smallBooking, { maxLength: 60 }), fc.integer({ min: 2048, max: 8192 }), fc.nat(), (bookings, budget, epoch) => {
        const parts = snapshotParts('replica-1', epoch, bookings, budget);
        expect(parts.length).toBeGreaterThanOrEqual(1);
        parts.forEach((p, i) => {
          expect(p).toMatchObject({ kind: 'snapshot', replica: 'replica-1', epoch, part: i, parts: parts.length, leaving: false });
          // The part's own bytes (alone in a frame, behind a one-byte header) fit the budget.
          expect(encodeSyncFrame([p]).length - 1).toBeLessThanOrEqual(budget);
          const [decoded] = decodeSyncFrame(encodeSyncFrame([p]));
          expect(decoded).toEqual(p);
        });
        expect(parts.flatMap((p) => p.bookings)).toEqual(bookings);
      }),
      { numRuns: 100 },
    );
  });

  it('sends an empty snapshot as one empty part, and leaves out a booking no part could hold', () => {
    expect(snapshotParts('a', 3, [], 1000)).toEqual([{ kind: 'snapshot', replica: 'a', epoch: 3, part: 0, parts: 1, bookings: [], leaving: false }]);
    const small = (id: string): Booking => ({ id, worker: { id: 'w0', rank: 0 }, promptTokens: 64, cachedTokens: 0, seqHashes: new BigUint64Array(4), localHashes: null, prefillDone: false });
    const huge: Booking = { ...small('huge'), promptTokens: 1 << 20, seqHashes: new BigUint64Array(1000) };
    const parts = snapshotParts('a', 3, [small('x'), huge, small('y')], 4000);
    expect(parts.flatMap((p) => p.bookings.map((b) => b.id))).toEqual(['x', 'y']);
  });
});

describe('NATS names', () => {
  it('any worker id or model name is one subject token that decodes back', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (text) => {
        const token = encodeToken(text);
        expect(token).not.toMatch(/[.*>\s]/);
        expect(decodeToken(token)).toBe(text);
      }),
    );
  });

  it('reads the rank back from a KV subject and refuses other subjects', () => {
    const names = new NatsNames('kvr');
    expect(names.kvSubject('gpu.a', 3)).toBe('kvr.kv.gpu%2Ea.3');
    expect(names.kvRank(names.kvSubject('gpu.a', 3))).toBe(3);
    expect(names.kvRank('kvr.kv.w.x')).toBeNull();
    expect(names.kvRank('other.kv.w.1')).toBeNull();
    expect(names.sync('Qwen/Qwen3 8B')).toBe('kvr.sync.Qwen%2FQwen3%208B');
    expect(() => new NatsNames('a.b')).toThrow(/subject prefix/);
  });
});
