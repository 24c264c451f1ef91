// A Hugging Face model directory: tokenizer.json, tokenizer_config.json (chat
// template, bos/eos and other special tokens) and, when present,
// chat_template.jinja, which takes precedence over the config's template as
// it does in transformers.
//
// The tokenizer runs on the wasm byte-pair kernel when its shape is one
// hf-byte-level.ts reproduces exactly and a self-check on probe texts finds
// the same ids as @huggingface/tokenizers; otherwise on @huggingface/tokenizers.
import { Tokenizer } from '@huggingface/tokenizers';
import { byteLevelEncoder, byteLevelModel } from './hf-byte-level.js';
import { sameIds, splitCodec, type TextCodec } from './prompt-encoder.js';
import { probeTexts } from './probes.js';
import { SpecialSplitter, type SpecialToken } from './special-split.js';
import type { TokenizerIO } from './types.js';

export interface HfModel {
  codec: TextCodec;
  /** Ids the tokenizer adds around a raw prompt (BOS, EOS), as the engine does for completions. */
  affixes: { before: number[]; after: number[] };
  /** Chat templates by name ("default", and e.g. "tool_use"); empty when the model has none. */
  templates: Map<string, string>;
  /** Values templates read besides the conversation: bos_token, eos_token, ... */
  globals: Record<string, unknown>;
  /** Contents of the special tokens, for the tokenization self-check. */
  specialTexts: string[];
  /** What encodes: the wasm kernel, or @huggingface/tokenizers and why. */
  engine: string;
}

/**
 * Texts the kernel must encode as @huggingface/tokenizers does before it is
 * trusted with a model: every class of character the pre-tokenizer regexes
 * tell apart, contractions in both cases, runs, and text that NFC changes.
 */
const ENGINE_PROBES = [
  "I'm sure you're right, it's John's and we'll see; I'D SAY THEY'VE, 'LL 'Re 'vE",
  'x = 12345678 + 3.14159; 00007 １２３ ٣٤٥',
  'a  b   c\n\n\t\td \r\n e  \u00a0\u3000 f \u0085g\ufeffh   ',
  '中文字符测试，日本語のテキスト、한국어 텍스트。',
  '😀🎉👍🏽🚀 👨‍👩‍👧 🇫🇷',
  'e\u0301 A\u030a \u1100\u1161 ﬁ Ω',
  '!@#$%^&*()[]{}<>  ...  --- ~~~ ```js\nconst x = {a: [1, 2]};\n```',
  'ab'.repeat(300) + ' ' + 'x'.repeat(700) + ' '.repeat(500) + '1'.repeat(50),
  'Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם नमस्ते दुनिया',
];

interface AddedTokenJson {
  id: number;
  content: string;
  special?: boolean;
  normalized?: boolean;
  lstrip?: boolean;
  rstrip?: boolean;
}

interface TokenizerJson {
  added_tokens?: AddedTokenJson[];
  normalizer?: unknown;
}

function joinPath(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

async function readJson(io: TokenizerIO, path: string, origin: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await io.readFile(path);
  } catch (err) {
    throw new Error(`${origin}: cannot read ${path}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`${origin}: ${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${origin}: ${path} must hold a JSON object`);
  return value as Record<string, unknown>;
}

async function readOptional(io: TokenizerIO, path: string, origin: string): Promise<string | undefined> {
  try {
    return await io.readFile(path);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return undefined;
    throw new Error(`${origin}: cannot read ${path}: ${(err as Error).message}`);
  }
}

/** Special tokens in tokenizer_config.json are strings or {content: string} objects. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return undefined;
}

function chatTemplates(config: Record<string, unknown>, file: string | undefined, origin: string): Map<string, string> {
  const templates = new Map<string, string>();
  if (file !== undefined) {
    templates.set('default', file);
    return templates;
  }
  const t = config.chat_template;
  if (t === undefined || t === null) return templates;
  if (typeof t === 'string') templates.set('default', t);
  else if (Array.isArray(t)) {
    for (const [i, entry] of t.entries()) {
      const { name, template } = (entry ?? {}) as { name?: unknown; template?: unknown };
      if (typeof name !== 'string' || typeof template !== 'string') {
        throw new Error(`${origin}: tokenizer_config.json chat_template[${i}] must have string name and template`);
      }
      templates.set(name, template);
    }
  } else throw new Error(`${origin}: tokenizer_config.json chat_template must be a string or a list of named templates`);
  return templates;
}

/**
 * The added tokens the tokenizer splits raw text at before normalizing (the
 * same rule as @huggingface/tokenizers: an added token is matched on raw
 * text unless it is marked normalized and the tokenizer has a normalizer).
 */
function rawSplitTokens(json: TokenizerJson): SpecialToken[] {
  const hasNormalizer = json.normalizer !== null && json.normalizer !== undefined;
  return (json.added_tokens ?? [])
    .filter((t) => !((t.normalized ?? !(t.special ?? false)) && hasNormalizer))
    .map((t) => ({ content: t.content, id: t.id, lstrip: t.lstrip ?? false, rstrip: t.rstrip ?? false }));
}

/** Finds what encode(text, add_special_tokens) adds around the text's own ids. */
function findAffixes(tokenizer: Tokenizer): { before: number[]; after: number[] } {
  const plain: number[] = tokenizer.encode('probe', { add_special_tokens: false }).ids;
  const full: number[] = tokenizer.encode('probe', { add_special_tokens: true }).ids;
  for (let at = 0; at + plain.length <= full.length; at++) {
    if (plain.every((id, i) => full[at + i] === id)) return { before: full.slice(0, at), after: full.slice(at + plain.length) };
  }
  return { before: [], after: [] };
}

export async function loadHfModel(dir: string, io: TokenizerIO): Promise<HfModel> {
  const origin = `hf:${dir}`;
  const json = await readJson(io, joinPath(dir, 'tokenizer.json'), origin);
  const config = await readJson(io, joinPath(dir, 'tokenizer_config.json'), origin);
  const templateFile = await readOptional(io, joinPath(dir, 'chat_template.jinja'), origin);
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(json, config);
  } catch (err) {
    throw new Error(`${origin}: tokenizer.json does not load: ${(err as Error).message}`);
  }
  const splitTokens = rawSplitTokens(json as TokenizerJson);
  const globals: Record<string, unknown> = {};
  for (const name of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
    const text = tokenText(config[name]);
    if (text !== undefined) globals[name] = text;
  }
  const splitter = new SpecialSplitter(splitTokens);
  const library: TextCodec = {
    splitter,
    encodePiece: (piece) => tokenizer.encode(piece, { add_special_tokens: false }).ids,
    encodeWhole: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
  };
  const chosen = chooseCodec(json, splitter, library, [...ENGINE_PROBES, ...probeTexts(splitTokens.map((t) => t.content))]);
  return {
    codec: chosen.codec,
    affixes: findAffixes(tokenizer),
    templates: chatTemplates(config, templateFile, origin),
    globals,
    specialTexts: splitTokens.map((t) => t.content),
    engine: chosen.engine,
  };
}

const LIBRARY = '@huggingface/tokenizers';

/**
 * The kernel's codec for the model when it takes the model's shape and
 * agrees with the library on every probe; else the library's, with why.
 */
export function chooseCodec(json: Record<string, unknown>, splitter: SpecialSplitter, library: TextCodec, probes: readonly string[]): { codec: TextCodec; engine: string } {
  const model = byteLevelModel(json);
  if (typeof model === 'string') return { codec: library, engine: `${LIBRARY} (not byte-level BPE the kernel reproduces: ${model})` };
  let encodePiece: (text: string) => Uint32Array;
  try {
    encodePiece = byteLevelEncoder(model);
  } catch (err) {
    return { codec: library, engine: `${LIBRARY} (the kernel refused the vocabulary: ${(err as Error).message})` };
  }
  const codec = splitCodec(splitter, encodePiece);
  for (const probe of probes) {
    if (!sameIds(codec.encodeWhole(probe), library.encodeWhole(probe))) {
      return { codec: library, engine: `${LIBRARY} (the kernel differed on the probe ${JSON.stringify(probe.slice(0, 60))})` };
    }
  }
  return { codec, engine: 'wasm byte-pair kernel (merge list)' };
}
