// How many placeholder tokens an engine gives an image: Qwen2-VL's smart
// resize (sides rounded to multiples of patch x merge = 28 pixels, area kept
// within [min_pixels, max_pixels]) and fixed counts. Every expected count is
// worked out by hand in the comment beside it.
import { describe, expect, it } from 'vitest';
import { familyDefaults, imageTokenCount, smartResize, type MultimodalConfig, type SmartResizeImages } from '../../router/multimodal/placeholders.js';

const qwen = familyDefaults('qwen2-vl') as SmartResizeImages;
const count = (width: number, height: number, config: MultimodalConfig = qwen) => imageTokenCount(config, { width, height });

describe('Qwen2-VL / Qwen2.5-VL placeholder runs', () => {
  it('gives a 224 x 224 image 64 tokens', () => {
    // 224 = 8 x 28, inside the bounds: 16 x 16 patches of 14 pixels, 4 per token.
    expect(count(224, 224)).toBe(64);
  });

  it('gives a 640 x 480 image 391 tokens', () => {
    // height 480 / 28 = 17.14 -> 17 x 28 = 476; width 640 / 28 = 22.86 -> 23 x 28 = 644; 34 x 46 patches / 4 = 391.
    expect(smartResize(480, 640, 28, 3136, 12845056)).toEqual([476, 644]);
    expect(count(640, 480)).toBe(391);
  });

  it('rounds a side that is an exact half to the even multiple, as Python does', () => {
    // 70 / 28 = 2.5 -> 2 (half to even; rounding half up would give 3 x 28 = 84 and 9 tokens): 56 x 56 = 3136 = min_pixels, 4 x 4 patches / 4.
    expect(smartResize(70, 70, 28, 3136, 12845056)).toEqual([56, 56]);
    expect(count(70, 70)).toBe(4);
    // 42 / 28 = 1.5 -> 2: 56 x 56 as well.
    expect(count(42, 42)).toBe(4);
  });

  it('scales a small image up to min_pixels', () => {
    // 40 x 30 rounds to 28 x 28 = 784 < 3136: beta = sqrt(3136 / 1200) = 1.6166; ceil(30 x 1.6166 / 28) = 2 -> 56, ceil(40 x 1.6166 / 28) = 3 -> 84; 4 x 6 patches / 4 = 6.
    expect(smartResize(30, 40, 28, 3136, 12845056)).toEqual([56, 84]);
    expect(count(40, 30)).toBe(6);
  });

  it('scales a large image down to max_pixels', () => {
    // 8000 x 6000 rounds to 8008 x 5992 = 47,983,936 > 12,845,056: beta = sqrt(48,000,000 / 12,845,056) = 1.93309;
    // floor(6000 / 1.93309 / 28) = 110 -> 3080, floor(8000 / 1.93309 / 28) = 147 -> 4116; 220 x 294 patches / 4 = 16170.
    expect(smartResize(6000, 8000, 28, 3136, 12845056)).toEqual([3080, 4116]);
    expect(count(8000, 6000)).toBe(16170);
  });

  it('follows a deployment\'s own max_pixels', () => {
    // max_pixels 1280 x 28 x 28 = 1,003,520; 1920 x 1080 rounds to 1932 x 1092 = 2,109,744, over it: beta = sqrt(2,073,600 / 1,003,520) = 1.43747;
    // floor(1080 / 1.43747 / 28) = 26 -> 728, floor(1920 / 1.43747 / 28) = 47 -> 1316; 52 x 94 patches / 4 = 1222.
    expect(count(1920, 1080, { ...qwen, maxPixels: 1280 * 28 * 28 })).toBe(1222);
    expect(count(1920, 1080)).toBe((1092 / 14) * (1932 / 14) / 4);
  });

  it('refuses an aspect ratio over 200, as the processor does, and needs a size', () => {
    expect(() => count(201 * 28, 28)).toThrow(RangeError);
    expect(count(200 * 28, 28)).toBeGreaterThan(0);
    expect(imageTokenCount(qwen, null)).toBeNull();
  });
});

describe('fixed placeholder runs', () => {
  it('gives every LLaVA-1.5 image 576 tokens, with or without a size', () => {
    const llava = familyDefaults('llava');
    expect(imageTokenCount(llava, null)).toBe(576);
    expect(imageTokenCount(llava, { width: 4000, height: 10 })).toBe(576);
  });

  it('maps qwen2.5-vl to the Qwen2-VL processor', () => {
    expect(familyDefaults('qwen2.5-vl')).toEqual(familyDefaults('qwen2-vl'));
  });
});
