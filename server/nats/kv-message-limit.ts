// How large one relayed KV message may be. Two limits apply: the server's
// max_payload (the client refuses anything larger) and the stream's
// max_msg_size (JetStream refuses a larger message with "message size exceeds
// maximum allowed", every time: retrying it cannot help). Both count the
// headers with the payload. The stream's limit is read when the relay starts,
// on every reconnect, whenever the server announces that the stream was
// created or changed (its JetStream advisories), and after a refusal.
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { InvalidArgumentError, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../workers/kv-sources.js';
import { DEFAULT_MAX_PAYLOAD, type NatsLink } from './link.js';

export interface MessageLimit {
  bytes: number;
  /** Which limit it is, for logs. */
  bound: "the NATS server's max_payload" | "the stream's max_msg_size";
}

/** JetStream's error code for a message over the stream's max_msg_size. */
const STREAM_MESSAGE_TOO_LARGE = 10054;

/** Whether a publish failed because the message was too large (for the stream, or for the server). */
export function isTooLarge(error: unknown): boolean {
  if (error instanceof JetStreamApiError) return error.code === STREAM_MESSAGE_TOO_LARGE;
  // The client's own check against the server's max_payload.
  return error instanceof InvalidArgumentError && /max_payload size exceeded/.test(error.message);
}

export class KvMessageLimit {
  /** The stream's max_msg_size; null while unknown or unlimited. */
  private streamMax: number | null = null;

  constructor(
    private readonly link: NatsLink,
    private readonly stream: string,
    private readonly warn: Logger,
  ) {
    link.subscribe(`$JS.EVENT.ADVISORY.STREAM.*.${stream}`, () => {
      const nc = link.connection;
      if (nc) void this.read(nc);
    });
  }

  /** The limit as known now. */
  current(): MessageLimit {
    const payload = this.link.maxPayload ?? DEFAULT_MAX_PAYLOAD;
    if (this.streamMax !== null && this.streamMax < payload) return { bytes: this.streamMax, bound: "the stream's max_msg_size" };
    return { bytes: payload, bound: "the NATS server's max_payload" };
  }

  /** Reads the stream's max_msg_size; a failed read keeps what was known. */
  async read(nc: NatsConnection): Promise<void> {
    try {
      const info = await (await jetstreamManager(nc)).streams.info(this.stream);
      const max = info.config.max_msg_size ?? -1;
      this.streamMax = max > 0 ? max : null;
    } catch (error) {
      this.warn(`cannot read the max_msg_size of stream ${this.stream} (${(error as Error).message}); keeping ${this.current().bytes} bytes as the message limit`);
    }
  }
}
