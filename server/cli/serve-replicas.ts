// `kvrouter serve --replicas N`: N router processes on one machine (Node's
// cluster module) sharing one listening port, so every core routes. The
// primary does no routing: it loads and checks the config, starts what the
// replicas share (the embedded mock fleet when there is no config file, and a
// private nats-server when the config names no NATS), forks the replicas,
// replaces one that dies, and forwards SIGTERM. Replicas share their ledger,
// session bindings and (through relays) KV events over NATS.
import cluster, { type Worker } from 'node:cluster';
import { hostname } from 'node:os';
import { createLocalNatsServer, type LocalNatsServer } from '../nats/local-server.js';
import { REPLICA_DOCUMENT_ENV, serveConfig, type ServeConfig, type ServeOptions } from './serve-config.js';

export interface ReplicaPrimary {
  url: Promise<string>;
  close(): Promise<void>;
}

/** Runs in the primary process: starts the shared pieces and forks the replicas. */
export async function startReplicaPrimary(o: ServeOptions, env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<ReplicaPrimary> {
  let served: ServeConfig | undefined;
  let nats: LocalNatsServer | null = null;
  const shared: Record<string, string> = {};
  const closeShared = async () => {
    await served?.embedded?.close();
    await nats?.close();
  };
  try {
    served = await serveConfig(o, env);
    if (served.embedded) shared[REPLICA_DOCUMENT_ENV] = JSON.stringify(served.embedded.document);
    if (!served.config.nats) {
      nats = await createLocalNatsServer();
      await nats.start();
      shared.KVROUTER_NATS_URL = nats.url;
      print(`kvrouter: no nats.url configured: started a private nats-server at ${nats.url} for the replicas`);
    }
  } catch (error) {
    await closeShared();
    throw error;
  }
  const { config } = served;
  const base = config.nats?.replicaId ?? `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_-]/g, '-');
  let stopping = false;
  const replicas = new Map<Worker, string>();
  const fork = (index: number) => {
    const id = `${base}-${index}`;
    const worker = cluster.fork({ ...shared, KVROUTER_REPLICA_ID: id });
    replicas.set(worker, id);
    worker.once('exit', (code, signal) => {
      replicas.delete(worker);
      if (stopping) return;
      print(`kvrouter: replica ${id} exited (${signal ?? `code ${code}`}); starting it again`);
      fork(index);
    });
  };
  const url = new Promise<string>((resolve) => {
    let listening = 0;
    const onListening = (_worker: Worker, address: { port: number }) => {
      if (++listening < o.replicas) return;
      cluster.off('listening', onListening);
      const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
      const shown = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
      print(`kvrouter: ${o.replicas} replicas (${[...replicas.values()].join(', ')}) listening on ${shown} (OpenAI API at ${shown}/v1)`);
      resolve(shown);
    };
    cluster.on('listening', onListening);
  });
  for (let i = 0; i < o.replicas; i++) fork(i);
  return {
    url,
    close: async () => {
      stopping = true;
      const exits = [...replicas.keys()].map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve()))));
      for (const w of replicas.keys()) w.process.kill('SIGTERM');
      await Promise.all(exits);
      await closeShared();
    },
  };
}
