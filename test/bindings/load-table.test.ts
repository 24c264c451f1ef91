import { describe, expect, it } from 'vitest';
import { Core } from '../../bindings/core.js';
import { LoadTable } from '../../bindings/load-table.js';
import { addFleet, chain, IMPLS, makeLedger, snapshot } from './load-table.fixtures.js';

describe.each(IMPLS)('LoadTable rules (%s)', (impl) => {
  it('add books the uncached prompt tokens, the distinct sequence hashes and one active request', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2);
    ledger.add('r1', a!, chain(1, 4), 100, 0);
    const c = ledger.columns;
    expect(c.activePrefillTokens[a!]).toBe(100);
    expect(c.activeDecodeBlocks[a!]).toBe(4);
    expect(c.activeRequests[a!]).toBe(1);
    expect([c.activePrefillTokens[b!], c.activeDecodeBlocks[b!], c.activeRequests[b!]]).toEqual([0, 0, 0]);
    expect(ledger.liveRequests).toBe(1);
    expect(ledger.has('r1')).toBe(true);
  });

  it('prefillComplete releases exactly that request\'s prefill tokens and is idempotent', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, chain(1, 2), 100, 0);
    ledger.add('r2', a!, chain(2, 2), 30, 0);
    expect(ledger.prefillComplete('r1')).toBe(true);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(30);
    expect(ledger.prefillComplete('r1')).toBe(true);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(30);
    // decode load stays until the request is freed
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(4);
    expect(ledger.columns.activeRequests[a!]).toBe(2);
  });

  it('prefillProgress takes computed tokens off a request in prefill, never more than it has left', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2);
    ledger.add('r1', a!, chain(1, 2), 100, 0);
    ledger.add('r2', a!, chain(2, 2), 30, 0);
    ledger.add('r3', b!, chain(3, 2), 40, 0);
    expect(ledger.prefillProgress('r1', 64)).toBe(64);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(66);
    expect(ledger.prefillProgress('r1', 64)).toBe(36);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(30);
    expect(ledger.prefillProgress('r1', 64)).toBe(0);
    expect(ledger.columns.activePrefillTokens[b!]).toBe(40);
    // its first token releases only what was left; past it nothing is taken
    ledger.prefillProgress('r2', 10);
    expect(ledger.prefillComplete('r2')).toBe(true);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(0);
    expect(ledger.prefillProgress('r2', 5)).toBe(0);
    expect(ledger.prefillProgress('nope', 5)).toBe(0);
    // freeing a request part-way through releases the rest
    ledger.prefillProgress('r3', 15);
    expect(ledger.columns.activePrefillTokens[b!]).toBe(25);
    ledger.free('r3');
    expect(ledger.columns.activePrefillTokens[b!]).toBe(0);
    expect(ledger.columns.activeRequests[a!]).toBe(2);
    expect(() => ledger.prefillProgress('r1', -1)).toThrow(/tokens must be an integer/);
    expect(() => ledger.prefillProgress('r1', 1, 0.5)).toThrow(/keep must be an integer/);
  });

  it('prefillProgress leaves a request at least `keep` tokens, or what it has when less', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, chain(1, 2), 100, 0);
    ledger.add('r2', a!, chain(2, 2), 30, 0);
    expect(ledger.prefillProgress('r1', 64, 50)).toBe(50);
    expect(ledger.prefillProgress('r1', 64, 50)).toBe(0);
    expect(ledger.prefillProgress('r2', 64, 50)).toBe(0);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(80);
    expect(ledger.prefillProgress('r1', 10, 20)).toBe(10);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(70);
  });

  it('free releases everything the request holds and is idempotent', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, chain(1, 3), 50, 0);
    ledger.add('r2', a!, chain(2, 2), 20, 0);
    expect(ledger.free('r1')).toBe(true);
    const after = snapshot(ledger);
    expect(after.activePrefillTokens![a!]).toBe(20);
    expect(after.activeDecodeBlocks![a!]).toBe(2);
    expect(after.activeRequests![a!]).toBe(1);
    expect(ledger.free('r1')).toBe(false);
    expect(snapshot(ledger)).toEqual(after);
    expect(ledger.has('r1')).toBe(false);
  });

  it('an unknown request id is a no-op for prefillComplete and free', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, chain(1, 3), 50, 0);
    const before = snapshot(ledger);
    expect(ledger.prefillComplete('nope')).toBe(false);
    expect(ledger.free('nope')).toBe(false);
    expect(snapshot(ledger)).toEqual(before);
  });

  it('a duplicate add is an error naming the request id, and books nothing', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2);
    ledger.add('req-7', a!, chain(1, 3), 50, 0);
    const before = snapshot(ledger);
    expect(() => ledger.add('req-7', b!, chain(2, 3), 10, 1)).toThrow(/"req-7"/);
    expect(snapshot(ledger)).toEqual(before);
  });

  it('a freed id can be booked again', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2);
    ledger.add('r1', a!, chain(1, 3), 50, 0);
    ledger.free('r1');
    ledger.add('r1', b!, chain(1, 2), 5, 1);
    expect(ledger.columns.activeRequests[b!]).toBe(1);
    expect(ledger.columns.activeRequests[a!]).toBe(0);
  });

  it('decode blocks count distinct sequence hashes: a shared prefix counts once', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2);
    const shared = chain(1, 3);
    ledger.add('r1', a!, [...shared, 100n, 101n], 0, 0);
    ledger.add('r2', a!, [...shared, 200n], 0, 0);
    // the same prefix on another worker is that worker's own load
    ledger.add('r3', b!, shared, 0, 0);
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(6);
    expect(ledger.columns.activeDecodeBlocks[b!]).toBe(3);
    ledger.free('r1');
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(4);
    ledger.free('r2');
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(0);
    expect(ledger.columns.activeDecodeBlocks[b!]).toBe(3);
  });

  it('a hash repeated inside one request is held until that request is freed', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, [7n, 7n, 8n], 0, 0);
    ledger.add('r2', a!, [7n], 0, 0);
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(2);
    ledger.free('r2');
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(2);
    ledger.free('r1');
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(0);
  });

  it('sweep drops requests older than the bound (300 s by default) and returns their ids', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('old', a!, chain(1, 2), 10, 0);
    ledger.add('edge', a!, chain(2, 2), 20, 1);
    ledger.add('young', a!, chain(3, 2), 40, 200_000);
    expect(ledger.sweep(300_001)).toEqual(['old']);
    expect(ledger.has('old')).toBe(false);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(60);
    expect(ledger.columns.activeDecodeBlocks[a!]).toBe(4);
    // an age equal to the bound is not older than it
    expect(ledger.sweep(300_001)).toEqual([]);
    expect(ledger.sweep(200_010, 10).sort()).toEqual(['edge']);
    expect(ledger.sweep(200_011, 10)).toEqual(['young']);
    expect(ledger.liveRequests).toBe(0);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(0);
  });

  it('projection: potential prefill = active prefill + max(prompt - overlap x block size, 0)', () => {
    const ledger = makeLedger(impl);
    const [a, b, c] = addFleet(ledger, 3);
    ledger.add('r1', a!, [], 100, 0);
    ledger.project({ seqHashes: [], promptTokens: 70, blockSize: 16, overlaps: { slots: [a!, b!, c!], depths: [2, 4, 9] } });
    const p = ledger.projection;
    expect(Array.from(p.overlapBlocks)).toEqual([2, 4, 9]);
    expect(Array.from(p.potentialPrefillTokens)).toEqual([100 + 70 - 32, 70 - 64, 0]);
  });

  it('projection: the deepest overlap per slot counts, and slots outside the table are ignored', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2);
    ledger.project({ seqHashes: [], promptTokens: 64, blockSize: 16, overlaps: { slots: [b!, 99, b!, a!], depths: [1, 7, 3, 0] } });
    expect(Array.from(ledger.projection.overlapBlocks)).toEqual([0, 3]);
    // a projection without overlaps clears the previous one
    ledger.project({ seqHashes: [], promptTokens: 64, blockSize: 16 });
    expect(Array.from(ledger.projection.overlapBlocks)).toEqual([0, 0]);
  });

  it('projection: potential decode = active decode + prompt blocks the worker does not hold active', () => {
    const ledger = makeLedger(impl);
    const [a, b, c] = addFleet(ledger, 3);
    const prompt = chain(1, 5);
    ledger.add('r1', a!, prompt.slice(0, 3), 0, 0); // holds 3 of the prompt
    ledger.add('r2', b!, [...chain(2, 4)], 0, 0); // holds none of it
    ledger.add('r3', c!, [...prompt, 9n], 0, 0); // holds all 5
    ledger.project({ seqHashes: prompt, promptTokens: 80, blockSize: 16 });
    expect(Array.from(ledger.projection.potentialDecodeBlocks)).toEqual([3 + 2, 4 + 5, 6 + 0]);
    // a freed request no longer counts as holding the prompt
    ledger.free('r3');
    ledger.project({ seqHashes: prompt, promptTokens: 80, blockSize: 16 });
    expect(ledger.projection.potentialDecodeBlocks[c!]).toBe(5);
  });

  it('a projection forgets the workers the previous one touched (cached prefix and held hashes)', () => {
    const ledger = makeLedger(impl);
    const [a, b, c] = addFleet(ledger, 3);
    const prompt = chain(1, 4);
    ledger.add('r1', a!, prompt, 0, 0);
    ledger.add('r2', b!, prompt.slice(0, 2), 0, 0);
    ledger.project({ seqHashes: prompt, promptTokens: 64, blockSize: 16, overlaps: { slots: [c!], depths: [3] } });
    expect(Array.from(ledger.projection.potentialDecodeBlocks)).toEqual([4, 2 + 2, 4]);
    expect(Array.from(ledger.projection.overlapBlocks)).toEqual([0, 0, 3]);
    ledger.project({ seqHashes: chain(2, 4), promptTokens: 64, blockSize: 16, overlaps: { slots: [b!], depths: [1] } });
    expect(Array.from(ledger.projection.potentialDecodeBlocks)).toEqual([4 + 4, 2 + 4, 4]);
    expect(Array.from(ledger.projection.overlapBlocks)).toEqual([0, 1, 0]);
    expect(Array.from(ledger.projection.potentialPrefillTokens)).toEqual([64, 48, 64]);
  });

  it('projection matches the load the request would book there', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    ledger.add('r1', a!, chain(1, 4), 30, 0);
    const prompt = [...chain(1, 2), ...chain(3, 3)];
    ledger.project({ seqHashes: prompt, promptTokens: 80, blockSize: 16, overlaps: { slots: [a!], depths: [2] } });
    const potential = [ledger.projection.potentialPrefillTokens[a!], ledger.projection.potentialDecodeBlocks[a!]];
    ledger.add('r2', a!, prompt, 80 - 2 * 16, 1);
    expect([ledger.columns.activePrefillTokens[a!], ledger.columns.activeDecodeBlocks[a!]]).toEqual(potential);
  });

  it('the projection goes stale when load changes and current again after project', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    expect(ledger.projected).toBeUndefined();
    ledger.project({ seqHashes: [], promptTokens: 10, blockSize: 4 });
    expect(ledger.projected).toEqual({ promptTokens: 10, blockSize: 4 });
    ledger.add('r1', a!, [], 5, 0);
    expect(ledger.projected).toBeUndefined();
    ledger.project({ seqHashes: [], promptTokens: 12, blockSize: 4 });
    expect(ledger.projected).toEqual({ promptTokens: 12, blockSize: 4 });
  });

  it('worker lifecycle: capacity, availability, and removal dropping its requests\' load', () => {
    const ledger = makeLedger(impl);
    const [a, b] = addFleet(ledger, 2, 500, 4096);
    const c = ledger.columns;
    expect([c.present[a!], c.available[a!], c.totalBlocks[a!], c.maxBatchedTokens[a!]]).toEqual([1, 1, 500, 4096]);
    ledger.setAvailable(a!, false);
    expect(ledger.columns.available[a!]).toBe(0);
    // a capacity update keeps availability
    ledger.setWorker(a!, { totalBlocks: 600, maxBatchedTokens: 2048 });
    expect([ledger.columns.available[a!], ledger.columns.totalBlocks[a!], ledger.columns.maxBatchedTokens[a!]]).toEqual([0, 600, 2048]);
    ledger.setAvailable(a!, true);
    ledger.add('r1', a!, chain(1, 3), 10, 0);
    ledger.add('r2', a!, chain(1, 4), 20, 0);
    ledger.add('r3', b!, chain(1, 4), 40, 0);
    expect(ledger.removeWorker(a!).sort()).toEqual(['r1', 'r2']);
    const after = ledger.columns;
    expect([after.present[a!], after.available[a!], after.totalBlocks[a!]]).toEqual([0, 0, 0]);
    expect([after.activePrefillTokens[a!], after.activeDecodeBlocks[a!], after.activeRequests[a!]]).toEqual([0, 0, 0]);
    expect([after.activePrefillTokens[b!], after.activeDecodeBlocks[b!], after.activeRequests[b!]]).toEqual([40, 4, 1]);
    expect(ledger.has('r1')).toBe(false);
    expect(ledger.removeWorker(a!)).toEqual([]);
    expect(() => ledger.add('r4', a!, [], 0, 0)).toThrow(/slot 0 is not a worker in the ledger/);
    expect(() => ledger.setAvailable(a!, true)).toThrow(/slot 0 is not a worker in the ledger/);
  });

  it('rows grow with the slot count and keep what they held', () => {
    const ledger = makeLedger(impl);
    const slots = addFleet(ledger, 3);
    ledger.add('r1', slots[2]!, chain(1, 2), 7, 0);
    addFleet(ledger, 300);
    expect(ledger.rows).toBe(300);
    expect(ledger.columns.activeRequests.length).toBe(300);
    expect(ledger.projection.potentialDecodeBlocks.length).toBe(300);
    expect(ledger.columns.activePrefillTokens[slots[2]!]).toBe(7);
    expect(ledger.columns.present[299]).toBe(1);
  });

  it('rejects bad input with errors naming the field', () => {
    const ledger = makeLedger(impl);
    const [a] = addFleet(ledger, 1);
    expect(() => ledger.add('', a!, [], 0, 0)).toThrow(/requestId/);
    expect(() => ledger.add('r', -1, [], 0, 0)).toThrow(/slot/);
    expect(() => ledger.add('r', a!, [1n, -1n], 0, 0)).toThrow(/seqHashes\[1\]/);
    expect(() => ledger.add('r', a!, [1n << 64n], 0, 0)).toThrow(/seqHashes\[0\]/);
    expect(() => ledger.add('r', a!, [3 as unknown as bigint], 0, 0)).toThrow(/seqHashes\[0\]/);
    expect(() => ledger.add('r', a!, [], 1.5, 0)).toThrow(/uncachedTokens/);
    expect(() => ledger.add('r', a!, [], -1, 0)).toThrow(/uncachedTokens/);
    expect(() => ledger.add('r', a!, [], 0, Number.NaN)).toThrow(/now/);
    expect(() => ledger.sweep(0, -5)).toThrow(/maxAgeMs/);
    expect(() => ledger.setWorker(a!, { totalBlocks: -1, maxBatchedTokens: 0 })).toThrow(/capacity.totalBlocks/);
    expect(() => ledger.setWorker(a!, { totalBlocks: 1, maxBatchedTokens: 2 ** 32 })).toThrow(/capacity.maxBatchedTokens/);
    expect(() => ledger.setWorker(7, { totalBlocks: 1, maxBatchedTokens: 1 })).toThrow(/slot 7 is not held by any worker/);
    expect(() => ledger.project({ seqHashes: [], promptTokens: 1, blockSize: 0 })).toThrow(/blockSize/);
    expect(() => ledger.project({ seqHashes: [], promptTokens: -1, blockSize: 4 })).toThrow(/promptTokens/);
    expect(() => ledger.project({ seqHashes: [], promptTokens: 1, blockSize: 4, overlaps: { slots: [0], depths: [] } })).toThrow(/overlaps.slots/);
    expect(() => ledger.project({ seqHashes: [], promptTokens: 1, blockSize: 4, overlaps: { slots: [0], depths: [0.5] } })).toThrow(/overlaps.depths\[0\]/);
    expect(ledger.liveRequests).toBe(0);
  });
});

describe('LoadTable (wasm)', () => {
  it('claims the ledger kernel of its Core', () => {
    const core = new Core();
    new LoadTable({ core });
    expect(() => new LoadTable({ core })).toThrow(/already holds a ledger/);
  });

  it('keeps its views usable after the core\'s memory grows', () => {
    const ledger = new LoadTable();
    const [a] = addFleet(ledger, 1);
    const before = ledger.columns;
    const memory = ledger.core.memoryBytes;
    // long prompts until the heap has to grow
    for (let i = 0; ledger.core.memoryBytes === memory; i++) ledger.add(`r${i}`, a!, chain(i, 2000), 1, 0);
    expect(before.activeRequests.byteLength).toBe(0);
    expect(ledger.columns.activeRequests[a!]).toBe(ledger.liveRequests);
    expect(ledger.columns.activePrefillTokens[a!]).toBe(ledger.liveRequests);
  });
});
