// A model's multimodal section: a family's defaults, fields overriding them,
// inheritance from the top level, and errors naming the field.
import { describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { injectsUuids } from '../../server/request/image-uuids.js';
import { configFailure as failure } from '../helpers/config-failure.js';

const worker = (over: Record<string, unknown> = {}) => ({ id: 'w0', url: 'http://10.0.0.5:8000', model: 'vl', ...over });
const multimodalOf = (doc: Record<string, unknown>) => configFromDocument(doc, {}).models.map((m) => m.multimodal);

describe('multimodal', () => {
  it('is off unless configured', () => {
    expect(multimodalOf({ workers: [worker()] })).toEqual([null]);
  });

  it("takes Qwen2-VL's processor defaults from the family", () => {
    expect(multimodalOf({ models: [{ name: 'vl', multimodal: { family: 'qwen2.5-vl' } }], workers: [worker()] })).toEqual([
      {
        kind: 'qwen2-vl',
        placeholder: '<|vision_start|><|image_pad|><|vision_end|>',
        imageToken: '<|image_pad|>',
        contentFormat: 'openai',
        patchSize: 14,
        mergeSize: 2,
        minPixels: 3136,
        maxPixels: 12845056,
        fetchImages: null,
        injectUuid: null,
      },
    ]);
  });

  it('fetches http(s) images to size them only when asked, within limits', () => {
    const [on, limited, off] = multimodalOf({
      models: [
        { name: 'vl', multimodal: { family: 'qwen2-vl', fetch_images: true } },
        { name: 'b', multimodal: { family: 'qwen2-vl', fetch_images: { timeout_ms: 500, max_bytes: 65536 } } },
        { name: 'c', multimodal: { family: 'qwen2-vl', fetch_images: false } },
      ],
      workers: [worker(), worker({ id: 'w1', model: 'b' }), worker({ id: 'w2', model: 'c' })],
    });
    expect(on!.fetchImages).toEqual({ timeoutMs: 2000, maxBytes: 1048576 });
    expect(limited!.fetchImages).toEqual({ timeoutMs: 500, maxBytes: 65536 });
    expect(off!.fetchImages).toBeNull();
    expect(failure({ models: [{ name: 'vl', multimodal: { family: 'qwen2-vl', fetch_images: { timeout_ms: 0 } } }], workers: [worker()] })).toMatch(
      /^models\[0\]\.multimodal\.fetch_images\.timeout_ms: must be >= 1/,
    );
    expect(failure({ models: [{ name: 'vl', multimodal: { family: 'qwen2-vl', fetch_images: 'yes' } }], workers: [worker()] })).toMatch(/^models\[0\]\.multimodal\.fetch_images: /);
  });

  it("overrides a family's fields, is inherited from the top level, and is turned off per model with false", () => {
    const [a, b] = multimodalOf({
      multimodal: { family: 'qwen2-vl', max_pixels: 1003520 },
      models: [{ name: 'vl' }, { name: 'text', multimodal: false }],
      workers: [worker(), worker({ id: 'w1', model: 'text' })],
    });
    expect(a).toMatchObject({ kind: 'qwen2-vl', maxPixels: 1003520, minPixels: 3136 });
    expect(b).toBeNull();
  });

  it('gives LLaVA 576 tokens an image, and a fixed family the count it names', () => {
    const [llava, fixed] = multimodalOf({
      models: [
        { name: 'vl', multimodal: { family: 'llava' } },
        { name: 'other', multimodal: { family: 'fixed', placeholder: '<img><IMG_CONTEXT></img>', image_token: '<IMG_CONTEXT>', image_tokens: 256 } },
      ],
      workers: [worker(), worker({ id: 'w1', model: 'other' })],
    });
    expect(llava).toEqual({ kind: 'fixed', placeholder: '<image>', imageToken: '<image>', contentFormat: 'string', imageTokens: 576, fetchImages: null, injectUuid: null });
    expect(fixed).toMatchObject({ kind: 'fixed', imageTokens: 256, contentFormat: 'string' });
  });

  it('sets the uuid of forwarded images as configured, else for a vLLM model only', () => {
    const models = [
      { name: 'vl', multimodal: { family: 'qwen2-vl' } },
      { name: 'sg', engine: 'sglang', multimodal: { family: 'qwen2-vl' } },
      { name: 'off', multimodal: { family: 'qwen2-vl', inject_uuid: false } },
      { name: 'on', engine: 'sglang', multimodal: { family: 'qwen2-vl', inject_uuid: true } },
      { name: 'text' },
    ];
    const config = configFromDocument({ models, workers: models.map((m, i) => worker({ id: `w${i}`, model: m.name })) }, {});
    expect(config.models.map((m) => injectsUuids(m.multimodal, m.engine))).toEqual([true, false, false, true, false]);
    expect(failure({ models: [{ name: 'vl', multimodal: { family: 'qwen2-vl', inject_uuid: 'yes' } }], workers: [worker()] })).toMatch(
      /^models\[0\]\.multimodal\.inject_uuid: must be true or false/,
    );
  });

  it('names the field of a bad section', () => {
    const doc = (multimodal: unknown) => ({ models: [{ name: 'vl', multimodal }], workers: [worker()] });
    expect(failure(doc({}))).toMatch(/^models\[0\]\.multimodal\.family: /);
    expect(failure(doc({ family: 'gpt-5' }))).toMatch(/^models\[0\]\.multimodal\.family: /);
    expect(failure(doc({ family: 'fixed', placeholder: '<image>', image_token: '<image>' }))).toMatch(/^models\[0\]\.multimodal\.image_tokens: /);
    expect(failure(doc({ family: 'qwen2-vl', min_pixels: 5000, max_pixels: 4000 }))).toMatch(/^models\[0\]\.multimodal\.max_pixels: must be at least min_pixels/);
    expect(failure(doc({ family: 'qwen2-vl', placeholder: '<image>' }))).toMatch(/^models\[0\]\.multimodal\.placeholder: must contain image_token/);
    expect(failure(doc({ family: 'llava', patch_size: 14 }))).toMatch(/^models\[0\]\.multimodal\.patch_size: unknown field/);
    expect(failure(doc({ family: 'qwen2-vl', content_format: 'mixed' }))).toMatch(/^models\[0\]\.multimodal\.content_format: /);
  });
});
