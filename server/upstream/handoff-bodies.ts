// The request bodies of a prefill/decode handoff, as the engines' own proxies
// build them.
//
// vLLM (a KV connector such as NixlConnector on both sides): the prefill
// worker gets the request capped at one token, not streamed, with
// kv_transfer_params asking it to keep the prompt's KV for a remote decode;
// its answer carries kv_transfer_params naming where the blocks are
// (remote_engine_id, remote_block_ids, remote_host, remote_port, ...), and
// the decode worker gets the client's request with those params, which make
// it pull the blocks instead of computing them.
//
// SGLang (servers started with --disaggregation-mode prefill / decode): both
// get the same request at once, with the prefill server's bootstrap host and
// port and a fresh bootstrap room that pairs the two; the client reads the
// decode server's answer.
import { randomFillSync } from 'node:crypto';

export type JsonObject = Record<string, unknown>;

/** The prefill request of vLLM's flow. */
export function vllmPrefillBody(body: JsonObject): JsonObject {
  const out: JsonObject = {
    ...body,
    kv_transfer_params: {
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_engine_id: null,
      remote_block_ids: null,
      remote_host: null,
      remote_port: null,
    },
    stream: false,
    max_tokens: 1,
  };
  if ('max_completion_tokens' in out) out.max_completion_tokens = 1;
  // Streaming options and minimum lengths belong to the decode; a one-token prefill refuses a minimum above one.
  delete out.stream_options;
  delete out.min_tokens;
  delete out.min_completion_tokens;
  return out;
}

/**
 * The kv_transfer_params of a vLLM prefill answer: an object, or null when the
 * answer has none (a prompt shorter than one block has nothing to transfer,
 * and the decode worker computes it). Throws when the answer is not JSON.
 */
export function vllmTransferParams(answer: string): JsonObject | null {
  const parsed = JSON.parse(answer) as unknown;
  if (parsed === null || typeof parsed !== 'object') throw new SyntaxError('the prefill answer is not a JSON object');
  const params = (parsed as JsonObject).kv_transfer_params;
  return params !== null && typeof params === 'object' && !Array.isArray(params) && Object.keys(params).length > 0 ? (params as JsonObject) : null;
}

/** The decode request of vLLM's flow: the client's request with the prefill's params. */
export function vllmDecodeBody(body: JsonObject, params: JsonObject | null): JsonObject {
  return params ? { ...body, kv_transfer_params: params } : body;
}

/**
 * A bootstrap room: SGLang takes any integer in [0, 2^63); this one stays
 * below 2^53 so every JSON parser on the way reads it exactly.
 */
export function bootstrapRoom(): number {
  const words = randomFillSync(new Uint32Array(2));
  return (words[0]! & 0x1fffff) * 0x1_0000_0000 + words[1]!;
}

/** The request both SGLang servers get. */
export function sglangBody(body: JsonObject, host: string, port: number, room: number): JsonObject {
  return { ...body, bootstrap_host: host, bootstrap_port: port, bootstrap_room: room };
}
