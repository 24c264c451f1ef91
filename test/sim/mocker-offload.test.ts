// The mock engine's offload tier (blocks written through to host memory and
// published with medium CPU) and its media keys (images folded into the
// blocks they overlap, in its own identity and in its events).
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { BlockStored, KvEvent, KvEventBatch } from '../../router/kv-events.js';
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
