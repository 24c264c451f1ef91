// `kvrouter relay`: a sidecar next to one engine. It subscribes to the
// engine's ZeroMQ KV-event publisher (with replay recovery over its replay
// socket) and republishes every batch to NATS JetStream, so any number of
// router replicas, including ones started later, read the same events
// (docs/replicas.md). Routers name the worker with kv_events.source: nats.
import { InvalidArgumentError, type Command } from 'commander';
import { DEFAULTS } from '../config/schema.js';
import { NatsLink } from '../nats/link.js';
import { KvRelay } from '../nats/relay.js';
import { NatsNames } from '../nats/subjects.js';
import { count, integer, matching, milliseconds } from './options.js';
import { untilStopped } from './signals.js';

interface RelayOptions {
  nats?: string;
  workerId: string;
  endpoint: string;
  replayEndpoint?: string;
  topic: string;
  dataParallelSize: number;
  subjectPrefix: string;
  streamMaxAgeMs: number;
  streamMaxBytes: number;
}

const zmq = matching(/^(tcp|ipc):\/\/[^\s*]+$/, 'a ZeroMQ address to connect to, such as tcp://10.0.0.5:5557');
const workerId = matching(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'letters, digits, ".", "_", ":" or "-" (the id routers know the worker by)');
const prefix = matching(/^[A-Za-z0-9_-]+$/, 'letters, digits, "_" or "-"');

export interface RunningRelay {
  relay: KvRelay;
  link: NatsLink;
  close(): Promise<void>;
}

/** Starts the relay; resolves once NATS answered and the engine's publisher is subscribed. */
export async function relay(o: RelayOptions, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<RunningRelay> {
  const url = o.nats ?? env.KVROUTER_NATS_URL;
  if (!url) throw new InvalidArgumentError('--nats (or KVROUTER_NATS_URL) is required: the NATS server routers read from');
  const names = new NatsNames(o.subjectPrefix);
  const warn = (message: string) => print(`kvrouter relay: ${message}`);
  const link = new NatsLink({ url, name: `kvrouter relay ${o.workerId}`, warn });
  const kv = new KvRelay({
    link,
    names,
    retention: { maxAgeMs: o.streamMaxAgeMs, maxBytes: o.streamMaxBytes },
    worker: o.workerId,
    endpoint: o.endpoint,
    replayEndpoint: o.replayEndpoint,
    topic: o.topic,
    dataParallelSize: o.dataParallelSize,
    warn,
  });
  link.start();
  try {
    await kv.start();
  } catch (error) {
    await kv.close();
    await link.close();
    throw error;
  }
  const subjects = Array.from({ length: o.dataParallelSize }, (_, rank) => names.kvSubject(o.workerId, rank)).join(', ');
  print(
    `kvrouter relay: worker ${o.workerId}: ${o.endpoint}${o.replayEndpoint ? ` (replay ${o.replayEndpoint})` : ''} -> ${url} stream ${names.kvStream}, ${subjects}; messages of up to ${kv.stats().messageLimit} bytes`,
  );
  return {
    relay: kv,
    link,
    close: async () => {
      await kv.close();
      await link.close();
    },
  };
}

export function registerRelay(program: Command): void {
  program
    .command('relay')
    .description("republish one engine's ZeroMQ KV events to NATS JetStream, for router replicas")
    .requiredOption('--worker-id <id>', 'the worker id routers know this engine by', workerId)
    .requiredOption('--endpoint <zmq>', "the engine's KV-event PUB address, e.g. tcp://127.0.0.1:5557 (rank r: port + r)", zmq)
    .option('--replay-endpoint <zmq>', "the engine's replay (ROUTER) address, to recover missed batches", zmq)
    .option('--topic <topic>', 'the topic the engine publishes on', '')
    .option('--data-parallel-size <n>', 'data-parallel ranks of the engine', count, 1)
    .option('--nats <url>', 'NATS server(s), comma-separated (default: $KVROUTER_NATS_URL)')
    .option('--subject-prefix <prefix>', "first token of the subjects and the stream's name (the routers' nats.subject_prefix)", prefix, DEFAULTS.nats.subjectPrefix)
    .option('--stream-max-age-ms <ms>', 'when creating the stream: how long events are kept', milliseconds(1000), DEFAULTS.nats.kvStream.maxAgeMs)
    .option('--stream-max-bytes <n>', 'when creating the stream: most bytes kept', integer(1 << 20), DEFAULTS.nats.kvStream.maxBytes)
    .action(async (options: RelayOptions) => {
      let running: RunningRelay;
      try {
        running = await relay(options, process.env, (line) => console.log(line));
      } catch (error) {
        console.error(`kvrouter relay: ${(error as Error).message}`);
        process.exitCode = 1;
        return;
      }
      await untilStopped(() => running.close());
      const s = running.relay.stats();
      console.log(`kvrouter relay: stopped after relaying ${s.relayed} batches (${s.split} in parts, ${s.skipped} already in the stream, ${s.dropped} dropped from a full queue, ${s.oversized} dropped as oversized)`);
    });
}
