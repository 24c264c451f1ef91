// Reading a worker's loaded adapters from its /v1/models answer, and the
// config field that turns the polling on.
import { describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { loadedAdapters } from '../../server/workers/adapter-poll.js';
import { configFailure } from '../helpers/config-failure.js';

describe('loadedAdapters', () => {
  it("takes the entries whose parent is the model, as vLLM's and SGLang's /v1/models list loaded adapters", () => {
    const answer = {
      object: 'list',
      data: [
        { id: 'Qwen/Qwen3-8B', object: 'model', root: '/models/qwen' },
        { id: 'sql-lora', object: 'model', root: '/adapters/sql', parent: 'Qwen/Qwen3-8B' },
        { id: 'other-lora', parent: 'another-model' },
        { id: '', parent: 'Qwen/Qwen3-8B' },
        { id: 7, parent: 'Qwen/Qwen3-8B' },
        null,
        { id: 'chat-lora', parent: 'Qwen/Qwen3-8B' },
      ],
    };
    expect(loadedAdapters(answer, 'Qwen/Qwen3-8B')).toEqual(['sql-lora', 'chat-lora']);
    expect(loadedAdapters({ object: 'list', data: [] }, 'Qwen/Qwen3-8B')).toEqual([]);
  });

  it('is null for an answer of another shape, which leaves what was known', () => {
    for (const body of [null, 'text', { data: 'x' }, { models: [] }]) expect(loadedAdapters(body, 'm')).toBeNull();
  });
});

describe('models[].adapters_poll_ms', () => {
  it('is off by default and takes a whole number of ms', () => {
    const doc = (extra: Record<string, unknown>) => ({ models: [{ name: 'm', ...extra }], workers: [{ id: 'w', url: 'http://127.0.0.1:9', model: 'm' }] });
    expect(configFromDocument(doc({}), {}).models[0]!.adaptersPollMs).toBe(0);
    expect(configFromDocument(doc({ adapters_poll_ms: 5000 }), {}).models[0]!.adaptersPollMs).toBe(5000);
    expect(configFailure(doc({ adapters_poll_ms: -1 }))).toMatch(/models\[0\]\.adapters_poll_ms/);
    expect(configFailure(doc({ adapters_poll_ms: 1.5 }))).toMatch(/models\[0\]\.adapters_poll_ms/);
  });
});
