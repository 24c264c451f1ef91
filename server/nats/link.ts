// One NATS connection that never gives up. The first connection is retried in
// the background (a router starts, and routes on its own state, while NATS is
// away); after that the client reconnects by itself, forever. Users of the
// link register for "up" (first connect and every reconnect: resubscribe,
// publish a fresh snapshot) and "down". While the link is down, publish()
// drops messages instead of queueing them: the replica state they carry is
// rebuilt from snapshots once the link is back, and stale ops flushed late
// would only do harm.
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** NATS's default max_payload, assumed until a server says otherwise. */
export const DEFAULT_MAX_PAYLOAD = 1 << 20;

/**
 * The most bytes a frame may take: 7/8 of what the server accepts. Frame sizes are exact, and the
 * rest is room for what a publish may add around the payload (headers count against max_payload).
 */
export function frameBudget(maxPayload: number): number {
  return Math.floor(maxPayload * 0.875);
}

export type Logger = (message: string) => void;

export interface NatsLinkOptions {
  /** Server URL(s), comma-separated. */
  url: string;
  /** Client name shown by the server's monitoring. */
  name: string;
  warn: Logger;
  /** Wait between first-connect attempts (ms); default 500. */
  retryMs?: number;
}


type LinkState = 'connecting' | 'up' | 'down' | 'closed';

export class NatsLink {
  /** Times an established connection was lost. */
  disconnects = 0;
  private nc: NatsConnection | null = null;
  private linkState: LinkState = 'connecting';
  private readonly upHandlers: ((nc: NatsConnection) => void)[] = [];
  private readonly downHandlers: (() => void)[] = [];
  private readonly subscriptions: { subject: string; handler: (data: Uint8Array, subject: string) => void; sub: Subscription | null }[] = [];
  private retry: NodeJS.Timeout | null = null;
  private firstAttemptDone!: () => void;
  /** Resolves after the first connection attempt, whether it worked or not. */
  readonly firstAttempt = new Promise<void>((resolve) => (this.firstAttemptDone = resolve));
  private warnedUnreachable = false;

  constructor(private readonly options: NatsLinkOptions) {}

  get state(): LinkState {
    return this.linkState;
  }

  get up(): boolean {
    return this.linkState === 'up';
  }

  /** The connection while up (JetStream users take it from here). */
  get connection(): NatsConnection | null {
    return this.linkState === 'up' ? this.nc : null;
  }

  start(): void {
    void this.attempt();
  }

  /** Runs now if up, and on every later (re)connect. */
  onUp(handler: (nc: NatsConnection) => void): void {
    this.upHandlers.push(handler);
    if (this.linkState === 'up') this.guard(() => handler(this.nc!));
  }

  onDown(handler: () => void): void {
    this.downHandlers.push(handler);
  }

  /** A core-NATS subscription kept across reconnects (the client resubscribes by itself). */
  subscribe(subject: string, handler: (data: Uint8Array, subject: string) => void): void {
    const entry = { subject, handler, sub: null as Subscription | null };
    this.subscriptions.push(entry);
    if (this.nc && this.linkState !== 'closed') this.attach(this.nc, entry);
  }

  /** The largest payload the connected server accepts (its advertised max_payload); null while down. */
  get maxPayload(): number | null {
    return this.linkState === 'up' ? (this.nc!.info?.max_payload ?? null) : null;
  }

  /** Sends now; false (nothing sent) while the link is down. Throws what the client refuses (a payload over max_payload). */
  publish(subject: string, data: Uint8Array): boolean {
    if (this.linkState !== 'up') return false;
    this.nc!.publish(subject, data);
    return true;
  }

  /** Waits until published messages have reached the server (no-op while down). */
  async flush(): Promise<void> {
    if (this.linkState === 'up') await this.nc!.flush().catch(() => {});
  }

  async close(): Promise<void> {
    if (this.linkState === 'closed') return;
    this.linkState = 'closed';
    if (this.retry) clearTimeout(this.retry);
    this.firstAttemptDone();
    const nc = this.nc;
    this.nc = null;
    if (!nc) return;
    try {
      await nc.flush();
    } catch {
      // Down already: nothing left to deliver.
    }
    await nc.close().catch(() => {});
  }

  private get closed(): boolean {
    return this.linkState === 'closed';
  }

  private async attempt(): Promise<void> {
    if (this.closed) return;
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: this.options.url.split(',').map((s) => s.trim()),
        name: this.options.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        reconnectJitter: 100,
        // A server that stops answering is noticed within seconds, not the default minutes.
        pingInterval: 2000,
        maxPingOut: 2,
        timeout: 2000,
      });
    } catch (error) {
      if (!this.warnedUnreachable) {
        this.warnedUnreachable = true;
        this.options.warn(`NATS at ${this.options.url} is unreachable (${(error as Error).message}); routing on this replica's own state until it answers`);
      }
      this.firstAttemptDone();
      if (!this.closed) {
        this.retry = setTimeout(() => void this.attempt(), this.options.retryMs ?? 500);
        this.retry.unref();
      }
      return;
    }
    if (this.closed) {
      await nc.close().catch(() => {});
      return;
    }
    this.nc = nc;
    for (const entry of this.subscriptions) this.attach(nc, entry);
    if (this.warnedUnreachable) this.options.warn(`NATS at ${this.options.url} answers: replica sync resumes`);
    this.becomeUp(nc);
    this.firstAttemptDone();
    void this.watch(nc);
  }

  private async watch(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (this.linkState === 'closed') return;
      if (status.type === 'disconnect' && this.linkState === 'up') {
        this.linkState = 'down';
        this.disconnects++;
        this.options.warn(`NATS connection to ${status.server} lost: routing on this replica's own state (bookings and bindings are not shared) until it returns`);
        for (const handler of this.downHandlers) this.guard(handler);
      } else if (status.type === 'reconnect' && this.linkState === 'down') {
        this.options.warn(`NATS reconnected to ${status.server}: replica sync resumes`);
        this.becomeUp(nc);
      }
    }
  }

  private becomeUp(nc: NatsConnection): void {
    this.linkState = 'up';
    for (const handler of this.upHandlers) this.guard(() => handler(nc));
  }

  private attach(nc: NatsConnection, entry: (typeof this.subscriptions)[number]): void {
    entry.sub = nc.subscribe(entry.subject, {
      callback: (error, msg) => {
        if (error) return;
        this.guard(() => entry.handler(msg.data, msg.subject));
      },
    });
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.options.warn(`replica sync handler failed: ${(error as Error).message}`);
    }
  }
}
