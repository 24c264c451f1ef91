// The mock engine's side of prefill/decode disaggregation, speaking the
// engines' own fields (server/upstream/handoff-bodies.ts has the router's):
//
//   vllm    a request with kv_transfer_params.do_remote_decode is a prefill:
//           its KV is kept for a decode worker and the answer carries
//           kv_transfer_params (do_remote_prefill, remote_engine_id,
//           remote_block_ids, remote_host, remote_port, remote_request_id);
//           one with do_remote_prefill is a decode: it pulls that KV from
//           remote_host:remote_port first. Any other request runs whole, as a
//           vLLM instance with a KV connector does.
//   sglang  a prefill-mode server needs bootstrap_host, bootstrap_port and
//           bootstrap_room and keeps the KV under that room; a decode-mode
//           server pulls the room from bootstrap_host:bootstrap_port, waiting
//           until the prefill has it. The mock's bootstrap server is its own
//           HTTP port.
//
// The pull is real HTTP between the mock servers (POST /mock/kv/pull), so a
// decode without a prefill fails as it would on the engines. The transfer
// then takes bytes per token x tokens over the configured bandwidth before
// the decode is admitted with those tokens received (EngineRequest.remoteTokens).
import type { ServerResponse } from 'node:http';
import { RequestError } from './openai-request.js';

export type MockRole = 'both' | 'prefill' | 'decode';
export type HandoffProtocol = 'vllm' | 'sglang';

export interface KvTransferShape {
  /** KV bytes per token (all layers, K and V), e.g. 131072 for an 8B model with GQA in bf16. */
  kvBytesPerToken: number;
  /** Bytes per second between a prefill and a decode worker. */
  kvBandwidth: number;
}

export const TRANSFER_DEFAULTS: KvTransferShape = {
  kvBytesPerToken: 131_072,
  // A 200 Gb/s RDMA link.
  kvBandwidth: 25e9,
};

export interface HandoffOptions extends Partial<KvTransferShape> {
  role?: MockRole;
  protocol?: HandoffProtocol;
  /** How long a pull waits for KV that is not there yet (SGLang's decode waits for its room). */
  pullWaitMs?: number;
  /** How long kept KV waits for its pull before it is dropped. */
  keepMs?: number;
}

/** Transfer time of `tokens` tokens of KV, in ms, before the engine's speedup. */
export function transferMs(tokens: number, shape: KvTransferShape): number {
  return tokens > 0 ? (tokens * shape.kvBytesPerToken * 1000) / shape.kvBandwidth : 0;
}

export function checkTransferShape(shape: KvTransferShape): KvTransferShape {
  for (const [name, value] of Object.entries(shape)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a finite number > 0, got ${value}`);
  }
  return shape;
}

/** What the handoff asks of one generation before and after the engine runs it. */
export interface HandoffPart {
  /** Prompt tokens whose KV came over from a prefill worker. */
  remoteTokens: number;
  /** Tokens to generate in place of the request's (a prefill server stops at the first). */
  maxTokens?: number;
  /** Called when the engine finished the request: fields to add to a JSON answer. */
  finished?(promptTokens: number): Record<string, unknown> | undefined;
}

const WHOLE: HandoffPart = { remoteTokens: 0 };

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function field(param: string, message: string): RequestError {
  return new RequestError(`${param}: ${message}`, 400, 'invalid_request', param);
}

/** KV kept by a prefill worker until a decode worker pulls it, by transfer key. */
class KeptKv {
  private readonly kept = new Map<string, { tokens: number; timer: NodeJS.Timeout }>();
  private readonly waiting = new Map<string, ((tokens: number) => void)[]>();

  constructor(private readonly keepMs: number) {}

  keep(key: string, tokens: number): void {
    const waiters = this.waiting.get(key);
    if (waiters) {
      this.waiting.delete(key);
      for (const wake of waiters) wake(tokens);
      return;
    }
    const previous = this.kept.get(key);
    if (previous) clearTimeout(previous.timer);
    const timer = setTimeout(() => this.kept.delete(key), this.keepMs);
    timer.unref();
    this.kept.set(key, { tokens, timer });
  }

  /** The kept tokens (taken once), waiting up to waitMs for them; null when they never came. */
  take(key: string, waitMs: number): Promise<number | null> {
    const entry = this.kept.get(key);
    if (entry) {
      clearTimeout(entry.timer);
      this.kept.delete(key);
      return Promise.resolve(entry.tokens);
    }
    if (waitMs <= 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const wake = (tokens: number | null) => {
        clearTimeout(timer);
        resolve(tokens);
      };
      const timer = setTimeout(() => {
        const list = this.waiting.get(key)?.filter((w) => w !== wake) ?? [];
        if (list.length > 0) this.waiting.set(key, list);
        else this.waiting.delete(key);
        resolve(null);
      }, waitMs);
      const list = this.waiting.get(key) ?? [];
      list.push(wake);
      this.waiting.set(key, list);
    });
  }

  clear(): void {
    for (const { timer } of this.kept.values()) clearTimeout(timer);
    this.kept.clear();
    for (const waiters of this.waiting.values()) for (const wake of waiters) wake(0);
    this.waiting.clear();
  }
}

let engines = 0;

export class MockHandoff {
  readonly role: MockRole;
  readonly protocol: HandoffProtocol;
  readonly shape: KvTransferShape;
  /** This engine's id in vLLM's params. */
  readonly engineId = `mock-engine-${process.pid}-${++engines}`;
  private readonly kept: KeptKv;
  private readonly pullWaitMs: number;
  private serial = 0;
  /** Where this worker is reached (set once it listens). */
  host = '127.0.0.1';
  port = 0;

  constructor(
    options: HandoffOptions,
    private readonly blockSize: number,
    private readonly speedup: number,
  ) {
    this.role = options.role ?? 'both';
    this.protocol = options.protocol ?? 'vllm';
    this.shape = checkTransferShape({ kvBytesPerToken: options.kvBytesPerToken ?? TRANSFER_DEFAULTS.kvBytesPerToken, kvBandwidth: options.kvBandwidth ?? TRANSFER_DEFAULTS.kvBandwidth });
    this.pullWaitMs = options.pullWaitMs ?? 30_000;
    this.kept = new KeptKv(options.keepMs ?? 60_000);
  }

  /** Reads the request's handoff fields; a decode pulls its KV and waits out the transfer before this returns. */
  async part(body: Record<string, unknown>, isGone: () => boolean): Promise<HandoffPart> {
    return this.protocol === 'vllm' ? this.vllmPart(body, isGone) : this.sglangPart(body, isGone);
  }

  /** POST /mock/kv/pull {key, wait_ms}: another worker takes KV kept here. */
  async servePull(raw: string, res: ServerResponse): Promise<void> {
    let key: unknown;
    let wait: unknown;
    try {
      ({ key, wait_ms: wait } = JSON.parse(raw) as Record<string, unknown>);
    } catch {
      throw new RequestError('the pull body is not JSON', 400, 'invalid_json');
    }
    if (typeof key !== 'string') throw field('key', 'must be a string');
    const waitMs = typeof wait === 'number' && Number.isFinite(wait) ? Math.max(0, Math.min(wait, this.pullWaitMs)) : 0;
    const tokens = await this.kept.take(key, waitMs);
    const text = JSON.stringify(tokens === null ? { error: `no KV is kept for ${key}` } : { tokens });
    if (res.destroyed) return;
    res.writeHead(tokens === null ? 404 : 200, { 'content-type': 'application/json' });
    res.end(text);
  }

  close(): void {
    this.kept.clear();
  }

  private async vllmPart(body: Record<string, unknown>, isGone: () => boolean): Promise<HandoffPart> {
    const params = body.kv_transfer_params;
    if (params === undefined || params === null) return WHOLE;
    if (!isObject(params)) throw field('kv_transfer_params', 'must be an object');
    if (params.do_remote_decode === true) {
      if (this.role === 'decode') throw field('kv_transfer_params.do_remote_decode', 'this worker only decodes');
      const key = `req-${this.engineId}-${++this.serial}`;
      return {
        remoteTokens: 0,
        finished: (promptTokens) => {
          const blocks = Math.floor(promptTokens / this.blockSize);
          this.kept.keep(key, blocks * this.blockSize);
          return {
            kv_transfer_params: {
              do_remote_prefill: true,
              do_remote_decode: false,
              remote_engine_id: this.engineId,
              remote_request_id: key,
              remote_block_ids: Array.from({ length: blocks }, (_, i) => i),
              remote_host: this.host,
              remote_port: this.port,
              tp_size: 1,
            },
          };
        },
      };
    }
    if (params.do_remote_prefill !== true) return WHOLE;
    if (this.role === 'prefill') throw field('kv_transfer_params.do_remote_prefill', 'this worker only prefills');
    const { remote_engine_id: engine, remote_request_id: key, remote_host: host, remote_port: port, remote_block_ids: blocks } = params;
    if (typeof engine !== 'string') throw field('kv_transfer_params.remote_engine_id', 'must be a string');
    if (typeof key !== 'string') throw field('kv_transfer_params.remote_request_id', 'must be a string');
    if (typeof host !== 'string') throw field('kv_transfer_params.remote_host', 'must be a string');
    if (!Number.isInteger(port)) throw field('kv_transfer_params.remote_port', 'must be an integer');
    if (!Array.isArray(blocks)) throw field('kv_transfer_params.remote_block_ids', 'must be a list');
    return this.pull(host, port as number, key, 0, isGone);
  }

  private async sglangPart(body: Record<string, unknown>, isGone: () => boolean): Promise<HandoffPart> {
    // A server started without a disaggregation mode ignores the bootstrap fields.
    if (this.role === 'both') return WHOLE;
    const { bootstrap_host: host, bootstrap_port: port, bootstrap_room: room } = body;
    if (typeof host !== 'string' || host === '') throw field('bootstrap_host', `a ${this.role}-mode server needs the prefill server's bootstrap host`);
    if (!Number.isInteger(port)) throw field('bootstrap_port', `a ${this.role}-mode server needs the prefill server's bootstrap port`);
    if (!Number.isSafeInteger(room) || (room as number) < 0) throw field('bootstrap_room', `a ${this.role}-mode server needs a bootstrap room (an integer >= 0)`);
    const key = `room-${room}`;
    if (this.role === 'prefill') {
      return {
        remoteTokens: 0,
        maxTokens: 1,
        finished: (promptTokens) => {
          this.kept.keep(key, Math.floor(promptTokens / this.blockSize) * this.blockSize);
          return undefined;
        },
      };
    }
    // The prefill may still be computing: the pull waits for the room.
    return this.pull(host, port as number, key, this.pullWaitMs, isGone);
  }

  private async pull(host: string, port: number, key: string, waitMs: number, isGone: () => boolean): Promise<HandoffPart> {
    const at = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
    let tokens: number;
    try {
      const answer = await fetch(`http://${at}:${port}/mock/kv/pull`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ key, wait_ms: waitMs }),
        signal: AbortSignal.timeout(waitMs + 10_000),
      });
      const reply = (await answer.json()) as { tokens?: unknown; error?: unknown };
      if (answer.status !== 200 || typeof reply.tokens !== 'number') throw new Error(String(reply.error ?? `status ${answer.status}`));
      tokens = reply.tokens;
    } catch (error) {
      throw new RequestError(`KV transfer from ${host}:${port} failed: ${(error as Error).message}`, 500, 'kv_transfer_failed');
    }
    const ms = transferMs(tokens, this.shape) / this.speedup;
    if (ms > 0 && !isGone()) await new Promise((resolve) => setTimeout(resolve, ms));
    return { remoteTokens: tokens };
  }
}
