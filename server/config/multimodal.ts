// A model's `multimodal` section: how its engine expands an image into
// placeholder tokens (router/multimodal/placeholders.ts). `family` picks the
// defaults of a known model family; every other field overrides one, as the
// model's own preprocessor config does (e.g. a deployment that lowers
// max_pixels). `multimodal: false` turns it off for one model.
// `fetch_images` lets the router read http(s) images' headers to size them
// (off by default: see docs/configuration.md). `inject_uuid` has the router
// give each image without a uuid its own identifier as the uuid it forwards
// (unset: on for a vLLM model; see server/request/image-uuids.ts).
import { FAMILY_NAMES, familyDefaults, type MultimodalConfig } from '../../router/multimodal/placeholders.js';
import type { ImageFetchLimits, ModelMultimodal } from '../request/image-fetch.js';
import { ConfigError, type Fields } from './fields.js';

export const FETCH_DEFAULTS: ImageFetchLimits = { timeoutMs: 2000, maxBytes: 1 << 20 };

function readFetch(f: Fields): ImageFetchLimits | null {
  const value = f.get('fetch_images');
  if (value === undefined || value === false) return null;
  if (value === true) return { ...FETCH_DEFAULTS };
  return f.object('fetch_images', (l) => ({
    timeoutMs: l.number('timeout_ms', FETCH_DEFAULTS.timeoutMs, { integer: true, min: 1, max: 60_000 }),
    maxBytes: l.number('max_bytes', FETCH_DEFAULTS.maxBytes, { integer: true, min: 64, max: 64 << 20 }),
  }));
}

const FAMILIES = [...FAMILY_NAMES, 'fixed'] as const;
const CONTENT_FORMATS = ['openai', 'string'] as const;

function readSection(f: Fields): ModelMultimodal {
  const images = readImages(f);
  const injectUuid = f.get('inject_uuid') === undefined ? null : f.boolean('inject_uuid', false);
  return Object.freeze({ ...images, fetchImages: readFetch(f), injectUuid });
}

function readImages(f: Fields): MultimodalConfig {
  const family = f.oneOf('family', FAMILIES);
  const d = family === 'fixed' ? null : familyDefaults(family);
  const text = (key: string, fallback: string | undefined) => {
    const value = f.string(key, fallback);
    if (value.length === 0) throw new ConfigError(f.at(key), 'must not be empty');
    return value;
  };
  const placeholder = {
    placeholder: text('placeholder', d?.placeholder),
    imageToken: text('image_token', d?.imageToken),
    contentFormat: f.oneOf('content_format', CONTENT_FORMATS, d?.contentFormat ?? 'string'),
  };
  if (d === null || d.kind === 'fixed') {
    const imageTokens = f.number('image_tokens', d?.imageTokens, { integer: true, min: 1, max: 1 << 20 });
    return checkPlaceholder(f, { kind: 'fixed', ...placeholder, imageTokens });
  }
  const size = (key: string, fallback: number) => f.number(key, fallback, { integer: true, min: 1, max: 1 << 12 });
  const pixels = (key: string, fallback: number) => f.number(key, fallback, { integer: true, min: 1 });
  const config: MultimodalConfig = {
    kind: 'qwen2-vl',
    ...placeholder,
    patchSize: size('patch_size', d.patchSize),
    mergeSize: size('merge_size', d.mergeSize),
    minPixels: pixels('min_pixels', d.minPixels),
    maxPixels: pixels('max_pixels', d.maxPixels),
  };
  if (config.maxPixels < config.minPixels) throw new ConfigError(f.at('max_pixels'), `must be at least min_pixels (${config.minPixels}), got ${config.maxPixels}`);
  return checkPlaceholder(f, config);
}

function checkPlaceholder(f: Fields, config: MultimodalConfig): MultimodalConfig {
  if (!config.placeholder.includes(config.imageToken)) {
    throw new ConfigError(f.at('placeholder'), `must contain image_token ${JSON.stringify(config.imageToken)}, got ${JSON.stringify(config.placeholder)}`);
  }
  if (config.placeholder.split(config.imageToken).length !== 2) {
    throw new ConfigError(f.at('placeholder'), `must contain image_token ${JSON.stringify(config.imageToken)} once, got ${JSON.stringify(config.placeholder)}`);
  }
  return config;
}

export function readMultimodal(f: Fields, inherited: ModelMultimodal | null): ModelMultimodal | null {
  if (!f.has('multimodal')) return inherited;
  if (f.get('multimodal') === false) return null;
  return f.object('multimodal', readSection);
}
