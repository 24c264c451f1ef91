// `kvrouter serve`: the router. With --config (or KVROUTER_CONFIG) it routes
// to the workers the file names; without, it starts the embedded default:
// simulated workers in this process, publishing real KV events.
// Precedence: flags over environment variables over the file.
import { InvalidArgumentError, type Command } from 'commander';
import { ConfigError } from '../config/fields.js';
import { configFromDocument, loadConfigFile } from '../config/load.js';
import type { RouterConfig } from '../config/schema.js';
import { EMBEDDED_DEFAULTS, startEmbeddedFleet, type EmbeddedFleet } from '../embedded.js';
import { startRouter, type RunningRouter } from '../server.js';

interface ServeOptions {
  config?: string;
  port?: string;
  host?: string;
  mockWorkers: number;
  mockSpeedup: number;
}

const count = (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new InvalidArgumentError('expected an integer in 1..64.');
  return n;
};
const factor = (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a number > 0.');
  return n;
};

export interface Served {
  router: RunningRouter;
  embedded: EmbeddedFleet | null;
  close(): Promise<void>;
}

/** Starts the router (and the embedded fleet when no config is given), printing where everything listens. */
export async function serve(o: ServeOptions, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<Served> {
  const merged = { ...env, ...(o.port !== undefined && { PORT: o.port }), ...(o.host !== undefined && { HOST: o.host }) };
  const path = o.config ?? env.KVROUTER_CONFIG;
  let embedded: EmbeddedFleet | null = null;
  let config: RouterConfig;
  if (path) {
    config = await loadConfigFile(path, merged);
  } else {
    embedded = await startEmbeddedFleet({ ...EMBEDDED_DEFAULTS, workers: o.mockWorkers, speedup: o.mockSpeedup });
    try {
      config = configFromDocument(embedded.document, merged);
    } catch (error) {
      await embedded.close();
      throw error;
    }
  }
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
    const kv = w.kvEvents.source === 'zmq' ? `kv events ${w.kvEvents.endpoint}${w.kvEvents.replayEndpoint ? ` (replay ${w.kvEvents.replayEndpoint})` : ''}` : w.kvEvents.source === 'http' ? 'kv events over HTTP' : 'no kv events (approximate)';
    print(`worker ${w.id}: ${w.url} (${w.model}, ${kv})`);
  }
  if (config.adminToken === null) print('admin API off (set admin_token or KVROUTER_ADMIN_TOKEN to turn it on)');
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
    .option('--port <n>', 'port to listen on (overrides PORT and the config)')
    .option('--host <host>', 'address to listen on (overrides HOST and the config)')
    .option('--mock-workers <n>', 'embedded default: number of simulated workers', count, EMBEDDED_DEFAULTS.workers)
    .option('--mock-speedup <x>', 'embedded default: divide the simulated step times by x', factor, EMBEDDED_DEFAULTS.speedup)
    .action(async (options: ServeOptions) => {
      let served: Served;
      try {
        served = await serve(options, process.env, (line) => console.log(line));
      } catch (error) {
        // Config and system errors (a port in use) are the operator's to fix: their message says what; anything else is a bug.
        const expected = error instanceof ConfigError || typeof (error as NodeJS.ErrnoException).code === 'string';
        console.error(`kvrouter serve: ${expected ? (error as Error).message : (error as Error).stack ?? String(error)}`);
        process.exitCode = 1;
        return;
      }
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          console.log(`kvrouter: ${signal}, draining requests in flight`);
          void served.close().then(resolve);
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      });
      console.log('kvrouter: stopped');
    });
}
