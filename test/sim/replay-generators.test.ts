// The trace-native generators (conversations, tool-agents), the Mooncake
// writer that makes their workloads replayable later, the `--workload`
// spec reader, and the ideal reuse read from trace ids instead of tokens.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { chainedBlockHashes } from '../../sim/mocker/block-hash.js';
import { generateWorkload } from '../../sim/replay/generators.js';
import { idealPrefixHits, reuseShare } from '../../sim/replay/metrics.js';
import { parseMooncakeTrace, writeMooncakeTrace } from '../../sim/replay/mooncake.js';
import { conversations, toolAgents } from '../../sim/replay/session-traffic.js';
import { limitWorkload, promptTokens, type ReplayRequest, type Workload } from '../../sim/replay/workload.js';

function bySession(requests: readonly ReplayRequest[]): ReplayRequest[][] {
  const sessions = new Map<string, ReplayRequest[]>();
  for (const r of requests) sessions.set(r.sessionId!, [...(sessions.get(r.sessionId!) ?? []), r]);
  return [...sessions.values()];
}

function startsWith(long: Uint32Array, prefix: Uint32Array): boolean {
  return prefix.length <= long.length && prefix.every((t, i) => long[i] === t);
}

/** Token arrays compared as bytes (toEqual walks long arrays element by element, slowly). */
const sameTokens = (a: Uint32Array, b: Uint32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))]!;

describe('conversations', () => {
  const w = conversations({ sessions: 120, seed: 5 });
  const sessions = bySession(w.requests);

  it('each turn extends the previous prompt by its output and a new message, a pause after the previous turn ends', () => {
    for (const turns of sessions) {
      expect('atMs' in turns[0]!.arrival).toBe(true);
      for (let t = 1; t < turns.length; t++) {
        const [prev, cur] = [turns[t - 1]!, turns[t]!];
        expect('delayMs' in cur.arrival).toBe(true);
        const added = cur.inputLength - prev.inputLength - prev.outputLength;
        expect(added).toBeGreaterThanOrEqual(1);
        expect(added).toBeLessThanOrEqual(16384);
        expect(startsWith(promptTokens(cur), promptTokens(prev))).toBe(true);
      }
    }
    expect(w.requests.every((r) => r.inputLength <= 65536 && r.tag === 'conversation')).toBe(true);
  });

  it('sessions start from a few shared system prompts, each a whole number of trace blocks', () => {
    const firstBlocks = new Map<number, number>();
    for (const turns of sessions) {
      const id = turns[0]!.trace!.hashIds[0]!;
      firstBlocks.set(id, (firstBlocks.get(id) ?? 0) + 1);
    }
    // Four system prompts (1024, 2048, 4096 and 8192 tokens): four first blocks, the first one the most used (Zipf).
    expect(firstBlocks.size).toBe(4);
    const counts = [...firstBlocks.entries()].sort(([a], [b]) => a - b).map(([, n]) => n);
    expect(counts[0]).toBe(Math.max(...counts));
    // Two sessions on the same system prompt share exactly its tokens, then differ.
    const same = sessions.filter((s) => s[0]!.trace!.hashIds[0] === sessions[0]![0]!.trace!.hashIds[0]).slice(0, 2);
    const [a, b] = same.map((s) => promptTokens(s[0]!));
    let shared = 0;
    while (a![shared] === b![shared]) shared++;
    expect([1024, 2048, 4096, 8192]).toContain(shared);
  });

  it('lengths are heavy-tailed: the p99 is many times the median', () => {
    const outputs = w.requests.map((r) => r.outputLength);
    expect(quantile(outputs, 0.5)).toBeGreaterThan(150);
    expect(quantile(outputs, 0.5)).toBeLessThan(400);
    // Log-normal with sigma 1: p99 / p50 = e^2.33, about 10.
    expect(quantile(outputs, 0.99) / quantile(outputs, 0.5)).toBeGreaterThan(5);
  });

  it('sessions arrive at the rate asked for, or at the rate that keeps `concurrency` of them going', () => {
    const gaps = (x: Workload) => {
      const starts = x.requests.filter((r) => 'atMs' in r.arrival).map((r) => (r.arrival as { atMs: number }).atMs);
      return (starts[starts.length - 1]! - starts[0]!) / (starts.length - 1);
    };
    expect(gaps(conversations({ sessions: 2000, rate: 4, turns: 1 }))).toBeGreaterThan(250 * 0.9);
    expect(gaps(conversations({ sessions: 2000, rate: 4, turns: 1 }))).toBeLessThan(250 * 1.1);
    // A session of 4 turns, 1 s pauses and 0.5 s per turn lasts 3 x 1 + 4 x 0.5 = 5 s; 10 of them at once start every 0.5 s.
    const steady = conversations({ sessions: 2000, concurrency: 10, turns: 4, maxTurns: 4, pauseMs: 1000, pauseSigma: 0, turnMs: 500 });
    expect(gaps(steady)).toBeGreaterThan(500 * 0.9);
    expect(gaps(steady)).toBeLessThan(500 * 1.1);
  });

  it('the same seed gives the same workload, another seed another', () => {
    const shape = (x: Workload) => JSON.stringify(x.requests.map((r) => [r.id, r.arrival, r.inputLength, r.outputLength, r.trace!.hashIds.slice(0, Math.ceil(r.inputLength / 512))]));
    expect(shape(conversations({ sessions: 30, seed: 5 }))).toBe(shape(conversations({ sessions: 30, seed: 5 })));
    expect(shape(conversations({ sessions: 30, seed: 6 }))).not.toBe(shape(conversations({ sessions: 30, seed: 5 })));
  });

  it('rejects options it cannot use, naming them', () => {
    expect(() => conversations({ sessions: 0 })).toThrow(/sessions must be an integer >= 1/);
    expect(() => conversations({ rate: 0, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => conversations({ outputSigma: -1 })).toThrow(/outputSigma/);
    expect(() => conversations({ systemPrompts: [8192], maxContextTokens: 8192 })).toThrow(/leaves no room after the largest system prompt/);
  });
});

describe('tool agents', () => {
  const w = toolAgents({ sessions: 40, seed: 2 });
  const sessions = bySession(w.requests);

  it('run longer sessions on larger system prompts than conversations, with short pauses', () => {
    const conv = bySession(conversations({ sessions: 40, seed: 2 }).requests);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(mean(sessions.map((s) => s.length))).toBeGreaterThan(mean(conv.map((s) => s.length)));
    expect(quantile(w.requests.map((r) => r.inputLength), 0.5)).toBeGreaterThan(quantile(conv.flat().map((r) => r.inputLength), 0.5));
    const pauses = w.requests.filter((r) => 'delayMs' in r.arrival).map((r) => (r.arrival as { delayMs: number }).delayMs);
    expect(quantile(pauses, 0.5)).toBeLessThan(2000);
    expect(w.requests.every((r) => r.tag === 'tool-agent')).toBe(true);
  });
});

describe('the Mooncake writer', () => {
  it('writes a trace that parses back into the same requests and prompts', () => {
    const w = generateWorkload('conversations:sessions=10:turns=3+tool-agents:sessions=3', { seed: 1, traceBlockSize: 256 });
    const back = parseMooncakeTrace(writeMooncakeTrace(w), { traceBlockSize: 256 });
    expect(back.requests).toHaveLength(w.requests.length);
    back.requests.forEach((r, i) => {
      const original = w.requests[i]!;
      expect([r.sessionId, r.arrival, r.inputLength, r.outputLength, r.tag]).toEqual([original.sessionId, original.arrival, original.inputLength, original.outputLength, original.tag]);
      expect(sameTokens(promptTokens(r), promptTokens(original))).toBe(true);
    });
  });

  it('writes a parsed trace back as it was read', () => {
    const text = [
      { timestamp: 0, session_id: 's', input_length: 700, output_length: 3, hash_ids: [4, 9] },
      { delay: 250.5, session_id: 's', input_length: 900, output_length: 1, hash_ids: [4, 9] },
      { timestamp: 10, input_length: 5, output_length: 2, hash_ids: [1] },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n');
    expect(writeMooncakeTrace(parseMooncakeTrace(text, {}))).toBe(text + '\n');
  });

  it('refuses prompts that are not trace blocks', () => {
    expect(() => writeMooncakeTrace(generateWorkload('cold-prompts', { seed: 0, traceBlockSize: 512 }))).toThrow(/"cold0" is not made of trace blocks/);
  });
});

describe('--workload specs', () => {
  it('give each part of a merged workload its own hash ids', () => {
    const w = generateWorkload('conversations:sessions=5+conversations:sessions=5:id_prefix=other', { seed: 3, traceBlockSize: 512 });
    const parts = [w.requests.filter((r) => r.sessionId!.startsWith('conv')), w.requests.filter((r) => r.sessionId!.startsWith('other'))];
    const [a, b] = parts.map((p) => new Set(p.flatMap((r) => r.trace!.hashIds.slice(0, Math.ceil(r.inputLength / 512)))));
    expect(a!.size).toBeGreaterThan(0);
    expect([...a!].some((id) => b!.has(id))).toBe(false);
  });

  it('read lists and ranges written with /, and camelCase options by their snake_case names', () => {
    const w = generateWorkload('agent-sessions:sessions=3:turns=2/2:system_prompt_tokens=100', { seed: 1, traceBlockSize: 512 });
    expect(bySession(w.requests).map((s) => s.length)).toEqual([2, 2, 2]);
    const t = generateWorkload('tool-agents:sessions=6:system_prompts=1000', { seed: 1, traceBlockSize: 512 });
    // One system prompt of 1000 tokens, rounded up to two 512-token blocks, under every session.
    expect(new Set(t.requests.map((r) => r.trace!.hashIds.slice(0, 2).join()))).toEqual(new Set(['0,1']));
  });

  it('name what is wrong with a spec', () => {
    const ctx = { seed: 0, traceBlockSize: 512 };
    expect(() => generateWorkload('chat', ctx)).toThrow(/unknown --workload "chat" \(known: conversations, tool-agents, agent-sessions, cold-prompts/);
    expect(() => generateWorkload('agent-sessions:turns=1/2/3', ctx)).toThrow(/turns: expected a number or a range min\/max/);
    expect(() => generateWorkload('conversations:seed=4', ctx)).toThrow(/unknown option "seed"/);
    expect(() => generateWorkload('conversations:rate=2,sessions=3', ctx)).toThrow(/separate parameters with ":"/);
  });
});

describe('the ideal reuse of trace prompts, read from their ids', () => {
  const synthetic = limitWorkload(parseMooncakeTrace(readFileSync(fileURLToPath(new URL('../../sim/traces/synthetic_trace.jsonl', import.meta.url)), 'utf8'), {}), 600);
  const workloads: [string, Workload][] = [
    ['the synthetic trace', synthetic],
    ['conversations', conversations({ sessions: 60, seed: 1, blockTokens: 128 })],
    ['tool agents', toolAgents({ sessions: 10, seed: 1 })],
  ];
  /** The same prompts with their trace ids hidden, so the ideal pass writes and hashes their tokens. */
  const tokensOnly = (w: Workload): Workload => ({ name: w.name, requests: w.requests.map(({ trace: _trace, ...r }) => r) });

  it.each(workloads)('equals the reuse found by hashing the tokens, on %s, at engine blocks that divide trace blocks and ones that do not', (_name, w) => {
    for (const blockSize of [16, 64, 48, 1000]) {
      const fromIds = reuseShare(w, idealPrefixHits(w, blockSize, chainedBlockHashes));
      expect(fromIds).toBe(reuseShare(w, idealPrefixHits(tokensOnly(w), blockSize, chainedBlockHashes)));
      expect(fromIds).toBeGreaterThan(0);
    }
  });
});
