// KV-event batches read from their msgpack bytes in the wasm core
// (assembly/kv-wire.ts). scan() checks a payload against the layouts vLLM
// and SGLang publish and parses it in the same pass (hashes as u64, each
// stored block's tokens hashed under the default seed), returning what the
// listener needs before the batch is applied (ts, dp_rank, event counts) and
// the parsed batch, or null for anything else: router/kv-wire.ts then decodes
// it in JS, accepting or rejecting it as it always has. Applying a parsed
// batch (no byte of the payload read again) is PrefixIndex.applyWire, in the
// index's own core.
import { Core } from './core.js';
import { DEFAULT_SEED } from './reference/hash-inputs.js';

/** The core's wire* exports. */
export interface WireExports {
  wireInput(bytes: number): number;
  wireSummaryPtr(): number;
  wireScan(len: number, seed: bigint): number;
  wireParsedPtr(): number;
  wireApply(slot: number, len: number, blockSize: number, seed: bigint): number;
}

/** wireApply outcomes (assembly/kv-wire.ts). */
export const WIRE_APPLIED = 0;
export const WIRE_NO_MEMORY_STORING = 1;
export const WIRE_NO_MEMORY_STAGING = 2;
export const WIRE_NOT_PARSED = 3;
export const WIRE_OTHER_SEED = 4;

/** What a scan found in a batch of the fast layout. */
export interface WireSummary {
  ts: number;
  dpRank: number | null;
  /** Events of each type. */
  stored: number;
  removed: number;
  cleared: number;
}

/** A payload the scan accepted: its summary, and the batch parsed (the seed, then a record per event; assembly/kv-wire.ts). */
export interface WireScan {
  summary: WireSummary;
  parsed: Uint8Array;
}

/** What applying a parsed batch did, event by event until it stopped. */
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
 * batch costs one copy in and no view allocations.
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

  /** Copies a payload (or a parsed batch) into the wire buffer; false when the core has no memory for it. */
  stage(payload: Uint8Array): boolean {
    const ptr = this.k.wireInput(payload.length) >>> 0;
    if (ptr === 0) return false;
    this.views().bytes.set(payload, ptr);
    return true;
  }

  /** A copy of the parsed batch the last scan wrote, of `length` bytes. */
  parsed(length: number): Uint8Array {
    const ptr = this.k.wireParsedPtr() >>> 0;
    return this.views().bytes.slice(ptr, ptr + length);
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

  /** The batch's summary and parsed form when it is of the fast layout, else null (decode it in JS). */
  scan(payload: Uint8Array): WireScan | null {
    if (!this.buffer.stage(payload)) return null;
    const length = this.k.wireScan(payload.length, DEFAULT_SEED);
    if (length === 0) return null;
    return { summary: this.buffer.summary(), parsed: this.buffer.parsed(length) };
  }
}
