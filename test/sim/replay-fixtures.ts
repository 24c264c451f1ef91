// Small Mooncake traces for the replay tests: prompts built from a few shared
// "documents" (runs of hash ids) plus a unique tail, so a cache-aware router
// has something to find and a cache-blind one spreads it around.

export interface TraceLine {
  timestamp?: number;
  delay?: number;
  session_id?: string;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export function jsonl(lines: readonly object[]): string {
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

/**
 * `requests` prompts, one every `gapMs`: request i reads document i mod
 * `documents` (`docBlocks` shared ids) and then one id of its own. Ids stand
 * for `blockSize` tokens; the tail block is cut to half.
 */
export function sharedDocumentTrace(o: { requests: number; documents: number; docBlocks: number; blockSize: number; gapMs: number; output?: number }): TraceLine[] {
  const lines: TraceLine[] = [];
  let unique = o.documents * o.docBlocks;
  for (let i = 0; i < o.requests; i++) {
    const doc = i % o.documents;
    const ids = Array.from({ length: o.docBlocks }, (_, b) => doc * o.docBlocks + b);
    ids.push(unique++);
    lines.push({
      timestamp: i * o.gapMs,
      input_length: o.docBlocks * o.blockSize + o.blockSize / 2,
      output_length: o.output ?? 4,
      hash_ids: ids,
    });
  }
  return lines;
}
