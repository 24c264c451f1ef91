// A long conversation's ids are kept for its next turn, in memory that turn
// may write in place once the caller released the earlier turn's ids. The
// ids a caller still holds never change; every turn's ids are the ChatML
// template's text encoded whole (js-tiktoken), whatever was released, in
// whatever order plans were made and finished.
import { Template } from '@huggingface/jinja';
import fc from 'fast-check';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHATML_TEMPLATE, IM_END, IM_START } from '../../router/tokenize/chatml.js';
import { createTokenizer, type ChatMessage, type TokenizePlan } from '../../router/tokenize/index.js';
import { memoryIO } from './tokenize-arbitraries.js';

const io = memoryIO({});
const chatml = new Template(CHATML_TEMPLATE);
let oracle: Tiktoken;

beforeAll(async () => {
  const t = await createTokenizer('tiktoken:o200k_base', io);
  const [start] = t.encodeText(IM_START);
  const [end] = t.encodeText(IM_END);
  oracle = new Tiktoken(o200k, { [IM_START]: start!, [IM_END]: end! });
});

const expected = (messages: ChatMessage[]) => oracle.encode(chatml.render({ messages, add_generation_prompt: true }), 'all');

/** A conversation long enough to be kept (8 parts and more), its messages numbered. */
const history = (n: number, words = 20): ChatMessage[] =>
  Array.from({ length: n }, (_, i) => ({ role: i === 0 ? 'system' : i % 2 ? 'user' : 'assistant', content: `message ${i}: ${'lorem ipsum dolor '.repeat(words)}` }));

/** The next turn: the same history, its last message replaced (as an agent's retry, or the bench's new question). */
const retold = (messages: ChatMessage[], text: string): ChatMessage[] => [...messages.slice(0, -1), { role: 'user', content: text }];

describe('conversation ids memory', () => {
  // Turns written into released memory over 40 runs: 30-68 over 50 seeds.
  const INPLACE_FLOOR = 8;

  it('a conversation growing past the kept length and cut back below it gives the template\'s ids on every turn', async () => {
    const tok = await createTokenizer('tiktoken:o200k_base', io);
    const all = history(14, 3);
    // 1 to 14 messages (2 to 15 parts: kept from 8 parts on), then back down to short prompts sharing a kept prefix.
    const lengths = [...Array.from({ length: 14 }, (_, i) => i + 1), 5, 2, 9, 3];
    for (const n of lengths) {
      const messages = all.slice(0, n);
      const ids = tok.encodeChat(messages);
      expect([...ids]).toEqual(expected(messages));
      tok.release(ids);
    }
  });

  it('a released turn is written over by the next; a held one never is', async () => {
    const t = await createTokenizer('tiktoken:o200k_base', io);
    const base = history(11);
    const first = t.encodeChat(base);
    const firstCopy = Array.from(first);
    // Held: the next turn goes to other memory and the first turn's ids stay as they were.
    const second = t.encodeChat(retold(base, 'a second question, a little longer than the first one was'));
    expect(second.buffer).not.toBe(first.buffer);
    expect(Array.from(first)).toEqual(firstCopy);
    expect(Array.from(second)).toEqual(expected(retold(base, 'a second question, a little longer than the first one was')));
    // Released: the next turn takes its memory.
    t.release(second);
    const third = t.encodeChat(retold(base, 'a third'));
    expect(third.buffer).toBe(second.buffer);
    expect(Array.from(third)).toEqual(expected(retold(base, 'a third')));
    // Releasing an older turn's ids, or ids the encoder never lent, frees nothing.
    t.release(first);
    t.release(second);
    t.release(new Uint32Array(4));
    const fourth = t.encodeChat(retold(base, 'a fourth'));
    expect(fourth.buffer).not.toBe(third.buffer);
    expect(Array.from(third)).toEqual(expected(retold(base, 'a third')));
  });

  it('a plan reading a kept turn keeps it from being written over until the plan is finished', async () => {
    const t = await createTokenizer('tiktoken:o200k_base', io);
    const base = history(11);
    t.release(t.encodeChat(base));
    const longer = [...base.slice(0, -1), { role: 'user', content: 'message 10 and more' }, { role: 'assistant', content: 'noted' }];
    // Both plans read the kept turn; the first to finish may not write over what the second still reads.
    const a = t.planChat(retold(base, 'question a'));
    const b = t.planChat(longer);
    const aIds = a.run();
    t.release(aIds);
    const bIds = b.run();
    expect(Array.from(aIds)).toEqual(expected(retold(base, 'question a')));
    expect(Array.from(bIds)).toEqual(expected(longer));
  });

  it('any order of plans, finishes and releases gives every turn its own ids, and held ids never change', async () => {
    const turn = fc.record({ keep: fc.integer({ min: 6, max: 14 }), text: fc.string({ minLength: 1, maxLength: 30 }), release: fc.boolean(), late: fc.boolean() });
    let reused = 0;
    let inPlace = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(turn, { minLength: 1, maxLength: 8 }), async (turns) => {
        const t = await createTokenizer('tiktoken:o200k_base', io);
        const full = history(14, 6);
        const held: { ids: Uint32Array; want: number[] }[] = [];
        const released = new Set<ArrayBufferLike>();
        // Plans finished one turn late overlap with the next turn's plan.
        let waiting: { plan: TokenizePlan; messages: ChatMessage[]; release: boolean } | null = null;
        const finish = (w: NonNullable<typeof waiting>) => {
          const ids = w.plan.run();
          if (held.some((h) => h.ids.buffer === ids.buffer)) reused++;
          if (released.has(ids.buffer)) inPlace++;
          const want = expected(w.messages);
          expect(Array.from(ids)).toEqual(want);
          if (w.release) {
            t.release(ids);
            released.add(ids.buffer);
          } else held.push({ ids, want });
        };
        for (const { keep, text, release, late } of turns) {
          const messages = [...full.slice(0, keep), { role: 'user', content: text }];
          const next = { plan: t.planChat(messages), messages, release };
          if (waiting) finish(waiting);
          waiting = null;
          if (late) waiting = next;
          else finish(next);
        }
        if (waiting) finish(waiting);
        for (const h of held) expect(Array.from(h.ids)).toEqual(h.want);
      }),
      { numRuns: 40 },
    );
    // A held turn's memory is never taken, so no turn may share one; released memory is (INPLACE_FLOOR).
    expect(reused).toBe(0);
    expect(inPlace).toBeGreaterThan(INPLACE_FLOOR);
  });
});
