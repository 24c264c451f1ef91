// How far each worker has got through the prefill booked on it, from its KV
// events. A booking counts its uncached prompt tokens as the worker's active
// prefill until its first token; an engine prefills its queue first come,
// first served, in chunks of its per-step token budget, and publishes the
// full blocks each step computed. So the blocks a worker stores are prefill
// done for its oldest request still in prefill, and taking them off that
// request's count keeps the worker's queued prefill to what is left: a
// worker most of the way through a long prompt no longer looks as busy as
// when the prompt arrived. The ttft cost reads that queue (cost/ttft.ts); the
// kv cost keeps Dynamo's booked-until-first-token count, so only the ttft
// policy turns this on.
//
// A booking keeps one engine step of its tokens (the worker's max batched
// tokens, or all it has when less) until its first token. The step that
// finishes a prompt stores no block for its partial tail, and may begin the
// next request's prompt, so from the events alone the router cannot tell a
// prompt's last step ran, nor whose blocks that step stored past it; only
// the first token says. Until then the blocks the worker stores are not
// taken off anyone: the next booking in line is drained once the one ahead
// of it has its first token. This also keeps a burst of short requests sent
// to one worker counted there (each is one step) until their first tokens,
// as the decode term counts them only from then.
//
// Only blocks the engine computed count: stores into another tier than the
// GPU's (an offload tier writing through) and placeholder stores (hash-only)
// do not, nor those of a hybrid model's other cache groups. An engine that
// also caches the full blocks of generated tokens (vLLM does) publishes one
// per block size of a decoding request's tokens; those count as prefill
// done too, a small share next to a prefill step's budget.
import type { LoadLedger } from '../../bindings/selection-contract.js';
import type { KvEventBatch } from '../kv-events.js';
import { WireKvBatch } from '../kv-wire-batch.js';

interface Line {
  ids: string[];
  head: number;
}

/** The prompt tokens a batch of a worker's KV events shows it computed on its GPU. */
export function computedTokens(batch: KvEventBatch): number {
  // A batch the core scanned is of the device tier throughout; with one block size its summary says it all, and its events are never decoded in JS.
  if (batch instanceof WireKvBatch && batch.summary.mixedBlockSizes === 0) return batch.summary.storedBlocks * batch.summary.lastBlockSize;
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
  /** Per slot, its bookings in booking order, from the oldest still in prefill. */
  private readonly lines = new Map<number, Line>();
  /** The slot of every booking still in prefill. */
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

  /** `tokens` of prompt computed on the slot: off its oldest request still in prefill, down to one engine step of it. */
  computed(slot: number, tokens: number): void {
    const line = this.lines.get(slot);
    if (!line || line.head === line.ids.length || tokens === 0) return;
    this.ledger.prefillProgress(line.ids[line.head]!, tokens, this.ledger.columns.maxBatchedTokens[slot]!);
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
