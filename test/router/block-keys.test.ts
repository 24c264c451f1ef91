// Block keys as vLLM hashes them: the LoRA name on every block, the cache
// salt on a request's first block only. Checked on the model fleet (both
// kernel kinds) with hashes written out by hand from the twin hasher, and on
// the salt rule of stored events' extra keys.
import { describe, expect, it } from 'vitest';
import { BlockHasher } from '../../bindings/reference/block-hasher.js';
import { seedFor } from '../../bindings/reference/hash-inputs.js';
import { VirtualClock } from '../../router/clock.js';
import type { BlockStored, KvEventBatch } from '../../router/kv-events.js';
import { ModelFleet, plainFields } from '../../router/model-fleet.js';
import { storedSalt } from '../../router/model-fleet/block-keys.js';

const BS = 4;
const tokens = (n: number, start = 1) => Array.from({ length: n }, (_, i) => start + i);

function storedEvent(over: Partial<BlockStored> & { tokenIds: number[] }): BlockStored {
  const blocks = over.tokenIds.length / BS;
  return { type: 'stored', blockHashes: Array.from({ length: blocks }, (_, i) => 500n + BigInt(i)), parentBlockHash: null, blockSize: BS, loraName: null, medium: 'GPU', ...over };
}

const batch = (...events: BlockStored[]): KvEventBatch => ({ ts: 0, dpRank: 0, events });

describe('storedSalt: the salt among a first block\'s extra keys', () => {
  it('is the first string after the LoRA name, past media tuples, before embedding bytes', () => {
    const ids = tokens(8);
    expect(storedSalt(storedEvent({ tokenIds: ids, extraKeys: [['tenant-a'], null] }))).toBe('tenant-a');
    expect(storedSalt(storedEvent({ tokenIds: ids, loraName: 'sql', extraKeys: [['sql', ['img-hash', 0], 'tenant-a', new Uint8Array([1])], ['sql']] }))).toBe('tenant-a');
    // The adapter's own name is not a salt.
    expect(storedSalt(storedEvent({ tokenIds: ids, loraName: 'sql', extraKeys: [['sql'], ['sql']] }))).toBeNull();
    // A salt equal to the adapter's name is still the second string.
    expect(storedSalt(storedEvent({ tokenIds: ids, loraName: 'sql', extraKeys: [['sql', 'sql'], ['sql']] }))).toBe('sql');
  });

  it('is null for a block that continues a chain, and when the engine sent no extra keys', () => {
    expect(storedSalt(storedEvent({ tokenIds: tokens(4), parentBlockHash: 9n, extraKeys: [['tenant-a']] }))).toBeNull();
    expect(storedSalt(storedEvent({ tokenIds: tokens(4) }))).toBeNull();
    expect(storedSalt(storedEvent({ tokenIds: tokens(4), extraKeys: [null] }))).toBeNull();
  });
});

describe.each(['wasm', 'reference'] as const)('salted and adapter blocks in the model fleet (%s kernels)', (kernels) => {
  const setup = () => {
    const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 3, kernels });
    for (const id of ['a', 'b']) p.addWorker({ id, totalBlocks: 1000, maxBatchedTokens: 8192 });
    return p;
  };
  const twin = new BlockHasher();

  it('hashes block 0 under (adapter, salt) and the rest under the adapter, chained under the adapter', () => {
    const p = setup();
    const ids = tokens(12);
    const r = p.prepare(plainFields('q', { loraName: 'sql', cacheSalt: 'tenant-a' }), ids);
    const base = seedFor({ lora: 'sql' });
    const expected = twin.localHashes(ids, BS, base);
    expected[0] = twin.localHashes(ids.slice(0, BS), BS, seedFor({ lora: 'sql', salt: 'tenant-a' }))[0]!;
    expect([...r.localHashes]).toEqual([...expected]);
    expect([...r.seqHashes]).toEqual([...twin.sequenceHashes(expected, base)]);
  });

  it("matches a salted chain stored over two events (the second continues the first) only under the same salt", () => {
    const p = setup();
    const ids = tokens(16);
    p.applyEvents({ id: 'a', rank: 0 }, batch(storedEvent({ tokenIds: ids.slice(0, 8), extraKeys: [['tenant-a'], null] })));
    p.applyEvents({ id: 'a', rank: 0 }, batch(storedEvent({ tokenIds: ids.slice(8), parentBlockHash: 501n, blockHashes: [600n, 601n] })));
    const overlap = (salt: string | null) => p.explain(p.prepare(plainFields(`q-${salt}`, { cacheSalt: salt }), ids)).workers.find((w) => w.worker === 'a')!.overlapBlocks;
    expect(overlap('tenant-a')).toBe(4);
    expect(overlap('tenant-b')).toBe(0);
    expect(overlap(null)).toBe(0);
  });

  it("keeps an adapter's blocks apart from the base model's and from another adapter's", () => {
    const p = setup();
    const ids = tokens(8);
    p.applyEvents({ id: 'b', rank: 0 }, batch(storedEvent({ tokenIds: ids, loraName: 'sql', extraKeys: [['sql'], ['sql']] })));
    const overlap = (lora: string | null) => p.explain(p.prepare(plainFields(`l-${lora}`, { loraName: lora }), ids)).workers.find((w) => w.worker === 'b')!.overlapBlocks;
    expect(overlap('sql')).toBe(2);
    expect(overlap('chat')).toBe(0);
    expect(overlap(null)).toBe(0);
  });
});
