// What one dispatched request tells the diagnostics as its response is
// relayed: the time to its first byte, the gaps between streamed events
// (inter-token latency), and at the end the usage the engine reported.
import type { WorkerKey } from '../../bindings/workers.js';
import type { RequestFields, RoutedRequest } from '../../router/model-fleet.js';
import { UsageTail, type ReportedUsage } from './usage-tail.js';

export interface TapSink {
  prompt(tap: ResponseTap, request: RoutedRequest, fields: RequestFields): void;
  firstByte(model: string, seconds: number, now: number): void;
  interToken(model: string, seconds: number, now: number): void;
  usage(tap: ResponseTap, usage: ReportedUsage): void;
}

const LF = 0x0a;

/**
 * SSE events that end in the chunk (a blank line closes each). A blank line
 * split across two chunks is missed: the gap then counts toward the next
 * event, a slight overestimate of that one sample.
 */
function eventsEnding(chunk: Buffer): number {
  let n = 0;
  for (let at = chunk.indexOf(LF); at >= 0 && at + 1 < chunk.length; at = chunk.indexOf(LF, at + 1)) if (chunk[at + 1] === LF) n++;
  return n;
}

export class ResponseTap {
  private readonly tail = new UsageTail();
  private lastEventAt: number | null = null;

  constructor(
    private readonly sink: TapSink,
    readonly model: string,
    readonly worker: WorkerKey,
    /** Cached tokens the router predicted on this worker. */
    readonly predictedTokens: number,
    readonly promptTokens: number,
    /** performance.now() when the request arrived. */
    private readonly arrivedAt: number,
  ) {}

  /** The routed prompt (known once admission returns, which may be after the dispatch). */
  prompt(request: RoutedRequest, fields: RequestFields): void {
    this.sink.prompt(this, request, fields);
  }

  /** A chunk relayed to the client (`eventStream`: the response is SSE). */
  data(chunk: Buffer, eventStream: boolean, now = performance.now()): void {
    this.tail.add(chunk);
    if (this.lastEventAt === null) {
      this.sink.firstByte(this.model, (now - this.arrivedAt) / 1000, now);
      this.lastEventAt = now;
      return;
    }
    if (!eventStream) return;
    const events = eventsEnding(chunk);
    if (events === 0) return;
    this.sink.interToken(this.model, (now - this.lastEventAt) / 1000 / events, now);
    this.lastEventAt = now;
  }

  /** The response ended whole. */
  end(): void {
    this.sink.usage(this, this.tail.read());
  }
}
