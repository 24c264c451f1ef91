// `kvrouter serve`: the router. With --config (or KVROUTER_CONFIG) it routes
// to the workers the file names; without, it starts the embedded default:
// simulated workers in this process, publishing real KV events. With
// --replicas N it runs N router processes sharing the port (serve-replicas.ts).
import cluster from 'node:cluster';
import type { Command } from 'commander';
import { ConfigError } from '../config/fields.js';
import { startRouter, type RunningRouter } from '../server.js';
import { EMBEDDED_DEFAULTS, type EmbeddedFleet } from './embedded-fleet.js';
import { tuneRouterHeap } from './heap.js';
import { integer, port, positive } from './options.js';
import { EMBEDDED_HOST, serveConfig, type ServeOptions } from './serve-config.js';
import { startReplicaPrimary, type ReplicaPrimary } from './serve-replicas.js';
import { untilStopped } from './signals.js';

/** Simulated workers and replicas on one machine. */
const processes = integer(1, 64);

export interface Served {
  router: RunningRouter;
  embedded: EmbeddedFleet | null;
  close(): Promise<void>;
}

/** Starts the router (and the embedded fleet when no config is given), printing where everything listens. */
export async function serve(o: ServeOptions, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<Served> {
  const { config, path, embedded } = await serveConfig(o, env);
  let router: RunningRouter;
  try {
    router = await startRouter(config, { tokenizers: embedded?.tokenizers });
  } catch (error) {
    await embedded?.close();
    throw error;
  }
  print(`kvrouter: listening on ${router.url} (OpenAI API at ${router.url}/v1)${path ? `, config ${path}` : ', embedded mock workers (no config file)'}`);
  for (const m of config.models) print(`model ${m.name}: tokenizer ${m.tokenizer}, block size ${m.blockSize}, selection ${m.selection.type}`);
  for (const w of config.workers) {
    const kv =
      w.kvEvents.source === 'zmq'
        ? `kv events ${w.kvEvents.endpoint}${w.kvEvents.replayEndpoint ? ` (replay ${w.kvEvents.replayEndpoint})` : ''}`
        : w.kvEvents.source === 'http'
          ? 'kv events over HTTP'
          : w.kvEvents.source === 'nats'
            ? 'kv events relayed over NATS'
            : 'no kv events (approximate)';
    print(`worker ${w.id}: ${w.url} (${w.model}, ${kv})`);
  }
  if (config.adminToken === null) print('admin API off (set admin_token or KVROUTER_ADMIN_TOKEN to turn it on)');
  const replication = router.runtime.replication;
  if (replication) print(`replica ${replication.replicaId}: sharing ledger and session bindings over ${config.nats!.url}`);
  return {
    router,
    embedded,
    close: async () => {
      await router.close();
      await embedded?.close();
    },
  };
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the router; without --config, in front of embedded simulated workers (no GPU needed)')
    .option('--config <file>', 'router config (YAML or JSON); default: $KVROUTER_CONFIG, else the embedded default')
    .option('--port <n>', 'port to listen on (overrides PORT and the config)', port)
    .option('--host <host>', `address to listen on (overrides HOST and the config; default: the config's host, ${EMBEDDED_HOST} without a config)`)
    .option('--mock-workers <n>', 'embedded default: number of simulated workers', processes, EMBEDDED_DEFAULTS.workers)
    .option('--mock-speedup <x>', 'embedded default: divide the simulated step times by x', positive, EMBEDDED_DEFAULTS.speedup)
    .option('--replicas <n>', 'router processes sharing the port, synchronised over NATS (a private nats-server without nats.url)', processes, 1)
    .action(async (options: ServeOptions) => {
      if (options.replicas > 1 && cluster.isPrimary) return runPrimary(options);
      tuneRouterHeap();
      let served: Served;
      // A forked replica tags its lines; the primary prints the shared address.
      const tag = cluster.isWorker ? `[${process.env.KVROUTER_REPLICA_ID}] ` : '';
      try {
        served = await serve(options, process.env, (line) => console.log(tag + line));
      } catch (error) {
        return startFailed(error);
      }
      await untilStopped((signal) => {
        console.log(`${tag}kvrouter: ${signal}, draining requests in flight`);
        return served.close();
      });
      console.log(`${tag}kvrouter: stopped`);
      // A replica's channel to the primary would keep the process alive.
      cluster.worker?.disconnect();
    });
}

async function runPrimary(options: ServeOptions): Promise<void> {
  let primary: ReplicaPrimary;
  try {
    primary = await startReplicaPrimary(options, process.env, (line) => console.log(line));
  } catch (error) {
    return startFailed(error);
  }
  await untilStopped((signal) => {
    console.log(`kvrouter: ${signal}, stopping the replicas`);
    return primary.close();
  });
  console.log('kvrouter: stopped');
}

function startFailed(error: unknown): void {
  // Config and system errors (a port in use) are the operator's to fix: their message says what; anything else is a bug.
  const expected = error instanceof ConfigError || typeof (error as NodeJS.ErrnoException).code === 'string';
  console.error(`kvrouter serve: ${expected ? (error as Error).message : (error as Error).stack ?? String(error)}`);
  process.exitCode = 1;
}
