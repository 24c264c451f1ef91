import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { MockEngine } from '../../sim/mocker/engine.js';
import { rig, storedHashes, tokens } from './mocker-fixtures.js';

describe('mock engine: abort', () => {
  it('abort frees blocks: a running request stops producing and holds nothing', () => {
    const r = rig({ numBlocks: 100 });
    const times = r.send('a', tokens(200), 100);
    r.clock.advanceTo(100);
    const produced = times.length;
    expect(produced).toBeGreaterThan(1);
    const result = r.engine.abort('a')!;
    expect(result.finishReason).toBe('abort');
    expect(result.outputTokens).toBe(produced);
    const stats = r.engine.stats();
    expect([stats.activeBlocks, stats.running, stats.aborted]).toEqual([0, 0, 1]);
    // The 3 full prompt blocks stay cached for reuse.
    expect(stats.cachedBlocks).toBe(3);
    r.clock.runAll();
    expect(times.length).toBe(produced);
    expect(r.results.has('a')).toBe(false);
  });

  it('aborting during a step: the step ends without a token for the aborted request', () => {
    const r = rig();
    const times = r.send('a', tokens(100), 5);
    const other = r.send('b', tokens(100, 999), 5);
    r.clock.step(); // plan the first step
    r.engine.abort('a');
    r.clock.runAll();
    expect(times).toEqual([]);
    expect(other.length).toBe(5);
  });

  it('aborting a waiting request removes it from the line', () => {
    const r = rig({ maxNumSeqs: 1 });
    r.send('a', tokens(10), 3);
    const times = r.send('b', tokens(10, 50), 3);
    r.clock.step();
    expect(r.engine.stats().waiting).toBe(1);
    expect(r.engine.abort('b')!.outputTokens).toBe(0);
    expect(r.engine.stats().waiting).toBe(0);
    r.clock.runAll();
    expect(times).toEqual([]);
    expect(r.engine.abort('b')).toBeUndefined();
    expect(r.results.get('a')!.outputTokens).toBe(3);
  });

  it('a callback may abort another request of the same step; that request gets no further callbacks', () => {
    const clock = new VirtualClock();
    const engine = new MockEngine({ clock });
    const seen: string[] = [];
    engine.submit({ id: 'a', tokens: tokens(10), maxTokens: 2, onToken: (i) => (seen.push(`a${i}`), engine.abort('b')) });
    engine.submit({ id: 'b', tokens: tokens(10, 50), maxTokens: 2, onFirstToken: () => seen.push('b-first') });
    clock.runAll();
    expect(seen).toEqual(['a0', 'a1']);
  });
});

describe('mock engine: bad input', () => {
  const engine = () => new MockEngine({ clock: new VirtualClock(), numBlocks: 4, blockSize: 4 });

  it('duplicate ids and empty prompts are errors', () => {
    const e = engine();
    e.submit({ id: 'x', tokens: tokens(4), maxTokens: 1 });
    expect(() => e.submit({ id: 'x', tokens: tokens(4), maxTokens: 1 })).toThrow(/"x" is already in the engine/);
    expect(() => e.submit({ id: 'y', tokens: new Uint32Array(0), maxTokens: 1 })).toThrow(/tokens \(the prompt\) is empty/);
    expect(() => e.submit({ id: '', tokens: tokens(4), maxTokens: 1 })).toThrow(TypeError);
    expect(() => e.submit({ id: 'z', tokens: [1, 2] as unknown as Uint32Array, maxTokens: 1 })).toThrow(/Uint32Array/);
    expect(() => e.submit({ id: 'z', tokens: tokens(4), maxTokens: 0 })).toThrow(/maxTokens must be an integer >= 1/);
    expect(() => e.submit({ id: 'z', tokens: tokens(4), maxTokens: 1.5 })).toThrow(RangeError);
  });

  it('an id can be reused once its request finished', () => {
    const clock = new VirtualClock();
    const e = new MockEngine({ clock });
    e.submit({ id: 'x', tokens: tokens(4), maxTokens: 1 });
    clock.runAll();
    expect(() => e.submit({ id: 'x', tokens: tokens(4), maxTokens: 1 })).not.toThrow();
  });

  it('a request that could never fit the cache is refused up front', () => {
    // 16 tokens of KV fit; 14 prompt + 3 generated need KV for 16 (the last token needs none).
    expect(() => engine().submit({ id: 'ok', tokens: tokens(14), maxTokens: 3 })).not.toThrow();
    expect(() => engine().submit({ id: 'big', tokens: tokens(14), maxTokens: 4 })).toThrow(/need 5 KV blocks, the cache has 4/);
  });

  it('options are validated by name', () => {
    const clock = new VirtualClock();
    expect(() => new MockEngine({ clock, numBlocks: 0 })).toThrow(/numBlocks/);
    expect(() => new MockEngine({ clock, blockSize: 1.5 })).toThrow(/blockSize/);
    expect(() => new MockEngine({ clock, maxBatchedTokens: -1 })).toThrow(/maxBatchedTokens/);
    expect(() => new MockEngine({ clock, maxNumSeqs: NaN })).toThrow(/maxNumSeqs/);
    expect(() => new MockEngine({ clock, speedup: 0 })).toThrow(/speedup/);
    expect(() => new MockEngine({ clock, dpRank: -1 })).toThrow(/dpRank/);
    expect(() => new MockEngine({} as never)).toThrow(/clock/);
  });

  it('an injected hasher that returns the wrong number of hashes is rejected', () => {
    const e = new MockEngine({ clock: new VirtualClock(), blockSize: 4, hashBlocks: () => new BigUint64Array(1) });
    expect(() => e.submit({ id: 'x', tokens: tokens(8), maxTokens: 1 })).toThrow(/1 hashes for 2 full blocks/);
  });
});

describe('mock engine: lifecycle and events', () => {
  it('close errors unfinished requests and stops the loop', () => {
    const clock = new VirtualClock();
    const e = new MockEngine({ clock });
    const errors: string[] = [];
    e.submit({ id: 'a', tokens: tokens(10), maxTokens: 50, onError: (err) => errors.push(err.message) });
    clock.step();
    e.close();
    expect(errors).toEqual(['engine closed']);
    expect(clock.runAll()).toBe(0);
    expect(e.stats().activeBlocks).toBe(0);
    expect(() => e.submit({ id: 'b', tokens: tokens(10), maxTokens: 1 })).toThrow(/closed/);
  });

  it('event batches carry the clock in seconds, the dp rank, and an injected hasher\'s hashes', () => {
    const hashBlocks = (t: Uint32Array, bs: number) => BigUint64Array.from({ length: Math.floor(t.length / bs) }, (_, i) => BigInt(t[0]! * 1000 + i));
    const r = rig({ blockSize: 4, dpRank: 3, hashBlocks, speedup: 2 });
    r.send('a', tokens(9, 5), 1);
    r.clock.runAll();
    expect(r.batches).toHaveLength(1);
    const batch = r.batches[0]!;
    expect(batch.dpRank).toBe(3);
    expect(batch.ts).toBeCloseTo(r.results.get('a')!.finishMs / 1000, 12);
    expect(storedHashes(r.batches)).toEqual([5000n, 5001n]);
  });

  it('prefix-hit statistics: reused and admitted prompt tokens add up over requests', () => {
    const r = rig();
    r.send('a', tokens(300), 1);
    r.clock.runAll();
    r.send('b', tokens(300), 1);
    r.send('c', tokens(100, 7777), 1);
    r.clock.runAll();
    const stats = r.engine.stats();
    expect(stats.prefixHitTokens).toBe(256);
    expect(stats.admittedPromptTokens).toBe(700);
    expect(stats.completed).toBe(3);
    expect(r.results.get('c')!.cachedTokens).toBe(0);
  });
});

describe('mock engine: re-entrant callbacks', () => {
  it('a request submitted from onStep or onToken joins a later step; steps never overlap', () => {
    const clock = new VirtualClock();
    const spans: [number, number][] = [];
    let submitted = 0;
    const engine: MockEngine = new MockEngine({
      clock,
      onStep: (s) => {
        spans.push([s.startMs, s.startMs + s.durationMs]);
        if (submitted < 3) engine.submit({ id: `from-step-${submitted++}`, tokens: tokens(20, 100 * submitted), maxTokens: 2 });
      },
    });
    engine.submit({
      id: 'first',
      tokens: tokens(20),
      maxTokens: 3,
      onToken: (i) => engine.submit({ id: `from-token-${i}`, tokens: tokens(5, 9000 + 10 * i), maxTokens: 1 }),
    });
    clock.runAll();
    for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1]);
    expect(engine.stats().completed).toBe(1 + 3 + 3);
  });
});
