// A request's model names a model, one of its LoRA adapters (vLLM), or
// "model:adapter" (SGLang); cache_salt is a non-empty string.
import { describe, expect, it } from 'vitest';
import { RouterError } from '../../router/errors.js';
import { plainFields } from '../../router/model-fleet.js';
import { cacheSaltOf, resolveTarget, withBlockKeys } from '../../server/request/target.js';
import type { ModelRuntime } from '../../server/workers/model-runtime.js';

const qwen = { name: 'Qwen/Qwen3-8B', config: { adapters: ['sql-lora'] } } as unknown as ModelRuntime;
const llama = { name: 'llama:8b', config: { adapters: [] } } as unknown as ModelRuntime;
const rt = { models: new Map([[qwen.name, qwen], [llama.name, llama]]), adapters: new Map([['sql-lora', qwen]]) };

describe('resolveTarget', () => {
  it('finds a model, an adapter by its name, and an adapter after its model and a colon', () => {
    expect(resolveTarget(rt, { model: 'Qwen/Qwen3-8B' })).toEqual({ model: qwen, adapter: null });
    expect(resolveTarget(rt, { model: 'sql-lora' })).toEqual({ model: qwen, adapter: 'sql-lora' });
    expect(resolveTarget(rt, { model: 'Qwen/Qwen3-8B:sql-lora' })).toEqual({ model: qwen, adapter: 'sql-lora' });
    // A model whose own name has a colon is still itself.
    expect(resolveTarget(rt, { model: 'llama:8b' })).toEqual({ model: llama, adapter: null });
  });

  it('answers 404 for a name that is none of them, listing what is served', () => {
    for (const model of ['gpt-4', 'Qwen/Qwen3-8B:math-lora', 'llama:sql-lora']) {
      try {
        resolveTarget(rt, { model });
        throw new Error('resolved');
      } catch (error) {
        expect(RouterError.is(error) && error.code).toBe('KVR_ERR_MODEL_NOT_FOUND');
        expect((error as Error).message).toContain('(served: Qwen/Qwen3-8B, llama:8b, sql-lora)');
      }
    }
  });
});

describe('block keys of a request', () => {
  it('adds the adapter (required where served, preferred where loaded) and the salt', () => {
    const fields = withBlockKeys(plainFields('q', { requiredTaints: ['zone=a'] }), { model: qwen, adapter: 'sql-lora' }, { cache_salt: 't1' });
    expect(fields).toMatchObject({
      loraName: 'sql-lora',
      cacheSalt: 't1',
      requiredTaints: ['zone=a', 'kvrouter.adapter=sql-lora'],
      preferredTaints: [{ taint: 'kvrouter.adapter-loaded=sql-lora', weight: 1 }],
    });
    const base = withBlockKeys(plainFields('r'), { model: qwen, adapter: null }, {});
    expect(base).toEqual(plainFields('r'));
  });

  it('takes cache_salt only as a non-empty string', () => {
    expect(cacheSaltOf({})).toBeNull();
    expect(cacheSaltOf({ cache_salt: null })).toBeNull();
    expect(cacheSaltOf({ cache_salt: 'x' })).toBe('x');
    for (const bad of ['', 0, {}]) expect(() => cacheSaltOf({ cache_salt: bad })).toThrow('cache_salt: must be a non-empty string');
  });
});
