// KV-event batches the core parsed. readKvBatch is decodeKvBatch for a hot
// path: a payload the core reads (bindings/kv-wire-reader.ts: vLLM's and
// SGLang's positional or named layout, device tier, no adapter, extra keys or
// cache groups) is checked and parsed in the core in one pass and comes back
// as a WireKvBatch, whose events are decoded in JS only if someone reads
// them; the index applies its parsed form, without reading the payload again
// (CacheIndex, PrefixIndex.applyWire). Anything else goes through
// decodeKvBatch, so every payload is accepted or rejected exactly as before.
import { WireReader, type WireScan, type WireSummary } from '../bindings/kv-wire-reader.js';
import type { KvEvent, KvEventBatch } from './kv-events.js';
import { decodeKvBatch, type DecodeOptions } from './kv-wire.js';

/** A batch read from bytes of the core's layout: ts and dp_rank from the scan, events decoded when first read. */
export class WireKvBatch implements KvEventBatch {
  readonly ts: number;
  readonly dpRank: number | null;
  #events: KvEvent[] | null = null;
  readonly #payload: Uint8Array;
  readonly #summary: WireSummary;
  readonly #reader: WireReader;
  readonly #ticket: number;

  constructor(payload: Uint8Array, scan: WireScan, reader: WireReader) {
    this.ts = scan.summary.ts;
    this.dpRank = scan.summary.dpRank;
    this.#payload = payload;
    this.#summary = scan.summary;
    this.#reader = reader;
    this.#ticket = scan.ticket;
  }

  get events(): KvEvent[] {
    this.#events ??= decodeKvBatch(this.#payload).events;
    return this.#events;
  }

  /** The message bytes. */
  get payload(): Uint8Array {
    return this.#payload;
  }

  /**
   * The batch as the core parsed it, for the index to apply: a view valid
   * until the next readKvBatch; null when the core had no memory to parse it
   * again (apply its events instead).
   */
  parsed(): Uint8Array | null {
    return this.#reader.parsed(this.#payload, this.#ticket);
  }

  /** Events of each type, from the scan. */
  get summary(): WireSummary {
    return this.#summary;
  }
}

let reader: WireReader | null = null;

/** decodeKvBatch, with the bytes kept for the index when the core can read them. */
export function readKvBatch(payload: Uint8Array, options: DecodeOptions = {}): KvEventBatch {
  reader ??= new WireReader();
  const scan = reader.scan(payload);
  return scan ? new WireKvBatch(payload, scan, reader) : decodeKvBatch(payload, options);
}

/** Adds the batch's events, by type, into `counts` (without decoding a wire batch). */
export function countEventTypes(batch: KvEventBatch, counts: Record<KvEvent['type'], number>): void {
  if (!(batch instanceof WireKvBatch)) {
    for (const event of batch.events) counts[event.type]++;
    return;
  }
  const { summary } = batch;
  counts.stored += summary.stored;
  counts.removed += summary.removed;
  counts.cleared += summary.cleared;
}
