// A router in front of embedded mock workers (real HTTP, real ZeroMQ KV
// events with replay), started in the test process on free loopback ports.
import { configFromDocument } from '../../server/config/load.js';
import type { RouterConfig } from '../../server/config/schema.js';
import { EMBEDDED_DEFAULTS, startEmbeddedFleet, type EmbeddedFleet, type EmbeddedOptions } from '../../server/cli/embedded-fleet.js';
import { startRouter, type RunningRouter } from '../../server/server.js';
import type { ModelRuntime } from '../../server/workers/model-runtime.js';

export interface StackOptions extends Partial<EmbeddedOptions> {
  /** Edits the router's config document (models, workers, limits, ...) before validation. */
  edit?: (document: Record<string, unknown>) => void;
}

export interface Stack {
  url: string;
  router: RunningRouter;
  embedded: EmbeddedFleet;
  config: RouterConfig;
  model: ModelRuntime;
  close(): Promise<void>;
}

export const MODEL = EMBEDDED_DEFAULTS.model;

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const { edit, ...fleet } = options;
  // Fast engines and the byte tokenizer keep suites short; tests that need the real tokenizer ask for it.
  const embedded = await startEmbeddedFleet({ ...EMBEDDED_DEFAULTS, workers: 2, speedup: 20, tokenizer: 'bytes', numBlocks: 4096, ...fleet });
  let router: RunningRouter;
  let config: RouterConfig;
  try {
    const document: Record<string, unknown> = { ...embedded.document, host: '127.0.0.1', port: 0, log_level: 'silent' };
    edit?.(document);
    config = configFromDocument(document);
    router = await startRouter(config, { tokenizers: embedded.tokenizers });
  } catch (error) {
    await embedded.close();
    throw error;
  }
  return {
    url: router.url,
    router,
    embedded,
    config,
    model: router.runtime.models.get(config.models[0]!.name)!,
    close: async () => {
      await router.close();
      await embedded.close();
    },
  };
}

export function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
}

export function chat(content: string | { role: string; content: string }[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  const messages = typeof content === 'string' ? [{ role: 'user', content }] : content;
  return { model: MODEL, messages, max_tokens: 4, ...extra };
}

/** The `data:` payloads of an SSE body ("[DONE]" kept as a string). */
export function sseEvents(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim().length > 0)
    .map((block) => {
      const data = block.trim().slice('data: '.length);
      return data === '[DONE]' ? data : JSON.parse(data);
    });
}

export { waitFor } from '../helpers/wait.js';

/** Everything the router books for requests is released: no ledger entries, nothing in flight or queued. */
export function settled(model: ModelRuntime): boolean {
  const stats = model.route.scheduler.stats();
  const queued = Object.values(stats.queued).reduce((n, q) => n + q.requests, 0);
  return model.route.fleet.bookedRequests === 0 && stats.inFlight === 0 && queued === 0;
}

/** A metric's value from the Prometheus text, summed over series whose labels include `labels`. */
export async function metric(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}
