// Worker roles and disaggregation settings: defaults, and the errors that name
// the bad field at load and in the admin API's worker check.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../server/config/fields.js';
import { validateConfig, validateWorker } from '../../server/config/schema.js';

const w = (id: string, over: Record<string, unknown> = {}) => ({ id, url: `http://10.0.0.${id.length}:8000`, model: 'm', ...over });
const model = (over: Record<string, unknown> = {}) => ({ name: 'm', disaggregation: {}, ...over });

function failure(document: unknown): string {
  try {
    validateConfig(document);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('the config was accepted');
}

describe('disaggregation config', () => {
  it('defaults: role both, engine vllm, no disaggregation', () => {
    const config = validateConfig({ workers: [w('a')] });
    expect(config.workers[0]).toMatchObject({ role: 'both', engine: null, bootstrapPort: null });
    expect(config.models[0]).toMatchObject({ engine: 'vllm', disaggregation: null });
  });

  it('reads a disaggregated vLLM model with its defaults', () => {
    const config = validateConfig({ models: [model()], workers: [w('p', { role: 'prefill' }), w('dd', { role: 'decode' })] });
    expect(config.models[0]!.disaggregation).toEqual({ minRemotePrefillTokens: 512, decodePrefixReuse: true });
    expect(config.workers.map((x) => x.role)).toEqual(['prefill', 'decode']);
  });

  it('SGLang: no decode prefix reuse by default, and a bootstrap port on prefill workers', () => {
    const config = validateConfig({
      models: [model({ engine: 'sglang', disaggregation: { min_remote_prefill_tokens: 64 } })],
      workers: [w('p', { role: 'prefill', bootstrap_port: 9001 }), w('dd', { role: 'decode', engine: 'sglang' })],
    });
    expect(config.models[0]).toMatchObject({ engine: 'sglang', disaggregation: { minRemotePrefillTokens: 64, decodePrefixReuse: false } });
    expect(config.workers[0]!.bootstrapPort).toBe(9001);
  });

  it('the top level sets it for every model, and one model turns it off', () => {
    const config = validateConfig({
      disaggregation: { min_remote_prefill_tokens: 100 },
      models: [{ name: 'm' }, { name: 'plain', disaggregation: false }],
      workers: [w('p', { role: 'prefill' }), w('dd', { role: 'decode' }), w('x', { model: 'plain' })],
    });
    expect(config.models.map((m) => m.disaggregation?.minRemotePrefillTokens ?? null)).toEqual([100, null]);
  });

  it('names the bad field', () => {
    expect(failure({ workers: [w('a', { role: 'prefil' })] })).toMatch(/^workers\[0\]\.role: must be one of prefill, decode, both, got "prefil"/);
    expect(failure({ workers: [w('a', { role: 'prefill' }), w('b')] })).toMatch(/^workers\[0\]\.role: is prefill but model "m" sets no disaggregation/);
    expect(failure({ models: [model({ engine: 'trt' })], workers: [] })).toMatch(/^models\[0\]\.engine: must be one of vllm, sglang/);
    expect(failure({ models: [model({ disaggregation: { min_remote_prefill_tokens: -1 } })] })).toMatch(/^models\[0\]\.disaggregation\.min_remote_prefill_tokens: must be >= 0/);
    expect(failure({ models: [model({ disaggregation: { threshold: 3 } })] })).toMatch(/^models\[0\]\.disaggregation\.threshold: unknown field/);
    expect(failure({ models: [model()], workers: [w('p', { role: 'prefill', bootstrap_port: 8998 }), w('dd', { role: 'decode' })] })).toMatch(
      /^workers\[0\]\.bootstrap_port: is the bootstrap port of an SGLang prefill server; this worker is a vllm prefill worker/,
    );
    expect(failure({ models: [model()], workers: [w('p', { role: 'prefill', engine: 'sglang' }), w('dd', { role: 'decode' })] })).toMatch(
      /^workers\[0\]\.engine: is sglang but model "m" is served by vllm/,
    );
  });

  it('a disaggregated fleet needs a prefill side and a decode side on two workers', () => {
    expect(failure({ models: [model()], workers: [w('p', { role: 'prefill' }), w('q', { role: 'prefill' })] })).toMatch(
      /^models\[0\]\.disaggregation: model "m" disaggregates but none of its workers \(p, q\) has role decode or both/,
    );
    expect(failure({ models: [model()], workers: [w('dd', { role: 'decode' })] })).toMatch(/has role prefill or both/);
    expect(failure({ models: [model()], workers: [w('b')] })).toMatch(/has one worker \(b\): a handoff needs a prefill and a decode worker/);
    expect(failure({ disaggregation: {}, workers: [w('dd', { role: 'decode' })] })).toMatch(/^disaggregation: model "m" disaggregates/);
    // Declared without workers: they come through the admin API.
    expect(validateConfig({ models: [model()] }).workers).toEqual([]);
  });

  it('the admin API checks a worker against its model', () => {
    const { models } = validateConfig({ models: [model(), { name: 'plain' }] });
    expect(validateWorker(w('p', { role: 'prefill' }), models).role).toBe('prefill');
    expect(() => validateWorker(w('p', { role: 'decode', model: 'plain' }), models)).toThrow(/^worker\.role: is decode but model "plain" sets no disaggregation/);
  });
});
