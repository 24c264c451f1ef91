// The router process's heap. V8 begins a marking cycle whenever the old
// generation's room to grow before its next full collection is smaller than
// the young generation, and a router under load grows its young generation to
// the largest size. With V8's own growing factor a heap of a few tens of MB
// (one long conversation's tokenizer memo is about that) then never leaves
// marking: every request pays for concurrent marking and its write barriers,
// and a full collection runs every few long requests. Letting the old
// generation grow to three times what a collection left keeps that room
// larger than the young generation. A --heap-growing-percent given to node
// itself is left as it is.
import { setFlagsFromString } from 'node:v8';

/** The old generation may grow by this much (percent of what survived) before the next full collection. */
export const HEAP_GROWING_PERCENT = 200;

export function tuneRouterHeap(execArgv: readonly string[] = process.execArgv): void {
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent\b/.test(arg))) return;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
