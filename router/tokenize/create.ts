// Builds a PromptTokenizer from a spec string:
//   tiktoken:<encoding>  an encoding shipped in js-tiktoken, with the ChatML template
//   hf:<dir>             a model directory (tokenizer.json, tokenizer_config.json, chat_template.jinja)
//   bytes                UTF-8 bytes packed 4 per id, with the ChatML template
// and runs the self-checks that pick incremental or whole tokenization and
// segmented or whole rendering.
import { packBytes } from './bytes.js';
import { ChatRenderer, type NativeTemplate } from './chat-renderer.js';
import { ChatTokenizer, settledPlan, type TextToIds } from './chat-tokenizer.js';
import { CHATML_NATIVE } from './chatml.js';
import { loadHfModel } from './hf.js';
import { probeConversations, probeTexts } from './probes.js';
import { joinIds, PromptEncoder, type EncodePlan, type TextCodec } from './prompt-encoder.js';
import { loadTiktoken } from './tiktoken.js';
import type { PromptTokenizer, TokenizerIO, TokenizerOptions } from './types.js';

export const DEFAULT_TOKENIZER_SPEC = 'tiktoken:o200k_base';
const DEFAULT_CACHE_TOKENS = 2_000_000;

function bounds(options: TokenizerOptions | undefined): { cacheTokens: number; renderCacheChars: number } {
  const cacheTokens = options?.cacheTokens ?? DEFAULT_CACHE_TOKENS;
  if (!Number.isSafeInteger(cacheTokens) || cacheTokens < 0) throw new RangeError(`cacheTokens must be a non-negative integer (got ${cacheTokens})`);
  const renderCacheChars = options?.renderCacheChars ?? 4 * cacheTokens;
  if (!Number.isSafeInteger(renderCacheChars) || renderCacheChars < 0) {
    throw new RangeError(`renderCacheChars must be a non-negative integer (got ${renderCacheChars})`);
  }
  return { cacheTokens, renderCacheChars };
}

/** Renderers for each template, each self-checked for separability. */
function renderersFor(templates: Map<string, string | NativeTemplate>, globals: Record<string, unknown>, cacheChars: number, origin: string): Map<string, ChatRenderer> {
  const out = new Map<string, ChatRenderer>();
  const probes = probeConversations();
  for (const [name, source] of templates) {
    const renderer = new ChatRenderer(source, globals, cacheChars, templates.size > 1 ? `${origin} (template ${name})` : origin);
    renderer.selfCheck(probes);
    out.set(name, renderer);
  }
  return out;
}

/** Tokenization probes: the probe conversations rendered by each template, and raw texts around every special token. */
function tokenizationProbes(renderers: Map<string, ChatRenderer>, specials: readonly string[]): string[] {
  const texts = probeTexts(specials);
  for (const r of renderers.values()) {
    for (const probe of probeConversations()) {
      try {
        texts.push(r.renderWhole(probe));
      } catch {
        // a template may reject a probe (e.g. role alternation); others cover it
      }
    }
  }
  return texts;
}

function encoderFor(codec: TextCodec, cacheTokens: number, renderers: Map<string, ChatRenderer>): PromptEncoder {
  const encoder = new PromptEncoder(codec, cacheTokens);
  encoder.selfCheck(tokenizationProbes(renderers, codec.splitter.tokens.map((t) => t.content)));
  encoder.cache.clear(); // probes are no traffic
  return encoder;
}

/**
 * The codec of a spec alone (no templates, no caches): what another thread
 * needs to encode a plan's texts exactly as the spec's tokenizer would.
 * `bytes` has none.
 */
export async function loadTextCodec(spec: string, io: TokenizerIO): Promise<TextCodec | null> {
  if (spec === 'bytes') return null;
  if (spec.startsWith('tiktoken:')) return loadTiktoken(spec.slice('tiktoken:'.length));
  if (spec.startsWith('hf:') && spec.length > 'hf:'.length) return (await loadHfModel(spec.slice('hf:'.length), io)).codec;
  throw new RangeError(`unknown tokenizer spec "${spec}": expected tiktoken:<encoding>, hf:<dir> or bytes`);
}

export async function createTokenizer(spec: string, io: TokenizerIO, options?: TokenizerOptions): Promise<PromptTokenizer> {
  if (typeof spec !== 'string') throw new TypeError('tokenizer spec must be a string');
  const { cacheTokens, renderCacheChars } = bounds(options);
  // The shipped ChatML template runs as code (renderChatml equals CHATML_TEMPLATE under Jinja).
  const chatml = () => new Map<string, NativeTemplate>([['default', CHATML_NATIVE]]);

  if (spec === 'bytes') {
    const renderers = renderersFor(chatml(), {}, renderCacheChars, spec);
    const ids: TextToIds = { mode: 'whole', engine: 'UTF-8 bytes, 4 per id', chat: (parts) => settledPlan(() => packBytes(parts.join(''))), raw: (text) => settledPlan(() => packBytes(text)) };
    return new ChatTokenizer(spec, renderers, ids);
  }
  if (spec.startsWith('tiktoken:')) {
    const codec = await loadTiktoken(spec.slice('tiktoken:'.length));
    const renderers = renderersFor(chatml(), {}, renderCacheChars, spec);
    const encoder = encoderFor(codec, cacheTokens, renderers);
    return new ChatTokenizer(spec, renderers, {
      get mode() {
        return encoder.mode;
      },
      engine: 'wasm byte-pair kernel (tiktoken ranks)',
      chat: (parts) => encoder.plan(parts),
      raw: (text) => encoder.plan([text]),
      encoder,
    });
  }
  if (spec.startsWith('hf:')) {
    const dir = spec.slice('hf:'.length);
    if (dir.length === 0) throw new RangeError('tokenizer spec "hf:" needs a model directory: hf:<dir>');
    const model = await loadHfModel(dir, io);
    const renderers = renderersFor(model.templates, model.globals, renderCacheChars, spec);
    const encoder = encoderFor(model.codec, cacheTokens, renderers);
    const { before, after } = model.affixes;
    const raw = (text: string): EncodePlan => {
      const body = encoder.plan([text]);
      if (before.length === 0 && after.length === 0) return body;
      return { ...body, finish: (encoded) => joinIds([...before, body.finish(encoded), ...after]) };
    };
    return new ChatTokenizer(spec, renderers, {
      get mode() {
        return encoder.mode;
      },
      engine: model.engine,
      chat: (parts) => encoder.plan(parts),
      raw,
      encoder,
    });
  }
  throw new RangeError(`unknown tokenizer spec "${spec}": expected tiktoken:<encoding>, hf:<dir> or bytes`);
}
