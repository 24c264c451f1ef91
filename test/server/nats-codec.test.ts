import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeToken, encodeToken, NatsNames } from '../../server/nats/subjects.js';
import { decodeSyncFrame, encodeSyncFrame, SyncMessageError, type Booking, type SyncMessage } from '../../server/nats/sync-codec.js';

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
const replica = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
const message: fc.Arbitrary<SyncMessage> = fc.oneof(
  fc.tuple(replica, booking).map(([r, b]) => ({ kind: 'add' as const, replica: r, ...b })),
  fc.tuple(replica, fc.string({ minLength: 1 }), fc.constantFrom('first' as const, 'free' as const)).map(([r, id, kind]) => ({ kind, replica: r, id })),
  fc.tuple(replica, fc.array(booking, { maxLength: 5 })).map(([r, bookings]) => ({ kind: 'snapshot' as const, replica: r, bookings, leaving: false })),
  fc.tuple(replica, fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), fc.nat(8), fc.double({ noNaN: true, noDefaultInfinity: true }), replica).map(
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
    bad({ k: 'snap', r: 'a', b: [{ ...add, p: 'ten' }] }, /: \[1\]\.b\[0\]\.p: must be a non-negative integer/);
    bad({ k: 'bind', r: 'a', s: 's', w: 'w0', n: 0, t: 'now', o: 'a' }, /: \[1\]\.t: must be a finite number/);
    bad({ k: 'hello', r: 'a' }, /: \[1\]\.k: unknown message kind "hello"/);
    bad([1, 2], /: \[1\]: must be a map, got a list/);
    expect(() => decodeSyncFrame(packr.pack({ k: 'first' }))).toThrow(/^replica sync message: frame: must be a list of messages, got an object/);
    expect(() => decodeSyncFrame(new Uint8Array([0xc1]))).toThrow(SyncMessageError);
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
