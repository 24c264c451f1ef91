// Why a worker rank's cache hits are wrong or missing, as the router can tell
// from what it sees: each cause names what was observed and what to change.
// The diagnose endpoint, the doctor command and the log lines all read this
// one catalogue, so a fix is worded once.

export type Verdict = 'ok' | 'silent' | 'stale' | 'mismatch';

/** Worst first: the order verdicts are listed in. */
export const VERDICT_ORDER: readonly Verdict[] = ['mismatch', 'silent', 'stale', 'ok'];

export type Cause = 'block_size' | 'tokenizer' | 'cached_tokens' | 'unknown_rank' | 'no_events' | 'stream_lost';

export interface CauseInfo {
  verdict: Verdict;
  /** What the router saw, in a few words. */
  title: string;
  /** What to change. */
  fix: string;
}

export const CAUSES: Record<Cause, CauseInfo> = {
  block_size: {
    verdict: 'mismatch',
    title: "the engine's KV block size differs from the model's block_size",
    fix:
      "Set the model's block_size in the router config to the engine's block size (vLLM --block-size, SGLang --page-size), " +
      'or start the engine with the block size the router is configured with. Blocks of another size never match.',
  },
  tokenizer: {
    verdict: 'mismatch',
    title: 'the tokens the engine stores never reproduce the prompts the router routed to it',
    fix:
      "Point the model's tokenizer at the engine's own (hf:<dir> with the model's tokenizer.json and tokenizer_config.json, " +
      'so the chat template matches too), and check that no LoRA adapter or cache salt is applied on one side only.',
  },
  cached_tokens: {
    verdict: 'mismatch',
    title: "the engine's reported cached tokens disagree with the router's predicted overlap",
    fix:
      'The router predicts a different prefix than the engine finds: check block_size, the tokenizer and the hash seed ' +
      "(the engine's PYTHONHASHSEED / prefix-caching hash algorithm), and that the engine publishes every KV event " +
      '(including evictions).',
  },
  unknown_rank: {
    verdict: 'mismatch',
    title: 'KV events arrived for a data-parallel rank the config does not give this endpoint',
    fix:
      "Set the worker's data_parallel_size to the engine's, and give kv_events.endpoint the port of rank 0: the router " +
      'subscribes to rank r on port + r, as vLLM offsets its publishers. An engine whose ranks publish elsewhere needs one worker entry per port.',
  },
  no_events: {
    verdict: 'silent',
    title: 'requests were sent to this rank, but no KV events arrived',
    fix:
      'Start the engine with KV events on (vLLM: --kv-events-config \'{"enable_kv_cache_events": true, "publisher": "zmq", ' +
      '"endpoint": "tcp://*:5557"}\' and prefix caching on; SGLang: --kv-events-config), and check that kv_events.endpoint and ' +
      'topic in the router config name that publisher and that the port is reachable from the router.',
  },
  stream_lost: {
    verdict: 'stale',
    title: 'the KV event stream lost batches it could not replay (or the engine restarted), so this rank was cleared',
    fix:
      "Give the worker kv_events.replay_endpoint (vLLM's replay socket) so gaps are refilled, and check the network between " +
      'the engine and the router; the cache view rebuilds as new events arrive.',
  },
};
