// How far each worker has got through the prefill booked on it, from its KV
// events. A booking counts its uncached prompt tokens as the worker's active
// prefill until its first token; an engine prefills its queue first come,
// first served, in chunks of its per-step token budget, and publishes the
// full blocks each step computed. So the blocks a worker stores are prefill
// done for its oldest requests still in prefill, and taking them off those
// requests' counts (in booking order) keeps the worker's queued prefill to
// what is left: a worker most of the way through a long prompt no longer
// looks as busy as when the prompt arrived. The ttft cost reads that queue
// (cost/ttft.ts); the kv cost keeps Dynamo's booked-until-first-token count,
// so only the ttft policy turns this on.
//
// Only blocks the engine computed count: stores into another tier than the
// GPU's (an offload tier writing through) and placeholder stores (hash-only)
// do not, nor those of a hybrid model's other cache groups. A block the
// router took as cached but the engine recomputed is taken from the next
// request in line, which its own first token settles. An engine that also
// caches the full blocks of generated tokens (vLLM does) publishes one per
// block size of a decoding request's tokens; those count as prefill done
// too, a small share next to a prefill step's budget.
import type { LoadLedger } from '../../bindings/selection-contract.js';
import type { KvEventBatch } from '../kv-events.js';

interface Line {
  ids: string[];
  head: number;
}

/** The prompt tokens a batch of a worker's KV events shows it computed on its GPU. */
export function computedTokens(batch: KvEventBatch): number {
  let tokens = 0;
  for (const event of batch.events) {
    if (event.type !== 'stored' || event.blockSize === 0) continue;
    if (event.medium !== null && event.medium.toUpperCase() !== 'GPU') continue;
    if (event.groupIdx !== undefined && event.groupIdx !== null && event.groupIdx !== 0) continue;
    tokens += event.blockHashes.length * event.blockSize;
  }
  return tokens;
}

export class PrefillProgress {
  /** Per slot, its bookings in booking order, from the oldest that may still be in prefill. */
  private readonly lines = new Map<number, Line>();
  /** The slot of every booking still in a line and in prefill. */
  private readonly slotOf = new Map<string, number>();

  constructor(private readonly ledger: LoadLedger) {}

  booked(slot: number, requestId: string): void {
    let line = this.lines.get(slot);
    if (!line) this.lines.set(slot, (line = { ids: [], head: 0 }));
    line.ids.push(requestId);
    this.slotOf.set(requestId, slot);
  }

  /** The request's first token, its end or its loss: nothing of it is left to prefill. */
  settled(requestId: string): void {
    const slot = this.slotOf.get(requestId);
    if (slot === undefined) return;
    this.slotOf.delete(requestId);
    this.advance(this.lines.get(slot)!);
  }

  /** `tokens` of prompt computed on the slot: off its oldest requests still in prefill, in booking order. */
  computed(slot: number, tokens: number): void {
    const line = this.lines.get(slot);
    if (!line) return;
    let left = tokens;
    while (left > 0 && line.head < line.ids.length) {
      const id = line.ids[line.head]!;
      left -= this.slotOf.has(id) ? this.ledger.prefillProgress(id, left) : 0;
      // It had less left than this step's blocks: the rest went to the next in line.
      if (left > 0) line.head++;
    }
    this.advance(line);
  }

  /** The slot's worker is gone, and its bookings with it. */
  removeSlot(slot: number): void {
    const line = this.lines.get(slot);
    if (!line) return;
    for (const id of line.ids) if (this.slotOf.get(id) === slot) this.slotOf.delete(id);
    this.lines.delete(slot);
  }

  /** Drops the settled bookings at the head of the line, and the line's dead front when it is most of it. */
  private advance(line: Line): void {
    while (line.head < line.ids.length && !this.slotOf.has(line.ids[line.head]!)) line.head++;
    if (line.head === line.ids.length) {
      line.ids.length = 0;
      line.head = 0;
    } else if (line.head > 64 && line.head * 2 > line.ids.length) {
      line.ids = line.ids.slice(line.head);
      line.head = 0;
    }
  }
}
