// How a vision model's engine puts an image into the prompt's tokens: the
// text an image part renders as, the one token of it the engine's processor
// replaces by a run of that token, and how long the run is. The router
// reproduces the run so that its token ids (and the blocks the run falls
// in) are the engine's:
//  - qwen2-vl (Qwen2-VL, Qwen2.5-VL): the image is resized to multiples of
//    patch x merge pixels within [min_pixels, max_pixels] (the processor's
//    smart resize), and gets one token per merge x merge patches;
//  - fixed (LLaVA-1.5 and the like): every image gets the same count.
import type { PixelSize } from './image-size.js';

/**
 * How a message's text and image parts are joined into the text its
 * template renders: `openai` in order with nothing between (what a template
 * that iterates over the parts renders, as Qwen2-VL's does), `string` as vLLM
 * does for templates that read string content (every image's placeholder
 * first, then the texts, joined with "\n").
 */
export type ContentFormat = 'openai' | 'string';

interface PlaceholderText {
  /** What an image part renders as in the message's text. */
  placeholder: string;
  /** The token in it that the engine repeats (one token of the tokenizer). */
  imageToken: string;
  contentFormat: ContentFormat;
}

export interface SmartResizeImages extends PlaceholderText {
  kind: 'qwen2-vl';
  patchSize: number;
  mergeSize: number;
  minPixels: number;
  maxPixels: number;
}

export interface FixedImages extends PlaceholderText {
  kind: 'fixed';
  /** Tokens every image gets. */
  imageTokens: number;
}

export type MultimodalConfig = SmartResizeImages | FixedImages;

/** Families with their engines' defaults (the models' own preprocessor and processor configs). */
export const MULTIMODAL_FAMILIES = {
  // Qwen2-VL and Qwen2.5-VL share the processor: 14-pixel patches merged 2 x 2, 56 x 56 to 14 x 14 x 4 x 16384 pixels.
  'qwen2-vl': {
    kind: 'qwen2-vl',
    placeholder: '<|vision_start|><|image_pad|><|vision_end|>',
    imageToken: '<|image_pad|>',
    contentFormat: 'openai',
    patchSize: 14,
    mergeSize: 2,
    minPixels: 56 * 56,
    maxPixels: 14 * 14 * 4 * 16384,
  },
  // LLaVA-1.5: a 336-pixel CLIP tower with 14-pixel patches, 24 x 24 features for any image.
  llava: { kind: 'fixed', placeholder: '<image>', imageToken: '<image>', contentFormat: 'string', imageTokens: 576 },
} as const satisfies Record<string, MultimodalConfig>;

export type MultimodalFamily = keyof typeof MULTIMODAL_FAMILIES | 'qwen2.5-vl';

export function familyDefaults(family: MultimodalFamily): MultimodalConfig {
  return { ...MULTIMODAL_FAMILIES[family === 'qwen2.5-vl' ? 'qwen2-vl' : family] };
}

export const FAMILY_NAMES: readonly MultimodalFamily[] = [...(Object.keys(MULTIMODAL_FAMILIES) as MultimodalFamily[]), 'qwen2.5-vl'];

/** Python's round(): halves go to the even neighbour, as the processor's arithmetic does. */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff !== 0.5) return Math.round(x);
  return floor % 2 === 0 ? floor : floor + 1;
}

/**
 * The processor's resize of a height x width image: both sides multiples of
 * `factor`, the area within [minPixels, maxPixels], the aspect ratio kept as
 * near as that allows. Throws RangeError past an aspect ratio of 200, which
 * the processor refuses. Returns [height, width].
 */
export function smartResize(height: number, width: number, factor: number, minPixels: number, maxPixels: number): [number, number] {
  if (Math.max(height, width) / Math.min(height, width) > 200) {
    throw new RangeError(`an image of ${width} x ${height} pixels has an aspect ratio over 200, which the model's processor refuses`);
  }
  let h = roundHalfEven(height / factor) * factor;
  let w = roundHalfEven(width / factor) * factor;
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [h, w];
}

/** Whether the model's run for an image needs its pixel size. */
export function needsSize(config: MultimodalConfig): boolean {
  return config.kind === 'qwen2-vl';
}

/**
 * The tokens the engine gives one image (its run of image tokens), or null
 * when that needs a size that is not known. Throws RangeError for a size the
 * processor refuses.
 */
export function imageTokenCount(config: MultimodalConfig, size: PixelSize | null): number | null {
  if (config.kind === 'fixed') return config.imageTokens;
  if (size === null) return null;
  const factor = config.patchSize * config.mergeSize;
  const [h, w] = smartResize(size.height, size.width, factor, config.minPixels, config.maxPixels);
  // One temporal patch for a still image: (h / patch) x (w / patch) patches, merge^2 of them per token.
  return (h / config.patchSize) * (w / config.patchSize) / (config.mergeSize * config.mergeSize);
}
