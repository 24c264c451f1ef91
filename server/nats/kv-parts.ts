// A relayed KV-event batch must fit in one NATS message (the server's
// max_payload). A batch that does not is sent as parts: the same engine
// sequence number and timestamp on each, its events split in order, and a
// Kvr-Part header "<index>/<count>". A router applies the batch only once it
// holds every part, in order (PartAssembler), so the batch still counts as one
// sequence number and a part that never arrives shows as a gap.
import type { KvEventBatch } from '../../router/kv-events.js';
import { encodeKvBatch } from '../../router/kv-wire.js';

/** The most a batch's array header can grow by as events are added (msgpack array32). */
const ARRAY_HEADER_BYTES = 5;

export type BatchParts =
  | { kind: 'parts'; parts: Uint8Array[] }
  /** One event alone encodes larger than the budget: the batch cannot be sent. */
  | { kind: 'oversized'; eventIndex: number; eventBytes: number };

/** The batch's encoding in messages of at most `budget` bytes each; one message when it fits whole. */
export function splitKvBatch(batch: KvEventBatch, budget: number): BatchParts {
  const whole = encodeKvBatch(batch, 'array');
  if (whole.length <= budget) return { kind: 'parts', parts: [whole] };
  const base = encodeKvBatch({ ...batch, events: [] }, 'array').length + ARRAY_HEADER_BYTES;
  const parts: Uint8Array[] = [];
  let start = 0;
  let bytes = base;
  for (let i = 0; i < batch.events.length; i++) {
    const eventBytes = encodeKvBatch({ ...batch, events: [batch.events[i]!] }, 'array').length - base + ARRAY_HEADER_BYTES;
    if (base + eventBytes > budget) return { kind: 'oversized', eventIndex: i, eventBytes };
    if (bytes + eventBytes > budget) {
      parts.push(encodeKvBatch({ ...batch, events: batch.events.slice(start, i) }, 'array'));
      start = i;
      bytes = base;
    }
    bytes += eventBytes;
  }
  parts.push(encodeKvBatch({ ...batch, events: batch.events.slice(start) }, 'array'));
  return { kind: 'parts', parts };
}

/** The Kvr-Part header value of part `index` of `count`. */
export function partHeader(index: number, count: number): string {
  return `${index}/${count}`;
}

/** A Kvr-Part header value as index and count, or null when it is not one. */
export function parsePartHeader(value: string): { index: number; count: number } | null {
  const match = /^(\d{1,9})\/(\d{1,9})$/.exec(value);
  if (!match) return null;
  const index = Number(match[1]);
  const count = Number(match[2]);
  return count >= 1 && index < count ? { index, count } : null;
}

/**
 * Joins the parts of one rank's batches. A part out of order (a missing one,
 * another batch's) discards the batch being joined; its sequence number is
 * then never offered, which the sequencer sees as a gap.
 */
export class PartAssembler {
  private joining: { seq: number; count: number; next: number; batch: KvEventBatch } | null = null;

  /** The whole batch once its last part is in, else null; `discarded` counts parts thrown away. */
  offer(seq: number, index: number, count: number, part: KvEventBatch): { batch: KvEventBatch | null; discarded: number } {
    let discarded = 0;
    const j = this.joining;
    if (j && !(j.seq === seq && j.count === count && j.next === index)) {
      discarded += j.next;
      this.joining = null;
    }
    if (!this.joining) {
      if (index !== 0) return { batch: null, discarded: discarded + 1 };
      this.joining = { seq, count, next: 0, batch: { ...part, events: [] } };
    }
    const joining = this.joining;
    for (const event of part.events) joining.batch.events.push(event);
    joining.next++;
    if (joining.next < count) return { batch: null, discarded };
    this.joining = null;
    return { batch: joining.batch, discarded };
  }

  /** A batch sent whole arrived: any batch being joined is incomplete for good. */
  reset(): number {
    const discarded = this.joining?.next ?? 0;
    this.joining = null;
    return discarded;
  }
}
