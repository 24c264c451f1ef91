// Shared by the ZeroMQ listener tests and the process-exit fixture.

import type { WorkerKey } from '../../bindings/workers.js';
import type { BlockStored, KvEvent, KvEventBatch } from '../../router/kv-events.js';
import type { KvStaleReason } from '../../server/kv-events/zmq-listener.js';
import { waitFor } from '../helpers/wait.js';

/** Loopback with a port the OS picks; read the bound address back from the socket. */
export const ANY_PORT = 'tcp://127.0.0.1:*';

export function batchOf(events: KvEvent[] = [], ts = 1, dpRank: number | null = null): KvEventBatch {
  return { ts, events, dpRank };
}

export function stored(hashes: bigint[], parent: bigint | null = null, blockSize = 2): BlockStored {
  return {
    type: 'stored',
    blockHashes: hashes,
    parentBlockHash: parent,
    tokenIds: hashes.flatMap((_, i) => Array.from({ length: blockSize }, (_, j) => i * blockSize + j)),
    blockSize,
    loraName: null,
    medium: 'GPU',
  };
}

/** Collects what a listener hands out, with one log that keeps the order of batches and stale reports. */
export class Recorder {
  readonly batches: { seq: number; batch: KvEventBatch; worker: WorkerKey }[] = [];
  readonly stale: KvStaleReason[] = [];
  readonly errors: Error[] = [];
  readonly log: string[] = [];

  readonly onBatch = (batch: KvEventBatch, seq: number, worker: WorkerKey): void => {
    // What the batch reads as (a batch read from its wire bytes decodes its events when they are read).
    this.batches.push({ seq, batch: { ts: batch.ts, events: batch.events, dpRank: batch.dpRank }, worker });
    this.log.push(`batch ${seq}`);
  };

  readonly onStale = (reason: KvStaleReason): void => {
    this.stale.push(reason);
    this.log.push(`stale ${reason.kind} ${reason.expectedSeq}->${reason.receivedSeq}`);
  };

  readonly onError = (error: Error): void => {
    this.errors.push(error);
  };

  seqs(): number[] {
    return this.batches.map((b) => b.seq);
  }

  lastSeq(): number {
    const last = this.batches.at(-1);
    if (!last) throw new Error('no batch received yet');
    return last.seq;
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export { waitFor };

/**
 * The slow-joiner wait: a fresh subscription misses what is published before
 * it reaches the publisher, so publish empty probe batches (`publish` returns
 * the probe's seq) until one arrives, then wait for the last probe sent, so no
 * probe is still in flight when the test goes on.
 */
export async function syncProbes(publish: () => Promise<number> | number, recorder: Recorder, timeoutMs = 30_000): Promise<void> {
  const before = recorder.batches.length;
  const deadline = performance.now() + timeoutMs;
  let last = -1;
  while (recorder.batches.length === before) {
    if (performance.now() > deadline) throw new Error('no probe batch reached the listener');
    last = await publish();
    await sleep(15);
  }
  await waitFor(() => recorder.lastSeq() === last, `probe ${last}`, timeoutMs);
}
