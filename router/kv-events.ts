// KV cache events as engines publish them (vLLM and SGLang share the shapes),
// after decoding from the wire. Hashes are the engine's own block hashes,
// folded to unsigned 64-bit; the router recomputes its local hashes from the
// token ids and uses these only as ids for parent links and removals.

export interface BlockStored {
  type: 'stored';
  /** One engine hash per stored block, in chain order. */
  blockHashes: bigint[];
  /** The engine hash of the block before the first one, or null at the root. */
  parentBlockHash: bigint | null;
  /** Token ids of all stored blocks, concatenated (blockSize per block). */
  tokenIds: number[];
  blockSize: number;
  loraName: string | null;
  /** Storage tier, e.g. "GPU" or "CPU"; null when the engine omits it. */
  medium: string | null;
  /**
   * Per block, the extra keys the engine hashed it with, when it says (newer
   * vLLM): the LoRA name on every block of an adapter's chain, the cache salt
   * on a request's first block, media hashes, as tuples of strings, numbers,
   * lists or bytes. Absent or null: the engine did not send them.
   */
  extraKeys?: readonly (readonly unknown[] | null)[] | null;
}

export interface BlockRemoved {
  type: 'removed';
  blockHashes: bigint[];
  medium: string | null;
}

export interface AllBlocksCleared {
  type: 'cleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** One published batch: what one ZeroMQ message (or one HTTP ingest body) carries. */
export interface KvEventBatch {
  /** Engine timestamp, seconds. */
  ts: number;
  events: KvEvent[];
  /** Data-parallel rank of the publishing engine, when it says. */
  dpRank: number | null;
}
