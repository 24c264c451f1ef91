// The client side of vLLM's replay protocol. The engine's ROUTER socket takes
// [identity, "", start_seq as 8-byte big-endian] and answers, per buffered
// batch with seq >= start, [identity, "", seq, payload], then an end marker
// with seq -1 and an empty payload. A DEALER keeps the empty delimiter frame
// on both sides, so it sends ["", start] and reads ["", seq, payload]; replies
// without the delimiter are accepted too.
//
// Each request uses a fresh DEALER: a late answer to a request that timed out
// can then never be mistaken for the answer to the next one.

import { Dealer } from 'zeromq';
import { REPLAY_END_SEQ, decodeSeq, encodeSeq } from '../../router/kv-wire.js';

export interface ReplayedFrame {
  seq: number;
  payload: Uint8Array;
}

export interface ReplayAnswer {
  /** The batches received, in the order the engine sent them. */
  frames: ReplayedFrame[];
  /** True when the end marker arrived. */
  complete: boolean;
  /** Why the answer is not complete (timeout, socket error, aborted); null when complete. */
  error: string | null;
  /** Reply messages that were not [seq, payload] and were skipped. */
  malformed: number;
}

export interface ReplayRequestOptions {
  /** Time allowed for the whole answer, end marker included. */
  timeoutMs: number;
  /** Aborting closes the socket and ends the request at once. */
  signal?: AbortSignal;
}

const EMPTY = new Uint8Array(0);

export async function fetchReplay(endpoint: string, fromSeq: number, options: ReplayRequestOptions): Promise<ReplayAnswer> {
  const answer: ReplayAnswer = { frames: [], complete: false, error: null, malformed: 0 };
  if (options.signal?.aborted) return { ...answer, error: 'aborted' };
  const dealer = new Dealer({ linger: 0, sendTimeout: options.timeoutMs });
  const abort = () => dealer.close();
  options.signal?.addEventListener('abort', abort, { once: true });
  const deadline = performance.now() + options.timeoutMs;
  try {
    dealer.connect(endpoint);
    await dealer.send([EMPTY, encodeSeq(fromSeq)]);
    for (;;) {
      const remaining = Math.ceil(deadline - performance.now());
      if (remaining <= 0) throw new Error('timeout');
      dealer.receiveTimeout = remaining;
      const parts = await dealer.receive();
      const body = parts.length === 3 && parts[0]!.length === 0 ? parts.slice(1) : parts;
      const seq = body.length === 2 ? decodeSeq(body[0]!) : null;
      if (seq === null) {
        answer.malformed++;
      } else if (seq === REPLAY_END_SEQ) {
        answer.complete = true;
        return answer;
      } else {
        answer.frames.push({ seq, payload: body[1]! });
      }
    }
  } catch (error) {
    answer.error = options.signal?.aborted
      ? 'aborted'
      : (error as { code?: string }).code === 'EAGAIN' || (error as Error).message === 'timeout'
        ? `no end marker within ${options.timeoutMs} ms`
        : String((error as Error).message ?? error);
    return answer;
  } finally {
    options.signal?.removeEventListener('abort', abort);
    if (!dealer.closed) dealer.close();
  }
}
