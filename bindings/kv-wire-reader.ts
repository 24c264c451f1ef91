// KV-event batches read from their msgpack bytes in the wasm core
// (assembly/kv-wire.ts). scan() checks a payload against the layouts vLLM
// and SGLang publish and returns what the listener needs before the
// batch is applied (ts, dp_rank, event counts), or null for anything else:
// router/kv-wire.ts then decodes it in JS, accepting or rejecting it as it
// always has. Applying a scanned batch (tokens hashed, blocks stored, in one
// pass over the bytes) is PrefixIndex.applyWire, in the index's own core.
import { Core } from './core.js';

/** The core's wire* exports. */
export interface WireExports {
  wireInput(bytes: number): number;
  wireSummaryPtr(): number;
  wireScan(len: number): number;
  wireApply(slot: number, len: number, blockSize: number, seed: bigint): number;
}

/** wireApply outcomes (assembly/kv-wire.ts). */
export const WIRE_APPLIED = 0;
export const WIRE_NO_MEMORY_STORING = 1;
export const WIRE_NO_MEMORY_STAGING = 2;
export const WIRE_NOT_SCANNED = 3;
export const WIRE_NO_SCRATCH = 4;

/** What a scan found in a batch of the fast layout. */
export interface WireSummary {
  ts: number;
  dpRank: number | null;
  /** Events of each type. */
  stored: number;
  removed: number;
  cleared: number;
}

/** What applying a scanned batch did, event by event until it stopped. */
export interface WireTally {
  stored: number;
  /** Stores whose parent the worker did not hold. */
  skippedStores: number;
  blockSizeMismatches: number;
  removed: number;
  cleared: number;
  /** The hashes of the event that found no memory (0 when none did). */
  failedHashes: number;
}

/**
 * A core's wire buffer and summary, with views kept until memory grows: a
 * batch costs one copy and no view allocations.
 */
export class WireBuffer {
  private readonly summaryPtr: number;
  private generation = -1;
  private bytes: Uint8Array = new Uint8Array(0);
  private words: Uint32Array = new Uint32Array(0);
  private floats: Float64Array = new Float64Array(0);

  constructor(
    private readonly core: Core,
    private readonly k: WireExports,
  ) {
    this.summaryPtr = k.wireSummaryPtr() >>> 0;
  }

  /** Copies a payload into the wire buffer; false when the core has no memory for it. */
  stage(payload: Uint8Array): boolean {
    const ptr = this.k.wireInput(payload.length) >>> 0;
    if (ptr === 0) return false;
    this.views().bytes.set(payload, ptr);
    return true;
  }

  summary(): WireSummary {
    const { words, floats } = this.views();
    const rank = words[2]! | 0;
    return { ts: floats[0]!, dpRank: rank < 0 ? null : rank, stored: words[3]!, removed: words[4]!, cleared: words[5]! };
  }

  tally(): WireTally {
    const { words } = this.views();
    return { stored: words[6]!, skippedStores: words[7]!, blockSizeMismatches: words[8]!, removed: words[9]!, cleared: words[10]!, failedHashes: words[11]! };
  }

  private views(): this {
    const generation = this.core.generation;
    if (generation !== this.generation) {
      this.generation = generation;
      this.bytes = this.core.u8(0, this.core.memoryBytes);
      this.words = this.core.u32(this.summaryPtr, 12);
      this.floats = this.core.f64(this.summaryPtr, 1);
    }
    return this;
  }
}

export class WireReader {
  readonly core: Core;
  private readonly k: WireExports;
  private readonly buffer: WireBuffer;

  constructor(options: { core?: Core } = {}) {
    this.core = options.core ?? new Core();
    this.core.claim('wire-scan');
    this.k = this.core.kernel<WireExports>();
    this.buffer = new WireBuffer(this.core, this.k);
  }

  /** The batch's summary when it is of the fast layout, else null (decode it in JS). */
  scan(payload: Uint8Array): WireSummary | null {
    if (!this.buffer.stage(payload) || this.k.wireScan(payload.length) !== 1) return null;
    return this.buffer.summary();
  }
}
