// Shared helpers for the mock-engine tests: an engine on a virtual clock that
// records its steps, events and results.
import { VirtualClock } from '../../router/clock.js';
import type { KvEventBatch } from '../../router/kv-events.js';
import type { StepReport } from '../../sim/mocker/engine-options.js';
import { MockEngine } from '../../sim/mocker/engine.js';
import type { MockEngineOptions } from '../../sim/mocker/engine-options.js';
import type { RequestResult } from '../../sim/mocker/sequence.js';

export interface Rig {
  clock: VirtualClock;
  engine: MockEngine;
  steps: StepReport[];
  batches: KvEventBatch[];
  results: Map<string, RequestResult>;
  /** Submits a request that records its result; returns its token times as they arrive. */
  send(id: string, tokens: Uint32Array, maxTokens: number): number[];
}

export function rig(options: Omit<MockEngineOptions, 'clock'> = {}): Rig {
  const clock = new VirtualClock();
  const steps: StepReport[] = [];
  const batches: KvEventBatch[] = [];
  const results = new Map<string, RequestResult>();
  const engine = new MockEngine({
    clock,
    onStep: (s) => steps.push(s),
    onEvents: (b) => batches.push(b),
    ...options,
  });
  const send = (id: string, tokens: Uint32Array, maxTokens: number): number[] => {
    const times: number[] = [];
    engine.submit({
      id,
      tokens,
      maxTokens,
      onToken: (_i, at) => times.push(at),
      onComplete: (r) => results.set(id, r),
    });
    return times;
  };
  return { clock, engine, steps, batches, results, send };
}

/** `n` token ids counting up from `start` (distinct prompts use distinct starts). */
export function tokens(n: number, start = 1): Uint32Array {
  const t = new Uint32Array(n);
  for (let i = 0; i < n; i++) t[i] = start + i;
  return t;
}

export function concat(...parts: Uint32Array[]): Uint32Array {
  const out = new Uint32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function storedHashes(batches: KvEventBatch[]): bigint[] {
  return batches.flatMap((b) => b.events.flatMap((e) => (e.type === 'stored' ? e.blockHashes : [])));
}

export function removedHashes(batches: KvEventBatch[]): bigint[] {
  return batches.flatMap((b) => b.events.flatMap((e) => (e.type === 'removed' ? e.blockHashes : [])));
}
