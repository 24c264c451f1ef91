// The rules behind each worker rank's verdict, with time passed in.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockHasher } from '../../bindings/reference/block-hasher.js';
import type { BlockStored, KvEvent, KvEventBatch } from '../../router/kv-events.js';
import { decodeKvBatch, encodeKvBatch } from '../../router/kv-wire.js';
import { WireKvBatch, readKvBatch } from '../../router/kv-wire-batch.js';
import { CachedAgreement, MIN_SAMPLES, tolerance } from '../../server/diagnostics/cached-agreement.js';
import { RankWatch, verdictOf } from '../../server/diagnostics/rank-watch.js';
import { MIN_CHECKED_STORES, MIN_ROUTED, RoutedDigest } from '../../server/diagnostics/routed-digest.js';

const settings = { blockSize: 4, silentAfterMs: 1000, cachedTokensTolerance: 0.1 };
const hasher = new BlockHasher();
const local = (tokens: ArrayLike<number>) => hasher.localHashes(tokens, 4);

function stored(tokens: number[], options: Partial<BlockStored> = {}): BlockStored {
  const blockSize = options.blockSize ?? 4;
  return { type: 'stored', blockHashes: Array.from({ length: tokens.length / blockSize }, (_, i) => BigInt(i + 1)), parentBlockHash: null, tokenIds: tokens, blockSize, loraName: null, medium: 'GPU', ...options };
}
const batch = (events: KvEventBatch['events'], dpRank: number | null = 0): KvEventBatch => ({ ts: 0, events, dpRank });
const causes = (w: RankWatch, now: number) => w.findings(now).map((f) => f.cause);

describe('silent', () => {
  it('holds once a request sent since the last event has waited silent_after_ms, and an event ends it', () => {
    const w = new RankWatch('w', 0, 1, true, settings);
    expect(causes(w, 5000)).toEqual([]);
    w.sent(100);
    w.sent(600);
    expect(causes(w, 1099)).toEqual([]);
    expect(causes(w, 1100)).toEqual(['no_events']);
    expect(verdictOf(w.findings(1100))).toBe('silent');
    w.batch(batch([]), 1200, local);
    expect(causes(w, 9000)).toEqual([]);
  });

  it('never holds for a worker configured without KV events (approximate mode)', () => {
    const w = new RankWatch('w', 0, 1, false, settings);
    w.sent(0);
    expect(causes(w, 60_000)).toEqual([]);
  });
});

describe('block size', () => {
  it('holds while the engine stores blocks of another size, and names both sizes', () => {
    const w = new RankWatch('w', 0, 1, true, settings);
    w.batch(batch([stored([1, 2, 3, 4, 5, 6, 7, 8], { blockSize: 8 })]), 0, local);
    const [f] = w.findings(0);
    expect(f!.cause).toBe('block_size');
    expect(f!.detail).toContain('blocks of 8 tokens');
    expect(f!.detail).toContain('block_size is 4');
    expect(verdictOf(w.findings(0))).toBe('mismatch');
    w.batch(batch([stored([1, 2, 3, 4])]), 1, local);
    expect(causes(w, 1)).toEqual([]);
    expect(w.blockSizeMismatches).toBe(1);
  });
});

describe('unknown rank', () => {
  it('tells a rank published on another rank\'s endpoint from a rank the worker does not have', () => {
    const two = new RankWatch('w', 0, 2, true, settings);
    two.batch(batch([], 1), 0, local);
    expect(two.findings(0)[0]!.detail).toContain('dp_rank 1 arrived on the endpoint of rank 0');
    const one = new RankWatch('w', 0, 1, true, settings);
    one.batch(batch([], 3), 0, local);
    expect(one.findings(0)[0]!.detail).toContain('dp_rank 3 arrived on a worker with ranks 0..0');
  });

  it('after a foreign batch, holds while the last batch was foreign or for silent_after_ms', () => {
    const w = new RankWatch('w', 0, 2, true, settings);
    w.batch(batch([], 1), 0, local);
    w.batch(batch([], 0), 10, local);
    expect(causes(w, 999)).toEqual(['unknown_rank']);
    expect(causes(w, 1000)).toEqual([]);
    w.foreign(5, 2000);
    expect(w.findings(2500)[0]!.detail).toContain('2 batch(es) stamped dp_rank 5 arrived on a worker with ranks 0..1');
  });

  it('does not hold for batches without a dp_rank or with this rank', () => {
    const w = new RankWatch('w', 1, 2, true, settings);
    w.batch(batch([], null), 0, local);
    w.batch(batch([], 1), 0, local);
    expect(causes(w, 0)).toEqual([]);
  });
});

describe('stale', () => {
  it('holds for silent_after_ms after a stale report, and the rank holds no blocks from then', () => {
    const w = new RankWatch('w', 0, 1, true, settings);
    w.batch(batch([stored([1, 2, 3, 4, 5, 6, 7, 8])]), 0, local);
    expect(w.blocksHeld).toBe(2);
    w.stale(100);
    expect(w.blocksHeld).toBe(0);
    expect(causes(w, 1099)).toEqual(['stream_lost']);
    expect(verdictOf(w.findings(1099))).toBe('stale');
    expect(causes(w, 1100)).toEqual([]);
  });
});

describe('blocks held', () => {
  it('adds device stores, takes device removals (never below 0), ignores other tiers, and clears', () => {
    const w = new RankWatch('w', 0, 1, true, settings);
    w.batch(batch([stored(Array.from({ length: 12 }, (_, i) => i)), stored([1, 2, 3, 4], { medium: 'CPU' })]), 0, local);
    expect(w.blocksHeld).toBe(3);
    w.batch(batch([{ type: 'removed', blockHashes: [1n], medium: 'GPU' }, { type: 'removed', blockHashes: [2n, 3n], medium: 'cpu' }]), 1, local);
    expect(w.blocksHeld).toBe(2);
    w.batch(batch([{ type: 'removed', blockHashes: [1n, 2n, 3n, 4n], medium: null }]), 2, local);
    expect(w.blocksHeld).toBe(0);
    w.batch(batch([stored([1, 2, 3, 4]), { type: 'cleared' }]), 3, local);
    expect(w.blocksHeld).toBe(0);
    expect(w.events).toEqual({ stored: 3, removed: 3, cleared: 1 });
  });
});

describe('the routed digest', () => {
  it('calls the tokenizer different only after enough routed requests and unmatched stores', () => {
    const d = new RoutedDigest();
    expect(d.wantsStores).toBe(false);
    for (let i = 0; i < MIN_ROUTED; i++) d.routed(local([i, i, i, i, 7, 7, 7, 7]));
    for (let i = 0; i < MIN_CHECKED_STORES - 1; i++) d.stored(local([100 + i, 0, 0, 0]));
    expect(d.differs).toBe(false);
    d.stored(local([99, 0, 0, 0]));
    expect(d.differs).toBe(true);
  });

  it('is confirmed by one store holding a routed block, and stops checking', () => {
    const d = new RoutedDigest();
    d.routed(local([1, 2, 3, 4, 5, 6, 7, 8]));
    d.stored(local([9, 9, 9, 9, 5, 6, 7, 8]));
    expect(d.confirmed).toBe(true);
    expect(d.wantsStores).toBe(false);
    for (let i = 0; i < 20; i++) d.routed(local([i, 0, 0, 0]));
    expect(d.differs).toBe(false);
  });

  it('through a watch: the stored tokens are hashed at the model block size', () => {
    const w = new RankWatch('w', 0, 1, true, settings);
    for (let i = 0; i < MIN_ROUTED; i++) w.digest.routed(local([i, 1, 2, 3]));
    w.batch(batch([stored([2, 1, 2, 3])]), 0, local);
    expect(w.digest.confirmed).toBe(true);
  });
});

describe('cached-token agreement', () => {
  it('allows one block plus the fraction of the prompt', () => {
    expect(tolerance(100, 16, 0.1)).toBe(26);
    const a = new CachedAgreement(16, 0.1);
    expect(a.add(0, 26, 100)).toBe(false);
    expect(a.add(0, 27, 100)).toBe(true);
  });

  it('differs when most of a window of at least MIN_SAMPLES disagreed, and forgets once the window moves on', () => {
    const a = new CachedAgreement(16, 0);
    for (let i = 0; i < MIN_SAMPLES - 1; i++) a.add(0, 500, 1000);
    expect(a.differs).toBe(false);
    a.add(0, 500, 1000);
    expect(a.differs).toBe(true);
    for (let i = 0; i < 32; i++) a.add(500, 500, 1000);
    expect(a.differs).toBe(false);
    expect(a.disagreements).toBe(MIN_SAMPLES);
    expect(a.samples).toBe(MIN_SAMPLES + 32);
  });
});

describe('verdictOf', () => {
  it('takes the worst cause: mismatch over silent over stale', () => {
    expect(verdictOf([])).toBe('ok');
    expect(verdictOf([{ cause: 'stream_lost', detail: '' }, { cause: 'no_events', detail: '' }])).toBe('silent');
    expect(verdictOf([{ cause: 'no_events', detail: '' }, { cause: 'tokenizer', detail: '' }])).toBe('mismatch');
  });
});

describe('batches the core scanned', () => {
  // Batches of 300 runs read from their summary alone: 703-834 over 50 fc.sample seeds.
  const SUMMARIZED_FLOOR = 200;
  // Device-tier events only (the layout the core reads), stores of the model's block size (4) or another.
  const event: fc.Arbitrary<KvEvent> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ blocks: fc.integer({ min: 1, max: 3 }), size: fc.constantFrom(4, 4, 8), medium: fc.constantFrom(null, 'GPU'), seed: fc.nat(50) }).map(({ blocks, size, medium, seed }) => stored(Array.from({ length: blocks * size }, (_, i) => seed + i), { blockSize: size, medium })) },
    { weight: 3, arbitrary: fc.record({ n: fc.nat(4), medium: fc.constantFrom(null, 'GPU') }).map(({ n, medium }): KvEvent => ({ type: 'removed', blockHashes: Array.from({ length: n }, (_, i) => BigInt(i + 1)), medium })) },
    { weight: 1, arbitrary: fc.constant<KvEvent>({ type: 'cleared' }) },
  );
  const stream = fc.array(fc.record({ events: fc.array(event, { maxLength: 5 }), form: fc.constantFrom<'array' | 'map'>('array', 'map'), routed: fc.boolean() }), { maxLength: 12 });
  const state = (w: RankWatch) => ({ events: { ...w.events }, batches: w.batches, held: w.blocksHeld, mismatches: w.blockSizeMismatches, digest: w.digest.evidence, confirmed: w.digest.confirmed, findings: w.findings(100) });

  it('counts blocks, block sizes and tokenizer evidence from the summary as from the decoded events', () => {
    let summarized = 0;
    fc.assert(
      fc.property(stream, (batches) => {
        const decoded = new RankWatch('w', 0, 1, true, settings);
        const scanned = new RankWatch('w', 0, 1, true, settings);
        for (const { events, form, routed } of batches) {
          // A routed prompt of tokens some stores hold: the digest wants stores until one matches.
          if (routed) for (const w of [decoded, scanned]) w.digest.routed(local(Array.from({ length: 8 }, (_, i) => 3 + i)));
          const payload = encodeKvBatch({ ts: 1, dpRank: 0, events }, form);
          const wire = readKvBatch(payload);
          expect(wire).toBeInstanceOf(WireKvBatch);
          let read = false;
          Object.defineProperty(wire, 'events', { get: () => ((read = true), decodeKvBatch(payload).events) });
          decoded.batch(decodeKvBatch(payload), 0, local);
          scanned.batch(wire, 0, local);
          if (!read) summarized++;
          expect(state(scanned)).toEqual(state(decoded));
        }
      }),
      { numRuns: 300 },
    );
    // Both paths were compared, not only the decoding one.
    expect(summarized).toBeGreaterThan(SUMMARIZED_FLOOR);
  });

  it('decodes a scanned batch only for the digest or for stores of several block sizes', () => {
    const decodes = (w: RankWatch, events: KvEvent[]) => {
      const payload = encodeKvBatch({ ts: 1, dpRank: 0, events }, 'array');
      const wire = readKvBatch(payload);
      let read = false;
      Object.defineProperty(wire, 'events', { get: () => ((read = true), decodeKvBatch(payload).events) });
      w.batch(wire, 0, local);
      return read;
    };
    const w = new RankWatch('w', 0, 1, true, settings);
    // Nothing routed yet: the digest wants no stores, and the summary has every count.
    expect(decodes(w, [stored([1, 2, 3, 4, 5, 6, 7, 8]), { type: 'removed', blockHashes: [9n], medium: 'GPU' }])).toBe(false);
    expect(decodes(w, [stored([1, 2, 3, 4, 5, 6, 7, 8], { blockSize: 8 }), { type: 'cleared' }, stored([1, 2, 3, 4, 5, 6, 7, 8], { blockSize: 8 })])).toBe(false);
    expect({ events: w.events, held: w.blocksHeld, mismatches: w.blockSizeMismatches }).toEqual({ events: { stored: 3, removed: 1, cleared: 1 }, held: 1, mismatches: 2 });
    expect(causes(w, 0)).toEqual(['block_size']);
    // Stores of two sizes count one by one.
    expect(decodes(w, [stored([1, 2, 3, 4]), stored([1, 2, 3, 4, 5, 6, 7, 8], { blockSize: 8 })])).toBe(true);
    // Once a prompt was routed, stores of the model's block size are checked against it; other sizes are not.
    w.digest.routed(local([1, 2, 3, 4]));
    expect(decodes(w, [stored([1, 2, 3, 4, 5, 6, 7, 8], { blockSize: 8 })])).toBe(false);
    expect(decodes(w, [stored([5, 6, 7, 8])])).toBe(true);
    expect(decodes(w, [stored([1, 2, 3, 4])])).toBe(true);
    expect(w.digest.confirmed).toBe(true);
    // Confirmed: nothing more to check.
    expect(decodes(w, [stored([9, 9, 9, 9])])).toBe(false);
    expect(w.blockSizeMismatches).toBe(4);
  });
});
