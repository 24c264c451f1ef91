// KV cache events as engines publish them (vLLM and SGLang share the shapes),
// after decoding from the wire. Hashes are the engine's own block hashes,
// folded to unsigned 64-bit; the router recomputes its local hashes from the
// token ids and uses these only as ids for parent links and removals. The
// fields newer engines added are optional: absent reads as null.

/**
 * One media item (an image) a block's tokens cover, as the engine folds it
 * into that block's hash: the item's identifier and where its placeholder run
 * starts relative to the block's first token (negative when it began in an
 * earlier block).
 */
export interface MediaKey {
  id: string;
  offset: number;
}

export interface BlockStored {
  type: 'stored';
  /** One engine hash per stored block, in chain order. */
  blockHashes: bigint[];
  /** The engine hash of the block before the first one, or null at the root. */
  parentBlockHash: bigint | null;
  /**
   * Token ids of all stored blocks, concatenated (blockSize per block). Empty
   * for a placeholder store (an offloading tier that names its blocks only by
   * hash; blockSize is then 0). The simulated engine hands a typed array
   * (no per-token boxing on its hot path); the wire decoder a plain one.
   */
  tokenIds: readonly number[] | Uint32Array;
  blockSize: number;
  loraName: string | null;
  /** Storage tier, e.g. "GPU", "CPU", "STORAGE"; null when the engine omits it. */
  medium: string | null;
  /**
   * Per block, the extra keys the engine hashed it with, when it says (newer
   * vLLM): the LoRA name on every block of an adapter's chain, the cache salt
   * on a request's first block, media hashes, as tuples of strings, numbers,
   * lists or bytes. Absent or null: the engine did not send them.
   */
  extraKeys?: readonly (readonly unknown[] | null)[] | null;
  /**
   * Per block, the media items among its extra keys (null: none), or null when
   * it has none: what the router folds into its own hash of the block.
   */
  media?: (readonly MediaKey[] | null)[] | null;
  /** The KV cache group (hybrid models publish one per attention kind); null when the engine has one. */
  groupIdx?: number | null;
  /** The group's cache spec, e.g. "full_attention", "sliding_window", "mamba"; null when unsaid. */
  specKind?: string | null;
  /** The group's sliding window in tokens, when it has one. */
  slidingWindow?: number | null;
}

export interface BlockRemoved {
  type: 'removed';
  blockHashes: bigint[];
  medium: string | null;
  groupIdx?: number | null;
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
