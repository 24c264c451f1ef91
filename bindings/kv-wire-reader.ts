// KV-event batches read from their msgpack bytes in the wasm core
// (assembly/kv-wire.ts). scan() checks a payload against the layouts vLLM
// and SGLang publish and parses it in the same pass (hashes as u64, each
// stored block's tokens hashed under the default seed), returning what the
// listener needs before the batch is applied (ts, dp_rank, event counts, and
// the device blocks and block sizes the diagnostics count), or
// null for anything else: router/kv-wire.ts then decodes it in JS, accepting
// or rejecting it as it always has. The parsed batch stays in the core, where
// parsed() finds it: a batch applied before the next scan (the listener's
// usual case) costs no copy out of the core, and one applied later (held for
// a replay) is parsed again from its payload. Applying a parsed batch (no
// byte of the payload read again) is PrefixIndex.applyWire, in the index's
// own core.
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

/** What a scan found in a batch of the fast layout (every event of which is of the device tier). */
export interface WireSummary {
  ts: number;
  dpRank: number | null;
  /** Events of each type. */
  stored: number;
  removed: number;
  cleared: number;
  /**
   * What the batch does to a count of device blocks held (stores add, removals
   * take away but never below 0, a clear empties it): h before the batch is
   * max(heldFloor, h + heldDelta) after it, or heldFloor when it has a clear
   * (heldAfter).
   */
  heldFloor: number;
  heldDelta: number;
  /** The block size of the batch's last store (0: no store). */
  lastBlockSize: number;
  /** Stores whose block size is not the first store's (0: every store has lastBlockSize). */
  mixedBlockSizes: number;
  /** Blocks the batch's stores hold, over all of them. */
  storedBlocks: number;
}

/** The device blocks held after a batch with this summary, `before` held before it. */
export function heldAfter(summary: WireSummary, before: number): number {
  return summary.cleared > 0 ? summary.heldFloor : Math.max(summary.heldFloor, before + summary.heldDelta);
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

  /** The parsed batch the last scan wrote, of `length` bytes: a view valid until the next scan. */
  parsed(length: number): Uint8Array {
    const ptr = this.k.wireParsedPtr() >>> 0;
    return this.views().bytes.subarray(ptr, ptr + length);
  }

  summary(): WireSummary {
    const { words, floats } = this.views();
    const rank = words[2]! | 0;
    return {
      ts: floats[0]!,
      dpRank: rank < 0 ? null : rank,
      stored: words[3]!,
      removed: words[4]!,
      cleared: words[5]!,
      heldFloor: words[12]!,
      heldDelta: words[13]! | 0,
      lastBlockSize: words[14]!,
      mixedBlockSizes: words[15]!,
      storedBlocks: words[16]!,
    };
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
      this.words = this.core.u32(this.summaryPtr, 17);
      this.floats = this.core.f64(this.summaryPtr, 1);
    }
    return this;
  }
}

/** A payload the scan accepted: its summary, and the ticket that finds its parsed batch (WireReader.parsed). */
export interface WireScan {
  summary: WireSummary;
  ticket: number;
}

export class WireReader {
  readonly core: Core;
  private readonly k: WireExports;
  private readonly buffer: WireBuffer;
  // Tickets handed out, the one whose parsed batch the core holds (0: none), and its length.
  private issued = 0;
  private held = 0;
  private length = 0;

  constructor(options: { core?: Core } = {}) {
    this.core = options.core ?? new Core();
    this.core.claim('wire-scan');
    this.k = this.core.kernel<WireExports>();
    this.buffer = new WireBuffer(this.core, this.k);
  }

  /** The batch's summary when it is of the fast layout, else null (decode it in JS). */
  scan(payload: Uint8Array): WireScan | null {
    const ticket = ++this.issued;
    return this.parse(payload, ticket) ? { summary: this.buffer.summary(), ticket } : null;
  }

  /**
   * The parsed batch of a payload scan() accepted under `ticket`: a view
   * valid until the next scan or parsed() call. The payload is parsed again
   * when a later scan took its place (the same bytes parse the same); null
   * when the core has no memory for that (decode it in JS).
   */
  parsed(payload: Uint8Array, ticket: number): Uint8Array | null {
    if (ticket !== this.held && !this.parse(payload, ticket)) return null;
    return this.buffer.parsed(this.length);
  }

  // Parses a payload for `ticket`; false when it is not of the layout or the core has no memory.
  private parse(payload: Uint8Array, ticket: number): boolean {
    this.held = 0;
    this.length = this.buffer.stage(payload) ? this.k.wireScan(payload.length, DEFAULT_SEED) : 0;
    if (this.length === 0) return false;
    this.held = ticket;
    return true;
  }
}
