// Serves one /v1/chat/completions or /v1/completions request on the mock
// engine: tokens stream as SSE chunks at the end of each engine step (or are
// gathered into one JSON response), usage reports the engine's cache reuse,
// and a client that goes away aborts the engine request so its blocks free.
import type { ServerResponse } from 'node:http';
import type { MockEngine } from './engine.js';
import type { Faults } from './fault-injection.js';
import type { MockRequest } from './openai-request.js';
import { completionBody, SseWriter, SyntheticText, usageOf, type ResponseIdentity } from './openai-response.js';
import type { MediaSpan } from '../../router/media-keys.js';
import type { RequestResult } from './sequence.js';

export interface Generation {
  engine: MockEngine;
  request: MockRequest;
  prompt: Uint32Array;
  /** The LoRA adapter the request's model names; null for the base model. */
  lora: string | null;
  /** The prompt's images and their runs, folded into its blocks as an engine does. */
  media?: readonly MediaSpan[];
  identity: ResponseIdentity;
  faults: Faults;
  /** Prompt tokens whose KV came from a prefill worker (a disaggregated decode). */
  remoteTokens?: number;
  /** The request finished: fields its JSON answer carries besides the completion (a prefill's kv_transfer_params). */
  finished?(promptTokens: number): Record<string, unknown> | undefined;
}

export function sendJson(res: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Submits to the engine and answers as tokens come; throws (before any byte) if the engine refuses. */
export function serveGeneration(res: ServerResponse, g: Generation): void {
  const { engine, request, prompt, identity, faults } = g;
  const keys = { lora: g.lora, cacheSalt: request.cacheSalt };
  const media = g.media;
  const id = identity.id;
  const words = new SyntheticText(prompt);
  let ended = false;
  // A simulated worker failure: what was written still reaches the client, then the connection drops.
  const cut = (): void => {
    ended = true;
    engine.abort(id);
    if (res.socket) res.socket.destroySoon();
    else res.destroy();
  };
  // Closing before the end (client gone, or our own fault injection) aborts the engine request.
  const abortOnClose = (): void => {
    res.on('close', () => {
      if (!ended) engine.abort(id);
    });
  };
  const usage = (r: RequestResult) => usageOf(r.promptTokens, r.outputTokens, r.cachedTokens);
  const cutAfter = faults.disconnectAfter;
  if (request.stream) {
    const sse = new SseWriter(request.kind, identity);
    engine.submit({
      id,
      tokens: prompt,
      maxTokens: request.maxTokens,
      ...keys,
      media,
      remoteTokens: g.remoteTokens,
      onToken: (index) => {
        res.write(sse.token(index, words.token(index), index === request.maxTokens - 1));
        if (cutAfter !== null && index + 1 >= cutAfter) cut();
      },
      onComplete: (result) => {
        if (ended) return;
        ended = true;
        g.finished?.(result.promptTokens);
        res.end(request.includeUsage ? sse.usage(usage(result)) + sse.done() : sse.done());
      },
      onError: () => cut(),
    });
    abortOnClose();
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    // Headers go out now, before the first token, as a real engine's would.
    res.flushHeaders();
    if (cutAfter === 0) cut();
    return;
  }
  engine.submit({
    id,
    tokens: prompt,
    maxTokens: request.maxTokens,
    ...keys,
    media,
    remoteTokens: g.remoteTokens,
    onToken: (index) => {
      if (cutAfter !== null && index + 1 >= cutAfter) cut();
    },
    onComplete: (result) => {
      if (ended) return;
      ended = true;
      sendJson(res, 200, { ...completionBody(request.kind, identity, words.text(result.outputTokens), usage(result)), ...g.finished?.(result.promptTokens) });
    },
    onError: () => cut(),
  });
  abortOnClose();
  if (cutAfter === 0) cut();
}
