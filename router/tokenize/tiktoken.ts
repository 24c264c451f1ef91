// tiktoken encodings (the rank files shipped inside js-tiktoken), encoded by
// the wasm core's byte-pair kernel and extended with the ChatML markers as
// special tokens (ids just above the vocabulary).
import type { TiktokenBPE } from 'js-tiktoken/lite';
import { BytePairEncoder } from '../../bindings/bpe.js';
import { IM_END, IM_START } from './chatml.js';
import { splitCodec, type TextCodec } from './prompt-encoder.js';
import { SpecialSplitter } from './special-split.js';
import { tiktokenVocabulary } from './tiktoken-vocabulary.js';

const ENCODINGS: Record<string, () => Promise<{ default: TiktokenBPE }>> = {
  o200k_base: () => import('js-tiktoken/ranks/o200k_base'),
  cl100k_base: () => import('js-tiktoken/ranks/cl100k_base'),
  p50k_base: () => import('js-tiktoken/ranks/p50k_base'),
  p50k_edit: () => import('js-tiktoken/ranks/p50k_edit'),
  r50k_base: () => import('js-tiktoken/ranks/r50k_base'),
  gpt2: () => import('js-tiktoken/ranks/gpt2'),
};

export const TIKTOKEN_ENCODINGS: readonly string[] = Object.keys(ENCODINGS);

/** The rank file of an encoding; a RangeError names the known ones. */
export function tiktokenRanks(encoding: string): Promise<TiktokenBPE> {
  const load = ENCODINGS[encoding];
  if (load === undefined) {
    return Promise.reject(new RangeError(`unknown tiktoken encoding "${encoding}": expected one of ${TIKTOKEN_ENCODINGS.join(', ')}`));
  }
  return load().then((m) => m.default);
}

/** The special tokens of an encoding: its own, and the ChatML markers on the two ids after the largest one. */
export function tiktokenSpecials(ranks: TiktokenBPE, largestRank: number): Record<string, number> {
  let largest = largestRank;
  for (const id of Object.values(ranks.special_tokens)) largest = Math.max(largest, id);
  return { ...ranks.special_tokens, [IM_START]: largest + 1, [IM_END]: largest + 2 };
}

// Tokenizers of one process (and one thread) share an encoding's vocabulary in the core.
const loaded = new Map<string, Promise<TextCodec>>();

export function loadTiktoken(encoding: string): Promise<TextCodec> {
  let codec = loaded.get(encoding);
  if (codec === undefined) {
    codec = tiktokenRanks(encoding).then(tiktokenCodec);
    loaded.set(encoding, codec);
    codec.catch(() => loaded.delete(encoding));
  }
  return codec;
}

function tiktokenCodec(ranks: TiktokenBPE): TextCodec {
  const vocab = tiktokenVocabulary(ranks);
  let largest = -1;
  for (const r of vocab.ranks) largest = Math.max(largest, r);
  const specials = tiktokenSpecials(ranks, largest);
  const splitter = new SpecialSplitter(Object.entries(specials).map(([content, id]) => ({ content, id })));
  const bpe = new BytePairEncoder(vocab);
  // Pieces hold no special token; a whole prompt has them split out first, as tiktoken does with every special allowed.
  return splitCodec(splitter, (piece) => bpe.encode(piece));
}
