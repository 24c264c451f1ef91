// tiktoken encodings shipped inside js-tiktoken, extended with the ChatML
// markers as special tokens (ids just above the vocabulary).
import { Tiktoken, type TiktokenBPE } from 'js-tiktoken/lite';
import { IM_END, IM_START } from './chatml.js';
import type { TextCodec } from './prompt-encoder.js';
import { SpecialSplitter } from './special-split.js';

const ENCODINGS: Record<string, () => Promise<{ default: TiktokenBPE }>> = {
  o200k_base: () => import('js-tiktoken/ranks/o200k_base'),
  cl100k_base: () => import('js-tiktoken/ranks/cl100k_base'),
  p50k_base: () => import('js-tiktoken/ranks/p50k_base'),
  p50k_edit: () => import('js-tiktoken/ranks/p50k_edit'),
  r50k_base: () => import('js-tiktoken/ranks/r50k_base'),
  gpt2: () => import('js-tiktoken/ranks/gpt2'),
};

export const TIKTOKEN_ENCODINGS: readonly string[] = Object.keys(ENCODINGS);

/** The largest id the ranks assign: lines are "<tag> <first id> <token> <token> ...". */
function maxRank(ranks: TiktokenBPE): number {
  let max = -1;
  for (const line of ranks.bpe_ranks.split('\n')) {
    if (line.length === 0) continue;
    const fields = line.split(' ');
    max = Math.max(max, Number.parseInt(fields[1]!, 10) + fields.length - 3);
  }
  for (const id of Object.values(ranks.special_tokens)) max = Math.max(max, id);
  return max;
}

// Parsing an encoding takes ~1 s for o200k_base; tokenizers of one process share it.
const loaded = new Map<string, Promise<TextCodec>>();

export function loadTiktoken(encoding: string): Promise<TextCodec> {
  const load = ENCODINGS[encoding];
  if (load === undefined) {
    return Promise.reject(new RangeError(`unknown tiktoken encoding "${encoding}": expected one of ${TIKTOKEN_ENCODINGS.join(', ')}`));
  }
  let codec = loaded.get(encoding);
  if (codec === undefined) {
    codec = load().then(({ default: ranks }) => tiktokenCodec(ranks));
    loaded.set(encoding, codec);
  }
  return codec;
}

function tiktokenCodec(ranks: TiktokenBPE): TextCodec {
  const first = maxRank(ranks) + 1;
  const markers = { [IM_START]: first, [IM_END]: first + 1 };
  const encoder = new Tiktoken(ranks, markers);
  const specials = { ...ranks.special_tokens, ...markers };
  return {
    splitter: new SpecialSplitter(Object.entries(specials).map(([content, id]) => ({ content, id }))),
    // Pieces hold no special token, so none needs to be allowed.
    encodePiece: (piece) => encoder.encode(piece, [], []),
    encodeWhole: (text) => encoder.encode(text, 'all'),
  };
}
