// KV-event batches that keep their wire bytes. readKvBatch is decodeKvBatch
// for a hot path: a payload the core reads (bindings/kv-wire-reader.ts:
// vLLM's and SGLang's positional or named layout, device tier, no adapter,
// extra keys or cache groups) is checked in the core and comes
// back as a WireKvBatch, whose events are decoded in JS only if someone reads
// them; the index applies it from its bytes (CacheIndex, PrefixIndex.applyWire).
// Anything else goes through decodeKvBatch, so every payload is accepted or
// rejected exactly as before.
import { WireReader, type WireSummary } from '../bindings/kv-wire-reader.js';
import type { KvEvent, KvEventBatch } from './kv-events.js';
import { decodeKvBatch, type DecodeOptions } from './kv-wire.js';

/** A batch read from bytes of the core's layout: ts and dp_rank from the scan, events decoded when first read. */
export class WireKvBatch implements KvEventBatch {
  readonly ts: number;
  readonly dpRank: number | null;
  #events: KvEvent[] | null = null;
  readonly #payload: Uint8Array;
  readonly #summary: WireSummary;

  constructor(payload: Uint8Array, summary: WireSummary) {
    this.ts = summary.ts;
    this.dpRank = summary.dpRank;
    this.#payload = payload;
    this.#summary = summary;
  }

  get events(): KvEvent[] {
    this.#events ??= decodeKvBatch(this.#payload).events;
    return this.#events;
  }

  /** The message bytes, for the index to apply. */
  get payload(): Uint8Array {
    return this.#payload;
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
  const summary = reader.scan(payload);
  return summary ? new WireKvBatch(payload, summary) : decodeKvBatch(payload, options);
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
