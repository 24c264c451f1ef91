// Which LoRA adapters a worker has loaded, asked of the engine itself. vLLM
// and SGLang list the loaded adapters in GET /v1/models, each under its own
// name with its base model as `parent`, and both load and unload adapters at
// run time (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter, SGLang's
// /load_lora_adapter and /unload_lora_adapter), so the listing is what the
// engine serves now. KV events cannot say as much: a stored block's
// `lora_name` shows an adapter was in use, but an unload publishes nothing
// and an adapter loaded and not yet used has no blocks.
/** The adapters of `model` in a /v1/models answer (entries whose parent is the model); null for an answer of another shape. */
export function loadedAdapters(body: unknown, model: string): string[] | null {
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return null;
  const names: string[] = [];
  for (const card of data) {
    const { id, parent } = (card ?? {}) as { id?: unknown; parent?: unknown };
    if (typeof id === 'string' && id !== '' && parent === model) names.push(id);
  }
  return names;
}

/** GETs a path of the worker's API: its JSON on a 200 within the timeout, else null. */
export type WorkerGet = (path: string, timeoutMs: number) => Promise<unknown>;

/**
 * Asks a worker's /v1/models every `intervalMs` (the first time at once)
 * and hands on the adapters of `model` it lists. An answer that fails or
 * does not parse is skipped: what the worker was last known to have stands.
 */
export class AdapterPoller {
  private timer: NodeJS.Timeout | null = null;
  private inFlight = false;
  private closed = false;

  constructor(
    private readonly get: WorkerGet,
    private readonly model: string,
    private readonly intervalMs: number,
    private readonly onAdapters: (names: string[]) => void,
  ) {}

  start(): void {
    void this.poll();
    this.timer = setInterval(() => void this.poll(), this.intervalMs);
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async poll(): Promise<void> {
    // A slow engine gets one question at a time, and at least a second to answer it.
    if (this.inFlight || this.closed) return;
    this.inFlight = true;
    try {
      const names = loadedAdapters(await this.get('/v1/models', Math.max(this.intervalMs, 1000)), this.model);
      if (names && !this.closed) this.onAdapters(names);
    } finally {
      this.inFlight = false;
    }
  }
}
