// The wire path (router/kv-wire-batch.ts, assembly/kv-wire.ts) against the JS
// decoder: every payload reads the same (or is rejected with the same error),
// and a stream of batches leaves the same index, counters and failures
// whether the core applies them from their bytes or the model fleet from
// their decoded events, including when the core runs out of memory or traps
// in the middle of a batch.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WireReader, heldAfter } from '../../bindings/kv-wire-reader.js';
import { DEFAULT_SEED, BlockHasher as ReferenceBlockHasher } from '../../bindings/reference/block-hasher.js';
import { IndexFailure } from '../../bindings/prefix-index-api.js';
import { PrefixIndex } from '../../bindings/prefix-index.js';
import type { WorkerKey } from '../../bindings/workers.js';
import { VirtualClock } from '../../router/clock.js';
import type { KvEvent, KvEventBatch } from '../../router/kv-events.js';
import { decodeKvBatch, encodeKvBatch } from '../../router/kv-wire.js';
import { WireKvBatch, countEventTypes, readKvBatch } from '../../router/kv-wire-batch.js';
import { ModelFleet } from '../../router/model-fleet.js';
import { WIDE_POOLS, batchOf, damaged, pack, type Pools } from './kv-wire-batch.arbitraries.js';
import { kvBatch } from './kv-wire.arbitraries.js';

const BS = 4;

type Read = { batch: { ts: number; events: KvEvent[]; dpRank: number | null }; unknown: number } | { error: string };

function readWith(decode: (payload: Uint8Array, options: { onUnknownEvent: () => void }) => KvEventBatch, payload: Uint8Array): Read {
  let unknown = 0;
  try {
    const b = decode(payload, { onUnknownEvent: () => unknown++ });
    return { batch: { ts: b.ts, events: b.events, dpRank: b.dpRank }, unknown };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

const reader = new WireReader();
const hasher = new ReferenceBlockHasher();

type Parsed =
  | { type: 'stored'; parent: bigint | null; blockSize: number; external: bigint[]; local: bigint[] }
  | { type: 'removed'; external: bigint[] }
  | { type: 'cleared' };

/** Reads a parsed batch (the record layout in assembly/kv-wire.ts) back into values. */
function readParsed(bytes: Uint8Array): { seed: bigint; events: Parsed[] } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u64s = (at: number, n: number) => Array.from({ length: n }, (_, i) => view.getBigUint64(at + 8 * i, true));
  const events: Parsed[] = [];
  let at = 8;
  while (at < bytes.length) {
    const kind = view.getUint32(at, true);
    const n = view.getUint32(at + 4, true);
    if (kind === 1) {
      const parent = view.getUint32(at + 8, true) ? view.getBigUint64(at + 16, true) : null;
      events.push({ type: 'stored', parent, blockSize: view.getUint32(at + 12, true), external: u64s(at + 24, n), local: u64s(at + 24 + 8 * n, n) });
      at += 24 + 16 * n;
    } else if (kind === 2) {
      events.push({ type: 'removed', external: u64s(at + 8, n) });
      at += 8 + 8 * n;
    } else {
      expect(kind).toBe(3);
      events.push({ type: 'cleared' });
      at += 8;
    }
  }
  expect(at).toBe(bytes.length);
  return { seed: view.getBigUint64(0, true), events };
}

/** The decoded events as the scan must have parsed them: tokens hashed by the pure-TS hasher at the event's block size. */
function expectedParse(events: KvEvent[]): Parsed[] {
  return events.map((e): Parsed => {
    if (e.type === 'cleared') return { type: 'cleared' };
    if (e.type === 'removed') return { type: 'removed', external: [...e.blockHashes] };
    return { type: 'stored', parent: e.parentBlockHash, blockSize: e.blockSize, external: [...e.blockHashes], local: [...hasher.localHashes(e.tokenIds, e.blockSize, DEFAULT_SEED)] };
  });
}

/** Device blocks held after the events, `before` held before them, counted event by event. */
function heldBy(events: KvEvent[], before: number): number {
  let held = before;
  for (const e of events) {
    if (e.type === 'cleared') held = 0;
    else if (e.type === 'removed') held = Math.max(0, held - e.blockHashes.length);
    else held += e.blockHashes.length;
  }
  return held;
}

/** The summary's counts of the decoded events (every one of the device tier, as the scan accepts only those). */
function expectedSummary(events: KvEvent[]) {
  const counts = { stored: 0, removed: 0, cleared: 0 };
  for (const event of events) counts[event.type]++;
  const stores = events.filter((e) => e.type === 'stored');
  // The delta counts from the last clear on.
  let delta = 0;
  for (const e of events) {
    if (e.type === 'cleared') delta = 0;
    else delta += e.type === 'stored' ? e.blockHashes.length : -e.blockHashes.length;
  }
  return {
    ...counts,
    heldFloor: heldBy(events, 0),
    heldDelta: delta,
    lastBlockSize: stores.at(-1)?.blockSize ?? 0,
    mixedBlockSizes: stores.filter((e) => e.blockSize !== stores[0]!.blockSize).length,
    storedBlocks: stores.reduce((sum, e) => sum + e.blockHashes.length, 0),
  };
}

/**
 * readKvBatch reads the payload as decodeKvBatch does, and the scan accepts
 * only what the decoder accepts, with the same summary and a parse of the
 * same events.
 */
function checkRead(payload: Uint8Array): boolean {
  const js = readWith(decodeKvBatch, payload);
  const wire = readWith(readKvBatch, payload);
  expect(wire).toEqual(js);
  const scanned = reader.scan(payload);
  if (scanned === null) return false;
  if ('error' in js) throw new Error(`the scan accepted a payload the decoder rejects (${js.error})`);
  expect(js.unknown).toBe(0);
  expect(scanned.summary).toEqual({ ts: js.batch.ts, dpRank: js.batch.dpRank, ...expectedSummary(js.batch.events) });
  for (const before of [0, 1, 7, 1000]) expect(heldAfter(scanned.summary, before)).toBe(heldBy(js.batch.events, before));
  expect(readParsed(reader.parsed(payload, scanned.ticket)!)).toEqual({ seed: DEFAULT_SEED, events: expectedParse(js.batch.events) });
  return true;
}

describe('readKvBatch against decodeKvBatch', () => {
  it('reads every payload of both layouts and their near misses as the JS decoder does', () => {
    const scanned = { positional: 0, named: 0 };
    let runs = 0;
    fc.assert(
      fc.property(batchOf(WIDE_POOLS, BS), (wire) => {
        runs++;
        if (checkRead(pack(wire))) scanned[Array.isArray(wire) ? 'positional' : 'named']++;
      }),
      { numRuns: 800 },
    );
    // Every kind was exercised: batches the core reads in each layout, and batches left to JS.
    // Over 60 seeds the core read 62–110 positional and 39–76 named batches of 800, so a
    // floor of 1 in 80 is never missed by chance yet fails if either layout stops being read.
    expect(scanned.positional).toBeGreaterThan(runs / 80);
    expect(scanned.named).toBeGreaterThan(runs / 80);
    expect(scanned.positional + scanned.named).toBeLessThan(runs);
  });

  it('rejects cut, changed and overlong payloads exactly as the JS decoder does', () => {
    fc.assert(
      fc.property(batchOf(WIDE_POOLS, BS).chain((wire) => damaged(pack(wire))), (payload) => {
        checkRead(payload);
      }),
      { numRuns: 600 },
    );
  });

  it('reads what the project encoder writes in both layouts as the JS decoder does', () => {
    fc.assert(
      fc.property(kvBatch, fc.constantFrom('array' as const, 'map' as const), (batch, form) => {
        checkRead(encodeKvBatch(batch, form));
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a store whose token list claims more tokens than its bytes hold, and reads the next batches as before', () => {
    // [1, [["BlockStored", [5], nil, <2^30 tokens claimed, 20,000 present>]]]: a block of 2^30
    // tokens would want a scratch block of 4 GiB, which a wasm32 size cannot even say.
    const head = [0x92, 0x01, 0x91, 0x97, 0xab, ...new TextEncoder().encode('BlockStored'), 0x91, 0x05, 0xc0, 0xdd, 0x40, 0x00, 0x00, 0x00];
    const claimed = new Uint8Array([...head, ...new Array<number>(20_000).fill(0x01)]);
    expect(checkRead(claimed)).toBe(false);
    expect(readWith(readKvBatch, claimed)).toHaveProperty('error');
    // Batches after it, one large enough to make the core's buffers grow, read as the decoder reads them.
    const blocks = 3000;
    const large = encodeKvBatch(
      {
        ts: 2,
        dpRank: null,
        events: [{ type: 'stored', blockHashes: Array.from({ length: blocks }, (_, i) => BigInt(i + 1)), parentBlockHash: null, tokenIds: Array.from({ length: blocks * BS }, (_, i) => i), blockSize: BS, loraName: null, medium: 'GPU' }],
      },
      'array',
    );
    expect(checkRead(large)).toBe(true);
    fc.assert(
      fc.property(batchOf(WIDE_POOLS, BS), (wire) => {
        checkRead(pack(wire));
      }),
      { numRuns: 100 },
    );
  });

  it('keeps the bytes of a batch it read in the core, and counts its events without decoding them', () => {
    const payload = encodeKvBatch(
      {
        ts: 5,
        dpRank: 2,
        events: [
          { type: 'stored', blockHashes: [1n, 2n], parentBlockHash: null, tokenIds: [1, 2, 3, 4, 5, 6, 7, 8], blockSize: 4, loraName: null, medium: 'GPU' },
          { type: 'removed', blockHashes: [2n], medium: null },
          { type: 'cleared' },
        ],
      },
      'array',
    );
    const batch = readKvBatch(payload);
    expect(batch).toBeInstanceOf(WireKvBatch);
    expect((batch as WireKvBatch).payload).toBe(payload);
    const counts = { stored: 0, removed: 0, cleared: 0 };
    countEventTypes(batch, counts);
    expect(counts).toEqual({ stored: 1, removed: 1, cleared: 1 });
    // A layout the core does not read (an adapter) is decoded at once.
    const adapter = encodeKvBatch({ ts: 5, dpRank: null, events: [{ type: 'stored', blockHashes: [1n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: 4, loraName: 'sql', medium: 'GPU' }] }, 'array');
    expect(readKvBatch(adapter)).not.toBeInstanceOf(WireKvBatch);
  });
});

// ---- the index -------------------------------------------------------------------

const WORKERS: WorkerKey[] = [0, 1, 2].map((i) => ({ id: `w${i}`, rank: 0 }));

/** Small pools: stores chain to earlier ones, removals find what was stored, workers share blocks. */
const CHAIN_POOLS: Pools = {
  hashes: fc.bigInt({ min: 1n, max: 24n }),
  tokens: fc.bigInt({ min: 0n, max: 5n }),
};

interface CoreHooks {
  coreFailAllocation(after: number, trap: boolean): void;
}

function fleet(): ModelFleet {
  const f = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 3 });
  for (const w of WORKERS) f.addWorker({ id: w.id, totalBlocks: 1000, maxBatchedTokens: 8192 });
  return f;
}

/** Everything the two fleets must agree on. */
function state(f: ModelFleet) {
  const { liveBytes: _live, indexBytes: _held, ...stats } = f.indexStats();
  const dump = f.index
    .dump()
    .map((e) => JSON.stringify(e, (_, v) => (typeof v === 'bigint' ? v.toString() : v)))
    .sort();
  return { stats, dump, counts: WORKERS.map((w) => f.eventCounts(w.id)) };
}

function outcome(result: IndexFailure | null) {
  return result === null ? null : { kind: result.kind, workers: result.workers, message: result.message };
}

const step = fc.record({
  worker: fc.nat(WORKERS.length - 1),
  batch: batchOf(CHAIN_POOLS, BS, 3),
  // Now and then the core fails an allocation (or traps) after a few.
  fail: fc.option(fc.record({ after: fc.nat(6), trap: fc.boolean() }), { nil: null, freq: 6 }),
});

describe('the wire path against the JS path, on the index', () => {
  it('leaves the same index, counters and failures on random streams, allocation failures and traps included', () => {
    let wired = 0;
    let failed = 0;
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 25 }), (steps) => {
        const viaWire = fleet();
        const viaJs = fleet();
        for (const s of steps) {
          const payload = pack(s.batch);
          let js: KvEventBatch;
          try {
            js = decodeKvBatch(payload);
          } catch {
            continue; // rejected by both readers (checked above): never applied
          }
          const wire = readKvBatch(payload);
          if (wire instanceof WireKvBatch) wired++;
          if (s.fail) {
            for (const f of [viaWire, viaJs]) f.core!.kernel<CoreHooks>().coreFailAllocation(s.fail.after, s.fail.trap);
          }
          const a = viaWire.applyEvents(WORKERS[s.worker]!, wire);
          const b = viaJs.applyEvents(WORKERS[s.worker]!, js);
          for (const f of [viaWire, viaJs]) f.core!.kernel<CoreHooks>().coreFailAllocation(-1, false);
          if (b) failed++;
          expect(outcome(a)).toEqual(outcome(b));
          expect(state(viaWire)).toEqual(state(viaJs));
        }
      }),
      { numRuns: 150 },
    );
    expect(wired).toBeGreaterThan(100);
    // A failure is injected into most steps, but it only takes effect in a step whose batch makes the
    // core allocate (a pool growing): about 10 a run, so any run that saw none has lost its coverage.
    expect(failed).toBeGreaterThan(0);
  });

  it('applies a batch read before others (held for a replay) as the decoded events would: its payload is parsed again', () => {
    let late = 0;
    fc.assert(
      fc.property(
        fc.array(fc.record({ worker: fc.nat(WORKERS.length - 1), batch: batchOf(CHAIN_POOLS, BS, 3), lag: fc.nat(3) }), { minLength: 1, maxLength: 20 }),
        (steps) => {
          const viaWire = fleet();
          const viaJs = fleet();
          // Batches are read as they arrive and applied in order, each up to `lag` reads later.
          const pending: { worker: WorkerKey; wire: KvEventBatch; js: KvEventBatch; due: number }[] = [];
          const applyDue = (now: number) => {
            while (pending.length > 0 && pending[0]!.due <= now) {
              const p = pending.shift()!;
              expect(outcome(viaWire.applyEvents(p.worker, p.wire))).toEqual(outcome(viaJs.applyEvents(p.worker, p.js)));
              expect(state(viaWire)).toEqual(state(viaJs));
            }
          };
          for (const [i, s] of steps.entries()) {
            const payload = pack(s.batch);
            let js: KvEventBatch;
            try {
              js = decodeKvBatch(payload);
            } catch {
              continue;
            }
            const wire = readKvBatch(payload);
            if (wire instanceof WireKvBatch && s.lag > 0) late++;
            pending.push({ worker: WORKERS[s.worker]!, wire, js, due: Math.max(i + s.lag, pending.at(-1)?.due ?? 0) });
            applyDue(i);
          }
          applyDue(Infinity);
        },
      ),
      { numRuns: 150 },
    );
    // Wire batches applied after a later read: 154–183 a run over 6 seeds; the floor
    // only catches a run where none were held.
    expect(late).toBeGreaterThan(20);
  });

  it('applies a batch from its events when the core has no memory to parse it again', () => {
    // The scan core's buffers come from the allocator without the test hook: a reader that
    // finds no memory for a second parse stands in for one that ran out.
    class ExhaustedReader extends WireReader {
      override parsed(): Uint8Array | null {
        return null;
      }
    }
    const exhausted = new ExhaustedReader();
    const viaWire = fleet();
    const viaJs = fleet();
    const tokens = Array.from({ length: 8 }, (_, i) => 7 + i);
    const payload = encodeKvBatch({ ts: 1, dpRank: null, events: [{ type: 'stored', blockHashes: [5n, 6n], parentBlockHash: null, tokenIds: tokens, blockSize: BS, loraName: null, medium: 'GPU' }] }, 'array');
    const batch = new WireKvBatch(payload, exhausted.scan(payload)!, exhausted);
    expect(viaWire.applyEvents(WORKERS[0]!, batch)).toBeNull();
    expect(viaJs.applyEvents(WORKERS[0]!, decodeKvBatch(payload))).toBeNull();
    expect(state(viaWire)).toEqual(state(viaJs));
    expect(viaWire.indexStats().blocks).toBe(2);
  });

  it('applies nothing from a batch hashed under another seed, and refuses bytes that are not a parsed batch', () => {
    const index = new PrefixIndex();
    const payload = encodeKvBatch({ ts: 1, dpRank: null, events: [{ type: 'stored', blockHashes: [5n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: BS, loraName: null, medium: 'GPU' }] }, 'array');
    const parsed = reader.parsed(payload, reader.scan(payload)!.ticket)!.slice();
    const slot = index.workers.ensure('w0', 0);
    expect(index.applyWire(slot, parsed, BS, DEFAULT_SEED + 1n)).toBeNull();
    expect(index.stats().blocks).toBe(0);
    // A record cut short: its hashes run past the bytes given.
    expect(() => index.applyWire(slot, parsed.subarray(0, parsed.length - 8), BS, DEFAULT_SEED)).toThrow(/not a batch WireReader.scan parsed/);
    expect(index.stats().blocks).toBe(0);
    expect(index.applyWire(slot, parsed, BS, DEFAULT_SEED)).toEqual({ tally: expect.objectContaining({ stored: 1 }), failure: null });
    expect(index.stats().blocks).toBe(1);
  });

  it.each(['array', 'map'] as const)('applies stores, parents, removals and clears from the bytes as the decoded events would (%s layout)', (form) => {
    const viaWire = fleet();
    const viaJs = fleet();
    const tokens = Array.from({ length: 12 }, (_, i) => 100_000 + i);
    const batches: KvEventBatch[] = [
      { ts: 1, dpRank: null, events: [{ type: 'stored', blockHashes: [10n, 11n], parentBlockHash: null, tokenIds: tokens.slice(0, 8), blockSize: BS, loraName: null, medium: 'GPU' }] },
      // Chained to 11; an unknown parent is skipped; another block size is not indexed.
      {
        ts: 2,
        dpRank: null,
        events: [
          { type: 'stored', blockHashes: [12n], parentBlockHash: 11n, tokenIds: tokens.slice(8), blockSize: BS, loraName: null, medium: null },
          { type: 'stored', blockHashes: [13n], parentBlockHash: 77n, tokenIds: tokens.slice(0, 4), blockSize: BS, loraName: null, medium: 'GPU' },
          { type: 'stored', blockHashes: [14n], parentBlockHash: null, tokenIds: tokens.slice(0, 8), blockSize: 8, loraName: null, medium: 'GPU' },
        ],
      },
      { ts: 3, dpRank: null, events: [{ type: 'removed', blockHashes: [12n, 55n], medium: 'GPU' }] },
    ];
    for (const batch of batches) {
      const payload = encodeKvBatch(batch, form);
      const wire = readKvBatch(payload);
      expect(wire).toBeInstanceOf(WireKvBatch);
      expect(viaWire.applyEvents(WORKERS[1]!, wire)).toBeNull();
      expect(viaJs.applyEvents(WORKERS[1]!, decodeKvBatch(payload))).toBeNull();
      expect(state(viaWire)).toEqual(state(viaJs));
    }
    expect(viaWire.eventCounts('w1')).toMatchObject({ stored: 2, skippedStores: 1, blockSizeMismatches: 1, removed: 1 });
    expect(viaWire.indexStats()).toMatchObject({ blocks: 2, unknownParents: 1, unknownRemovals: 1 });
    const clear = encodeKvBatch({ ts: 4, dpRank: null, events: [{ type: 'cleared' }] }, form);
    expect(viaWire.applyEvents(WORKERS[1]!, readKvBatch(clear))).toBeNull();
    expect(viaWire.indexStats().blocks).toBe(0);
    expect(viaWire.eventCounts('w1')).toMatchObject({ cleared: 1 });
  });
});
