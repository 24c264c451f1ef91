// Reading the engine's usage from the end of a relayed response, however the
// bytes were split into chunks.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { numberAfter, UsageTail } from '../../server/diagnostics/usage-tail.js';

/** Splits a buffer at the given cut points. */
function split(bytes: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  out.push(bytes.subarray(from));
  return out.filter((c) => c.length > 0);
}

describe('UsageTail', () => {
  it('finds prompt_tokens and cached_tokens of a JSON body or a stream, split anywhere', () => {
    fc.assert(
      fc.property(
        fc.nat(1_000_000),
        fc.nat(1_000_000),
        fc.string({ maxLength: 3000 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 40 }),
        (prompt, cached, text, stream, cuts) => {
          const usage = { prompt_tokens: prompt, completion_tokens: 3, total_tokens: prompt + 3, prompt_tokens_details: { cached_tokens: cached } };
          const body = stream
            ? `data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\ndata: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`
            : JSON.stringify({ id: 'x', choices: [{ message: { content: text } }], usage }, null, stream ? 0 : 1);
          const tail = new UsageTail();
          for (const chunk of split(Buffer.from(body), cuts)) tail.add(chunk);
          expect(tail.read()).toEqual({ promptTokens: prompt, cachedTokens: cached });
        },
      ),
    );
  });

  it('says null for a response without usage details', () => {
    const tail = new UsageTail();
    tail.add(Buffer.from('{"usage":{"prompt_tokens":12,"completion_tokens":2}}'));
    expect(tail.read()).toEqual({ promptTokens: 12, cachedTokens: null });
  });

  it('keeps only the last few KiB: usage further from the end is not found', () => {
    const tail = new UsageTail();
    tail.add(Buffer.from('{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":4}},"padding":"'));
    for (let i = 0; i < 10; i++) tail.add(Buffer.from('x'.repeat(1024)));
    tail.add(Buffer.from('"}'));
    expect(tail.read()).toEqual({ promptTokens: null, cachedTokens: null });
  });
});

describe('numberAfter', () => {
  it('reads the integer after the key and its colon, with spaces around', () => {
    expect(numberAfter(Buffer.from('{"cached_tokens" : 42}'), Buffer.from('"cached_tokens"'))).toBe(42);
    expect(numberAfter(Buffer.from('{"cached_tokens": null}'), Buffer.from('"cached_tokens"'))).toBeNull();
    expect(numberAfter(Buffer.from('{"cached_tokens_x": 1}'), Buffer.from('"cached_tokens"'))).toBeNull();
    // The last occurrence wins (a stream's final usage).
    expect(numberAfter(Buffer.from('"cached_tokens":1,"cached_tokens":7'), Buffer.from('"cached_tokens"'))).toBe(7);
  });
});
