// The mock engine's offload tier (blocks written through to host memory and
// published with medium CPU) and its media keys (images folded into the
// blocks they overlap, in its own identity and in its events).
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { BlockRemoved, BlockStored, KvEvent, KvEventBatch } from '../../router/kv-events.js';
import { BlockCache } from '../../sim/mocker/block-cache.js';
import { MockEngine } from '../../sim/mocker/engine.js';
import type { RequestResult } from '../../sim/mocker/sequence.js';

const tokens = Uint32Array.from({ length: 8 }, (_, i) => 100 + i);

describe('block cache offload tier', () => {
  it('writes each new block through to the CPU tier, chained, and keeps it there once the GPU evicts it', () => {
    const cache = new BlockCache(2, 2, true, 8);
    const a = cache.store(1n, null, tokens, 0);
    const b = cache.store(2n, a, tokens, 2);
    expect(cache.takeEvents()).toEqual([
      { type: 'stored', blockHashes: [1n, 2n], parentBlockHash: null, tokenIds: new Uint32Array([100, 101, 102, 103]), blockSize: 2, loraName: null, medium: 'GPU' },
      { type: 'stored', blockHashes: [1n, 2n], parentBlockHash: null, tokenIds: new Uint32Array([100, 101, 102, 103]), blockSize: 2, loraName: null, medium: 'CPU' },
    ]);
    cache.release(b);
    cache.release(a);
    expect(cache.makeRoom(2)).toBe(true);
    // evicted from the GPU, the blocks stay offloaded: no CPU removal
    expect(cache.takeEvents()).toEqual([{ type: 'removed', blockHashes: [2n, 1n], medium: 'GPU' }]);
    // stored on the GPU again, they are not offloaded twice
    cache.store(1n, null, tokens, 0);
    expect(cache.takeEvents().map((e) => [e.type, (e as BlockStored).medium])).toEqual([['stored', 'GPU']]);
  });

  it('drops the oldest offloaded blocks past the tier capacity, and a block already offloaded splits the run', () => {
    const cache = new BlockCache(8, 2, true, 2);
    const a = cache.store(1n, null, tokens, 0);
    cache.takeEvents();
    const b = cache.store(2n, a, tokens, 2);
    cache.store(3n, b, tokens, 4);
    const events = cache.takeEvents();
    expect(events.slice(1)).toEqual([
      { type: 'stored', blockHashes: [2n, 3n], parentBlockHash: 1n, tokenIds: new Uint32Array([102, 103, 104, 105]), blockSize: 2, loraName: null, medium: 'CPU' },
      { type: 'removed', blockHashes: [1n], medium: 'CPU' },
    ]);
  });

  it('without a tier, publishes nothing for one', () => {
    const cache = new BlockCache(4, 2, true);
    cache.store(1n, null, tokens, 0);
    expect(cache.takeEvents().map((e) => (e as BlockStored).medium)).toEqual(['GPU']);
  });
});

describe('mock engine loads from its offload tier', () => {
  const prompt = (start: number, n: number) => Uint32Array.from({ length: n }, (_, i) => start + i);

  function offloadEngine(loadMsPerToken: number, offloadBlocks = 64) {
    const batches: KvEventBatch[] = [];
    const clock = new VirtualClock(0);
    // Six GPU blocks of two tokens: one 10-token prompt pushes an 8-token one out but for its first block.
    const engine = new MockEngine({ clock, numBlocks: 6, blockSize: 2, offloadBlocks, offloadLoadMsPerToken: loadMsPerToken, onEvents: (b) => batches.push(b) });
    const run = (id: string, tokens: Uint32Array) => {
      const done = new Promise<RequestResult>((resolve, reject) => engine.submit({ id, tokens, maxTokens: 1, onComplete: resolve, onError: reject }));
      clock.runAll();
      return done;
    };
    return { engine, batches, clock, run };
  }

  it('loads the blocks the GPU evicted from the CPU tier, counts them cached, and takes the load time before its step', async () => {
    const { engine, batches, run } = offloadEngine(1);
    const a = prompt(100, 8);
    await run('a', a);
    const hashes = (batches[0]!.events[0] as BlockStored).blockHashes;
    await run('b', prompt(500, 10));
    // Block 0 of a is still on the GPU, 1..3 only in the CPU tier.
    expect(batches.flatMap((b) => b.events).filter((e): e is BlockRemoved => e.type === 'removed' && e.medium === 'GPU').flatMap((e) => e.blockHashes)).toEqual([hashes[3], hashes[2], hashes[1]]);
    const since = batches.length;
    const again = await run('a2', a);
    // GPU hit block 0, then blocks 1 and 2 loaded (the last token is always computed): 4 tokens at 1 ms each,
    // then one step computing 2 tokens: prefill(2) = 4.209989e-7 * 4 + 1.518344e-2 * 2 + 16.50142.
    expect(again.cachedTokens).toBe(6);
    expect(again.ttftMs).toBeCloseTo(4 + 16.531788523, 6);
    expect(engine.stats()).toMatchObject({ loadedTokens: 4, loading: 0, offloadedBlocks: 9 });
    // The loaded blocks are published as GPU stores, chained to the hit, then the block the step computed;
    // all of them were in the CPU tier already, which publishes nothing.
    const after = batches.slice(since).flatMap((b) => b.events);
    const stores = after.filter((e): e is BlockStored => e.type === 'stored');
    expect(stores.map((e) => [e.medium, e.parentBlockHash, e.blockHashes])).toEqual([
      ['GPU', hashes[0], [hashes[1], hashes[2]]],
      ['GPU', hashes[2], [hashes[3]]],
    ]);
    expect(Array.from(stores[0]!.tokenIds)).toEqual([102, 103, 104, 105]);
  });

  it('is faster than computing the prefix again when a load costs less than prefill', async () => {
    const ttft = async (offloadBlocks: number) => {
      const { run } = offloadEngine(0.001, offloadBlocks);
      await run('a', prompt(100, 8));
      await run('b', prompt(500, 10));
      return run('a2', prompt(100, 8));
    };
    const [loaded, computed] = [await ttft(64), await ttft(0)];
    expect([loaded.cachedTokens, computed.cachedTokens]).toEqual([6, 2]);
    expect(loaded.ttftMs!).toBeLessThan(computed.ttftMs!);
  });

  it('keeps a prefix in use in the tier: a lookup touches it, so the least recently used blocks go first', async () => {
    // A tier of 9 blocks holding a (4 blocks), then c (2): b (5 more) pushes the two oldest out, a's first
    // two, unless a was looked up since c came.
    const { batches, run } = offloadEngine(0, 9);
    await run('a', prompt(100, 8));
    await run('c', prompt(900, 4));
    const c = (batches[1]!.events[0] as BlockStored).blockHashes;
    await run('a2', prompt(100, 8));
    await run('b', prompt(500, 10));
    const cpuRemoved = batches.flatMap((b) => b.events).filter((e): e is BlockRemoved => e.type === 'removed' && e.medium === 'CPU').flatMap((e) => e.blockHashes);
    expect(cpuRemoved).toEqual(c);
  });

  it('starts a request submitted while another waits for its load at once', async () => {
    const { engine, clock, run } = offloadEngine(50);
    await run('a', prompt(100, 8));
    await run('b', prompt(500, 10));
    const start = clock.now();
    const results: RequestResult[] = [];
    engine.submit({ id: 'a2', tokens: prompt(100, 8), maxTokens: 1, onComplete: (r) => results.push(r) });
    engine.submit({ id: 'd', tokens: prompt(700, 2), maxTokens: 1, onComplete: (r) => results.push(r) });
    clock.runAll();
    // d computes while a2's 200 ms load runs, so it finishes first, well before the load is in.
    expect(results.map((r) => r.id)).toEqual(['d', 'a2']);
    expect(results[0]!.finishMs - start).toBeLessThan(200);
    expect(results[1]!.ttftMs).toBeGreaterThan(200);
  });
});

describe('mock engine media keys', () => {
  function run(media: { id: string; offset: number; length: number }[] | undefined, engine: MockEngine, id: string): Promise<RequestResult> {
    return new Promise((resolve, reject) => engine.submit({ id, tokens, maxTokens: 1, media, onComplete: resolve, onError: reject }));
  }

  function engineWithEvents(): { engine: MockEngine; events: KvEvent[]; clock: VirtualClock } {
    const events: KvEvent[] = [];
    const clock = new VirtualClock(0);
    const engine = new MockEngine({ clock, numBlocks: 64, blockSize: 2, onEvents: (batch: KvEventBatch) => events.push(...batch.events) });
    return { engine, events, clock };
  }

  it('publishes each block its image overlaps with the key and offset an engine folds in', async () => {
    const { engine, events, clock } = engineWithEvents();
    const done = run([{ id: 'cat', offset: 3, length: 3 }], engine, 'r1');
    clock.runAll();
    await done;
    const stored = events.find((e): e is BlockStored => e.type === 'stored')!;
    expect(stored.media).toEqual([null, [{ id: 'cat', offset: 1 }], [{ id: 'cat', offset: -1 }], null]);
  });

  it('reuses a cached image block only for the same image', async () => {
    const { engine, clock } = engineWithEvents();
    const step = async (p: Promise<RequestResult>) => {
      clock.runAll();
      return p;
    };
    await step(run([{ id: 'cat', offset: 3, length: 3 }], engine, 'a'));
    const same = await step(run([{ id: 'cat', offset: 3, length: 3 }], engine, 'b'));
    const other = await step(run([{ id: 'dog', offset: 3, length: 3 }], engine, 'c'));
    const none = await step(run(undefined, engine, 'd'));
    // block 0 (tokens 0-1) precedes the image in every prompt; the last token is never reused
    expect([same.cachedTokens, other.cachedTokens, none.cachedTokens]).toEqual([6, 2, 2]);
  });
});

describe('kvrouter mock --offload-blocks', () => {
  it('gives every worker an offload tier of that many blocks, and rejects a negative count', async () => {
    const { startMockCommand, registerMock } = await import('../../server/cli/mock.js');
    const fleet = await startMockCommand(
      { port: 0, host: '127.0.0.1', workers: 2, engineSpeedup: 5, numBlocks: 100, blockSize: 8, maxBatchedTokens: 256, maxNumSeqs: 4, offloadBlocks: 300, model: 'demo', defaultMaxTokens: 3, kvTopic: 'kv-events' },
      () => {},
    );
    try {
      expect(fleet.engines.map((e) => e.shape.offloadBlocks)).toEqual([300, 300]);
    } finally {
      await fleet.close();
    }
    const { Command } = await import('commander');
    const program = new Command().exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });
    registerMock(program);
    expect(() => program.parse(['mock', '--offload-blocks', '-3'], { from: 'user' })).toThrow(/--offload-blocks.*expected an integer >= 0/);
  });
});
