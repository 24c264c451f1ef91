// Mooncake trace parsing and the synthetic tokens hash ids become.
import { describe, expect, it } from 'vitest';
import { parseMooncakeTrace, TraceError } from '../../sim/replay/mooncake.js';
import { writeKeyTokens, writeTraceTokens } from '../../sim/replay/synthetic-tokens.js';
import { promptTokens } from '../../sim/replay/workload.js';
import { jsonl } from './replay-fixtures.js';

function errorOf(text: string, options = {}): TraceError {
  try {
    parseMooncakeTrace(text, { source: 't.jsonl', ...options });
  } catch (error) {
    if (error instanceof TraceError) return error;
    throw error;
  }
  throw new Error('expected a TraceError');
}

const ok = { timestamp: 0, input_length: 1000, output_length: 3, hash_ids: [1, 2] };

describe('Mooncake trace fields', () => {
  it('reads timestamp, lengths, hash ids and session ids; each line is one request', () => {
    const w = parseMooncakeTrace(
      jsonl([
        { timestamp: 5, input_length: 1024, output_length: 7, hash_ids: [0, 1] },
        { timestamp: 9, input_length: 10, output_length: 1, hash_ids: [4], session_id: 's1', extra: 'ignored' },
        { delay: 250, input_length: 600, output_length: 2, hash_ids: [4, 5], session_id: 's1' },
        { delay_ms: 40, input_length: 700, output_length: 2, hash_ids: [4, 5], session_id: 's1' },
        { timestamp: 12, input_length: 3, output_length: 1, hash_ids: [8], session_id: 42 },
      ]),
      { source: 'x' },
    );
    expect(w.requests.map((r) => [r.id, r.sessionId, r.arrival, r.inputLength, r.outputLength])).toEqual([
      ['line1', null, { atMs: 5 }, 1024, 7],
      ['line2', 's1', { atMs: 9 }, 10, 1],
      ['line3', 's1', { delayMs: 250 }, 600, 2],
      ['line4', 's1', { delayMs: 40 }, 700, 2],
      ['line5', '42', { atMs: 12 }, 3, 1],
    ]);
  });

  it('skips blank lines but counts them in line numbers', () => {
    const w = parseMooncakeTrace(`\n${JSON.stringify(ok)}\n\n`);
    expect(w.requests.map((r) => r.id)).toEqual(['line2']);
  });

  it.each([
    ['not JSON', '{"timestamp": 0,', 1, null, /not valid JSON/],
    ['an array', '[1, 2]', 1, null, /must be a JSON object/],
    ['missing timestamp', JSON.stringify({ ...ok, timestamp: undefined }), 1, 'timestamp', /is required/],
    ['negative timestamp', JSON.stringify({ ...ok, timestamp: -1 }), 1, 'timestamp', />= 0/],
    ['string input_length', JSON.stringify({ ...ok, input_length: '9' }), 1, 'input_length', /integer >= 1/],
    ['zero output_length', JSON.stringify({ ...ok, output_length: 0 }), 1, 'output_length', /integer >= 1/],
    ['fractional output_length', JSON.stringify({ ...ok, output_length: 1.5 }), 1, 'output_length', /integer >= 1/],
    ['empty hash_ids', JSON.stringify({ ...ok, hash_ids: [] }), 1, 'hash_ids', /non-empty array/],
    ['a negative hash id', JSON.stringify({ ...ok, hash_ids: [1, -2] }), 1, 'hash_ids[1]', /integer >= 0/],
    ['too few hash ids', JSON.stringify({ ...ok, input_length: 1025 }), 1, 'input_length', /need 3 hash_ids of 512 tokens, the line has 2/],
    ['a bad session id', JSON.stringify({ ...ok, session_id: {} }), 1, 'session_id', /string or an integer/],
    ['both timestamp and delay', JSON.stringify({ ...ok, delay: 5, session_id: 's' }), 1, 'delay', /not both/],
    ['a delay without a session', `${JSON.stringify(ok)}\n${JSON.stringify({ ...ok, timestamp: undefined, delay: 5 })}`, 2, 'delay', /session_id is missing/],
    ['a delay opening its session', JSON.stringify({ ...ok, timestamp: undefined, delay_ms: 5, session_id: 'a' }), 1, 'delay_ms', /no earlier turn/],
  ])('rejects %s, naming the line and the field', (_what, text, line, field, message) => {
    const error = errorOf(text);
    expect(error.line).toBe(line);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(message);
    expect(error.message).toContain(`t.jsonl line ${line}`);
  });

  it('names the failing line in a longer trace', () => {
    const error = errorOf(jsonl([ok, ok, { ...ok, hash_ids: 'abc' }, ok]));
    expect([error.line, error.field]).toEqual([3, 'hash_ids']);
  });

  it('rejects an empty trace', () => {
    expect(() => parseMooncakeTrace('\n\n')).toThrow(/no requests/);
  });

  it('honours --trace-block-size when checking lengths', () => {
    expect(errorOf(JSON.stringify({ ...ok, input_length: 300 }), { traceBlockSize: 128 }).field).toBe('input_length');
    expect(promptTokens(parseMooncakeTrace(JSON.stringify({ ...ok, input_length: 256 }), { traceBlockSize: 128 }).requests[0]!)).toHaveLength(256);
  });
});

function traceTokens(ids: number[], length: number, blockSize: number): Uint32Array {
  const out = new Uint32Array(length);
  writeTraceTokens(out, ids, length, blockSize);
  return out;
}

describe('synthetic tokens of hash ids', () => {
  it('equal ids give equal tokens, even in different requests', () => {
    const w = parseMooncakeTrace(
      jsonl([
        { timestamp: 0, input_length: 1024, output_length: 1, hash_ids: [7, 8] },
        { timestamp: 1, input_length: 700, output_length: 1, hash_ids: [7, 9] },
      ]),
    );
    const [a, b] = w.requests.map(promptTokens);
    expect(a!.subarray(0, 512)).toEqual(b!.subarray(0, 512));
    expect(a!.subarray(512, 700)).not.toEqual(b!.subarray(512, 700));
  });

  it('distinct ids give distinct tokens at every position', () => {
    for (const [x, y] of [
      [0, 1],
      [1, 2 ** 20],
      [5, 2 ** 32 + 5],
      [2 ** 40, 2 ** 40 + 1],
    ] as const) {
      const a = traceTokens([x], 512, 512);
      const b = traceTokens([y], 512, 512);
      for (let i = 0; i < 512; i++) expect(a[i]).not.toBe(b[i]);
    }
  });

  it('a run has no repeated token within a block', () => {
    const tokens = traceTokens([123], 512, 512);
    expect(new Set(tokens).size).toBe(512);
  });

  it('the prompt is input_length tokens: the last block is cut to fit', () => {
    const full = traceTokens([3, 4], 1024, 512);
    const cut = traceTokens([3, 4], 600, 512);
    expect(cut).toHaveLength(600);
    expect(cut).toEqual(full.subarray(0, 600));
  });

  it('writes a key from any position, matching a run written whole', () => {
    const whole = new Uint32Array(70_000);
    writeKeyTokens(whole, 0, 9, 77, whole.length);
    const part = new Uint32Array(5000);
    writeKeyTokens(part, 0, 9, 77, 5000, 64_000);
    expect(part).toEqual(whole.subarray(64_000, 69_000));
  });

  it('namespaces keep equal keys apart', () => {
    const a = new Uint32Array(64);
    const b = new Uint32Array(64);
    writeKeyTokens(a, 0, 0, 5, 64);
    writeKeyTokens(b, 0, 1, 5, 64);
    expect(a).not.toEqual(b);
  });
});
