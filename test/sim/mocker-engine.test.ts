import { describe, expect, it } from 'vitest';
import { chainedBlockHashes } from '../../sim/mocker/block-hash.js';
import { decodeMs, prefillMs } from '../../sim/mocker/timing.js';
import { concat, removedHashes, rig, storedHashes, tokens } from './mocker-fixtures.js';

describe('mock engine: scheduling', () => {
  it('chunked prefill: a 20,000-token prompt at budget 8192 takes 3 prefill steps and TTFT is their modelled sum', () => {
    const r = rig();
    r.send('long', tokens(20_000), 1);
    r.clock.runAll();
    expect(r.steps.map((s) => s.prefillTokens)).toEqual([8192, 8192, 3616]);
    const result = r.results.get('long')!;
    expect(result.ttftMs).toBeCloseTo(2 * prefillMs(8192) + prefillMs(3616), 9);
  });

  it('running first: the budget goes to running prefill and decodes before a waiting request is admitted', () => {
    const r = rig();
    r.send('a', tokens(20_000), 2);
    r.send('b', tokens(5000, 100_000), 1);
    r.clock.runAll();
    // b gets nothing while a's prefill fills the budget, then the leftover of a's last chunk.
    expect(r.steps.slice(0, 4).map((s) => [s.requests, s.prefillTokens, s.decodes])).toEqual([
      [1, 8192, 0],
      [1, 8192, 0],
      [2, 8192, 0],
      [2, 424, 1],
    ]);
    expect(r.results.get('b')!.firstTokenMs).toBe(r.results.get('a')!.finishMs);
  });

  it('max running sequences: a third request waits until one of two running ones finishes', () => {
    const r = rig({ maxNumSeqs: 2 });
    r.send('a', tokens(10), 5);
    r.send('b', tokens(10, 50), 8);
    r.send('c', tokens(10, 90), 1);
    r.clock.runAll();
    expect(Math.max(...r.steps.map((s) => s.requests))).toBe(2);
    const a = r.results.get('a')!;
    const c = r.results.get('c')!;
    // c is admitted by the step that starts when a finishes, and its prefill is that step's only prefill.
    const admitting = r.steps.find((s) => s.startMs === a.finishMs)!;
    expect(admitting.prefillTokens).toBe(10);
    expect(c.firstTokenMs).toBe(admitting.startMs + admitting.durationMs);
  });

  it('first token at the end of the step that finishes prefill; one token per later step', () => {
    const r = rig();
    const times = r.send('a', tokens(300), 4);
    r.clock.runAll();
    const ends = r.steps.map((s) => s.startMs + s.durationMs);
    expect(times).toEqual(ends);
    expect(r.results.get('a')!.tokenTimesMs).toEqual(times);
    expect(r.steps.map((s) => s.decodes)).toEqual([0, 1, 1, 1]);
  });
});

describe('mock engine: timing model', () => {
  it('prefill and decode follow the polynomials', () => {
    expect(prefillMs(0)).toBe(0);
    expect(prefillMs(1000)).toBeCloseTo(4.209989e-7 * 1e6 + 1.518344e-2 * 1000 + 16.50142, 12);
    expect(decodeMs(0)).toBeCloseTo(5.74, 12);
    expect(decodeMs(0.5)).toBeCloseTo(-25.74 * 0.25 + 54.01 * 0.5 + 5.74, 12);
    expect(decodeMs(3)).toBe(1);
  });

  it('timing formula and speedup: step durations are the model over speedup, decode read at the KV utilisation', () => {
    const speedup = 4;
    const r = rig({ numBlocks: 1000, speedup });
    const times = r.send('a', tokens(100), 3);
    r.clock.runAll();
    // 100 prompt tokens (then 101, 102) occupy 2 of 1000 blocks.
    const p = prefillMs(100) / speedup;
    const d = decodeMs(2 / 1000) / speedup;
    expect(times[0]).toBeCloseTo(p, 9);
    expect(times[1]).toBeCloseTo(p + d, 9);
    expect(times[2]).toBeCloseTo(p + 2 * d, 9);
    expect(r.steps.map((s) => s.kvUsage)).toEqual([0.002, 0.002, 0.002]);
  });

  it('a step with both prefill and decode takes their sum', () => {
    const r = rig({ numBlocks: 1000 });
    r.send('a', tokens(64), 3);
    r.clock.step(); // step 1 starts: a's prefill
    r.clock.step(); // step 1 ends, step 2 (a's first decode) starts
    r.send('b', tokens(130, 500), 1);
    r.clock.runAll();
    const mixed = r.steps[2]!;
    expect([mixed.decodes, mixed.prefillTokens]).toEqual([1, 130]);
    expect(mixed.durationMs).toBeCloseTo(prefillMs(mixed.prefillTokens) + decodeMs(mixed.kvUsage), 9);
  });
});

describe('mock engine: prefix cache', () => {
  it('prefix reuse: the same prompt again computes only the trailing partial block and stores no new blocks', () => {
    const r = rig();
    const prompt = tokens(1000);
    r.send('a', prompt, 2);
    r.clock.runAll();
    const storedByA = storedHashes(r.batches);
    expect(storedByA).toEqual([...chainedBlockHashes(prompt, 64)]);
    const stepsBefore = r.steps.length;
    r.send('b', prompt, 1);
    r.clock.runAll();
    const b = r.results.get('b')!;
    expect(b.cachedTokens).toBe(960);
    expect(r.steps[stepsBefore]!.prefillTokens).toBe(40);
    expect(b.ttftMs).toBeCloseTo(prefillMs(40), 9);
    expect(storedHashes(r.batches)).toEqual(storedByA);
    expect(r.engine.stats().prefixHitTokens).toBe(960);
  });

  it('a fully cached prompt still computes its last block (to sample a token) and stores nothing new', () => {
    const r = rig();
    const prompt = tokens(1024);
    r.send('a', prompt, 1);
    r.clock.runAll();
    const stored = storedHashes(r.batches).length;
    r.send('b', prompt, 1);
    r.clock.runAll();
    expect(r.results.get('b')!.cachedTokens).toBe(960);
    expect(r.steps[r.steps.length - 1]!.prefillTokens).toBe(64);
    expect(storedHashes(r.batches).length).toBe(stored);
    expect(r.engine.stats().cachedBlocks).toBe(16);
  });

  it('refcounts: a shared prefix stays active while either request runs, counted once', () => {
    const r = rig({ numBlocks: 1000 });
    const shared = tokens(640);
    r.send('a', concat(shared, tokens(64, 5000)), 3);
    r.send('b', concat(shared, tokens(64, 9000)), 10);
    r.clock.step(); // the first step is planned: both prompts are prefilled in it
    // Both prompts are exact blocks: 10 shared + one own block each, nothing private yet.
    // (b found the shared blocks a computes earlier in the same step.)
    expect(r.engine.stats().activeBlocks).toBe(12);
    r.clock.runAll();
    expect(r.results.get('b')!.cachedTokens).toBe(640);
    // While both decode: 12 cached + one private (generated tokens) each.
    expect(r.steps[1]!.kvUsage * 1000).toBeCloseTo(14, 9);
    // After a finished, b alone still holds all 10 shared blocks.
    const afterA = r.steps.find((s) => s.startMs === r.results.get('a')!.finishMs)!;
    expect(afterA.kvUsage * 1000).toBeCloseTo(10 + 1 + 1, 9);
    const stats = r.engine.stats();
    expect(stats.activeBlocks).toBe(0);
    expect(stats.cachedBlocks).toBe(12);
  });

  it('eviction order: leaves first, least recently used first; the shared prefix survives; removed events name exactly the evicted blocks', () => {
    const r = rig({ numBlocks: 8, blockSize: 4 });
    const P = tokens(8, 1000);
    const promptA = concat(P, tokens(4, 2000), tokens(1, 7));
    const promptB = concat(P, tokens(4, 3000), tokens(1, 7));
    const [, , hashA2] = chainedBlockHashes(promptA, 4);
    const [p0, p1, hashB2] = chainedBlockHashes(promptB, 4);
    r.send('a', promptA, 1);
    r.clock.runAll();
    r.send('b', promptB, 1);
    r.clock.runAll();
    expect(r.results.get('b')!.cachedTokens).toBe(8);
    expect(removedHashes(r.batches)).toEqual([]);
    // 5 blocks needed, 4 free: the oldest leaf (a's own block) goes, not the shared prefix.
    r.send('c', tokens(17, 4000), 1);
    r.clock.runAll();
    expect(removedHashes(r.batches)).toEqual([hashA2]);
    r.send('d', promptA, 1);
    r.clock.runAll();
    expect(r.results.get('d')!.cachedTokens).toBe(8);
    // d needed 2 more blocks with 1 free: the next oldest leaf is b's block, c's chain is newer.
    expect(removedHashes(r.batches)).toEqual([hashA2, hashB2]);
    const cached = new Set(r.engine.cachedBlockHashes());
    expect(cached.has(p0!) && cached.has(p1!) && cached.has(hashA2!)).toBe(true);
    const last = r.batches[r.batches.length - 1]!.events;
    expect(last).toContainEqual(expect.objectContaining({ type: 'stored', blockHashes: [hashA2], parentBlockHash: p1 }));
  });

  it('resetting the prefix cache publishes AllBlocksCleared and is refused while requests hold blocks', () => {
    const r = rig();
    r.send('a', tokens(200), 3);
    r.clock.step();
    expect(r.engine.resetPrefixCache()).toBe(false);
    r.clock.runAll();
    expect(r.engine.resetPrefixCache()).toBe(true);
    expect(r.batches[r.batches.length - 1]!.events).toEqual([{ type: 'cleared' }]);
    expect(r.engine.stats().cachedBlocks).toBe(0);
  });
});

describe('mock engine: preemption', () => {
  it('preemption with recompute when the cache is full: the latest admitted request is preempted, requeued first, and recomputed', () => {
    // 16 blocks of 4 tokens; a and b grow one block per 4 decodes until they no longer both fit.
    const r = rig({ numBlocks: 16, blockSize: 4, maxNumSeqs: 2 });
    const promptB = tokens(20, 200);
    const hashesB = chainedBlockHashes(promptB, 4);
    r.send('a', tokens(20, 100), 30);
    r.send('b', promptB, 30);
    r.send('c', tokens(4, 300), 1);
    r.clock.runAll();
    const [a, b, c] = ['a', 'b', 'c'].map((id) => r.results.get(id)!);
    expect([a!.outputTokens, b!.outputTokens, c!.outputTokens]).toEqual([30, 30, 1]);
    expect([a!.preemptions, b!.preemptions]).toEqual([0, 1]);
    const stats = r.engine.stats();
    expect(stats.preemptions).toBe(1);
    // b had KV for 32 tokens (20 prompt + 12 generated) when a needed its 9th block. While b
    // waited, a evicted b's two last prompt blocks; b found 3 blocks (12 tokens) still cached.
    expect(removedHashes(r.batches).slice(0, 2)).toEqual([hashesB[4], hashesB[3]]);
    expect(b!.recomputedTokens).toBe(32 - 12);
    expect(stats.recomputedTokens).toBe(20);
    expect(Math.max(...r.steps.map((s) => s.kvUsage))).toBeLessThanOrEqual(1);
    // b is readmitted, in front of c (waiting all along), by the step that starts as a finishes:
    // 33 known tokens - 12 cached for b, then c's 4.
    const resume = r.steps.find((s) => s.startMs === a!.finishMs)!;
    expect([resume.requests, resume.prefillTokens]).toEqual([2, 21 + 4]);
    expect(c!.firstTokenMs).toBe(resume.startMs + resume.durationMs);
    expect(b!.tokenTimesMs[13]).toBe(c!.firstTokenMs);
  });
});
