// The order in which queued work is served, shared by the wasm lane heap and
// its twin: higher strict-priority tier first, then entries with a deadline
// (earliest first) before those without, then the class's policy key (lower
// first), then arrival sequence (lower first) so equal keys stay FIFO.

export interface LaneOrder {
  /** Strict-priority tier; higher is served first. */
  tier: number;
  /** Due time in clock ms, or Infinity when the entry has no deadline. */
  deadline: number;
  /** The class policy's key (fcfs: arrival minus priority jump; wspt: cost ratio); lower first. */
  key: number;
  /** Tie-break: arrival sequence, lower first. */
  seq: number;
}

export function orderBefore(a: LaneOrder, b: LaneOrder): boolean {
  if (a.tier !== b.tier) return a.tier > b.tier;
  if (a.deadline !== b.deadline) return a.deadline < b.deadline;
  if (a.key !== b.key) return a.key < b.key;
  return a.seq < b.seq;
}
