// A running router: the runtime, its HTTP app listening, and the graceful
// shutdown (stop accepting, let responses in flight finish up to the
// configured timeout, then end the rest with an error and close everything).
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { buildApp } from './app.js';
import type { RouterConfig } from './config/schema.js';
import { createRuntime, type RouterRuntime } from './runtime.js';
import type { TokenizerCache } from './workers/model-runtime.js';

export interface RunningRouter {
  app: FastifyInstance;
  runtime: RouterRuntime;
  logger: Logger;
  /** http://host:port, with a wildcard host shown as 127.0.0.1. */
  url: string;
  port: number;
  /** Graceful shutdown; resolves when everything is closed. Safe to call twice. */
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** Tokenizers already loaded (by spec), e.g. shared with embedded mock workers. */
  tokenizers?: TokenizerCache;
}

export async function startRouter(config: RouterConfig, options: StartOptions = {}): Promise<RunningRouter> {
  const logger = options.logger ?? pino({ level: config.logLevel });
  const runtime = await createRuntime(config, (message) => logger.warn(message), options.tokenizers);
  const app = buildApp(runtime, logger);
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await runtime.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const shown = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  let closing: Promise<void> | undefined;
  return {
    app,
    runtime,
    logger,
    url: `http://${shown}:${port}`,
    port,
    close: () => (closing ??= shutdown(app, runtime, config.limits.shutdownTimeoutMs)),
  };
}

async function shutdown(app: FastifyInstance, runtime: RouterRuntime, timeoutMs: number): Promise<void> {
  runtime.shuttingDown = true;
  // Stops listening; idle keep-alive connections close, busy ones finish their response.
  const closed = app.close();
  const deadline = Date.now() + timeoutMs;
  while (runtime.live.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  await runtime.close();
  app.server.closeAllConnections();
  await closed;
}
